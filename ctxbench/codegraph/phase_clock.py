"""Where a cold index spends its time: seconds per phase, added up over every file.

Parsing one file runs three phases in turn (the secret scan, the parse and extraction, the cards); each
parser adds its share to a :class:`PhaseClock` when it is given one, and ``build_index`` reports the sums
among its phases. Timing is a few ``perf_counter`` calls per file.
"""
from __future__ import annotations

PHASE_SECRETS = "secrets"  # the secret scan (masking) of each file's text
PHASE_CARDS = "cards"  # building each symbol's card from the masked text


class PhaseClock:
    """Seconds per phase, summed across calls."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def get(self, phase: str) -> float:
        return self.seconds.get(phase, 0.0)
