"""Context Mode profiles (off / light / heavy) looked up by name from the config."""
from __future__ import annotations

from ctxbench.config import ModeProfile, PlannerConfig


def mode_profile(config: PlannerConfig, name: str) -> ModeProfile:
    """The named profile; raises ``ConfigError`` naming the known modes when ``name`` is unknown."""
    return config.mode(name)


def share_tokens(budget: int, share: float) -> int:
    """Tokens a section may take: ``share`` of the plan budget, rounded down, never negative."""
    return max(0, int(budget * share))
