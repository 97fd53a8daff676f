"""The config's error and the declared constraints its fields' types carry (enforced by ``ctxbench.validation``
when a config file is read). A number without one must be finite and not negative."""
from __future__ import annotations

from typing import Annotated

from ctxbench.validation import Range


class ConfigError(ValueError):
    """The user's config file is unreadable or holds a value of the wrong type."""


# Declared constraints (enforced when a config file is read, by ctxbench.validation). A number without one must
# be finite and not negative; declare one where zero (or more than one) makes no sense.
PositiveInt = Annotated[int, Range(gt=0)]
PositiveFloat = Annotated[float, Range(gt=0)]
Share = Annotated[float, Range(ge=0, le=1)]  # a share of a budget, a probability, a decay factor
Port = Annotated[int, Range(ge=1, le=65535)]
# the most tokens a budget, a context window or a reply cap may name: far above any model's window (today's
# largest hold a few million), far below what breaks arithmetic and storage (a budget of 1e23 was accepted)
MAX_TOKENS = 100_000_000
Tokens = Annotated[int, Range(gt=0, le=MAX_TOKENS)]
Penalty = Annotated[float, Range(ge=-100, le=0)]  # a weight that counts against (the instruction detector's cues)
AUTO = "auto"  # planner.default_budget: the model's context limit minus the reply reserve
