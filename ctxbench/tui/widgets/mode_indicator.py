"""``CTX: Light`` beside the input: the session's Context Mode."""
from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from ctxbench.tui.present import mode_label


class ModeIndicator(Static):
    mode: reactive[str] = reactive("light")

    def __init__(self, mode: str = "light", **kwargs) -> None:
        super().__init__("", **kwargs)
        self.set_reactive(ModeIndicator.mode, mode)

    def on_mount(self) -> None:
        self.watch_mode(self.mode)

    def watch_mode(self, mode: str) -> None:
        self.update(f"CTX: {mode_label(mode)}")
        for name in ("off", "light", "heavy"):
            self.set_class(mode == name, f"-{name}")
        self.tooltip = "Context Mode: ctrl+t cycles Off → Light → Heavy"
