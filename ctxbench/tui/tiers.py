"""Tool-result truncation tiers as the chat pane shows them (seed 001): which tier each result is in, and its note."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ctxbench.config import TruncationConfig
from ctxbench.tui.present import tok


@dataclass(frozen=True)
class Tier:
    limit: int
    name: str  # active_recent | active_older | inactive


def truncation_tiers(tool_results: Iterable[tuple[int, int]], active_group: int,
                     cfg: TruncationConfig) -> dict[int, Tier]:
    """Tier of each tool result, given ``(message_id, group_id)`` in chronological order.

    The newest ``active_recent_count`` results of the active group keep up to
    ``active_recent_chars``, older ones in the active group ``active_older_chars``, results in
    other groups ``inactive_chars`` (seed 001).
    """
    items = list(tool_results)
    tiers: dict[int, Tier] = {}
    active = [mid for mid, gid in items if gid == active_group]
    recent = set(active[-cfg.active_recent_count:]) if cfg.active_recent_count > 0 else set()
    for mid, gid in items:
        if gid != active_group:
            tiers[mid] = Tier(cfg.inactive_chars, "inactive")
        elif mid in recent:
            tiers[mid] = Tier(cfg.active_recent_chars, "active_recent")
        else:
            tiers[mid] = Tier(cfg.active_older_chars, "active_older")
    return tiers


def tier_note(length: int, tier: Tier | None) -> str:
    if tier is None:
        return f"{tok(length)} chars"
    if length > tier.limit:
        return f"{tok(length)} chars · truncated to {tok(tier.limit)} in context ({tier.name} tier)"
    return f"{tok(length)} chars · {tier.name} tier (≤{tok(tier.limit)})"
