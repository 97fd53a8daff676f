//! The fixture crate.

/// A counter that only goes up.
#[derive(Debug, Clone)]
pub struct Counter {
    value: u64,
}

/// Things that can be reset.
pub trait Reset {
    fn reset(&mut self);
}

pub enum Mode {
    Fast,
    Slow,
}

impl Counter {
    /// A new counter at zero.
    pub fn new() -> Self {
        Counter { value: 0 }
    }

    pub fn bump(&mut self) -> u64 {
        self.value += 1;
        helper(self.value)
    }
}

impl Reset for Counter {
    fn reset(&mut self) {
        self.value = 0;
    }
}

fn helper(v: u64) -> u64 {
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn bumps() {
        let mut c = super::Counter::new();
        c.bump();
    }
}
