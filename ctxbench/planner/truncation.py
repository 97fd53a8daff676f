"""Tool-result truncation by tier (seed 001).

* current turn (the active group): the ``active_recent_count`` newest tool results keep up to
  ``active_recent_chars`` characters, older ones ``active_older_chars``;
* past (inactive) groups: every tool result keeps ``inactive_chars``.

A truncated result ends with a hint that names the message id, so the model can read the full
output with ``query_db``. Only ``tool`` role messages are truncated.
"""
from __future__ import annotations

from typing import Sequence

from ctxbench.config import TruncationConfig

TRUNCATION_HINT = (
    '... [TRUNCATED. Use query_db(sql="SELECT content FROM messages WHERE id={id}") to see full output]'
)

from ctxbench.records.vocab import TIER_ACTIVE_OLDER, TIER_ACTIVE_RECENT, TIER_INACTIVE  # noqa: E402
from ctxbench.records.vocab import TRUNCATION_TIERS as TIERS  # noqa: E402


def tier_limit(tier: str, config: TruncationConfig) -> int:
    if tier == TIER_ACTIVE_RECENT:
        return config.active_recent_chars
    if tier == TIER_ACTIVE_OLDER:
        return config.active_older_chars
    if tier == TIER_INACTIVE:
        return config.inactive_chars
    raise ValueError(f"unknown truncation tier {tier!r}")


def active_tiers(tool_result_ids: Sequence[int], config: TruncationConfig) -> dict[int, str]:
    """Tier of each tool result of the current turn: the newest ``active_recent_count`` are recent."""
    ordered = sorted(tool_result_ids)
    recent_from = max(0, len(ordered) - config.active_recent_count)
    return {mid: (TIER_ACTIVE_RECENT if i >= recent_from else TIER_ACTIVE_OLDER) for i, mid in enumerate(ordered)}


def truncate(text: str, limit: int, message_id: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters plus the retrieval hint, and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[: max(0, limit)] + "\n" + TRUNCATION_HINT.format(id=message_id), True


def describe(entries: Sequence[tuple[int, str, int, int, bool]]) -> str:
    """PlanItem detail for tool results: ``entries`` are (message id, tier, limit, original chars, cut)."""
    if not entries:
        return ""
    tiers: dict[str, int] = {}
    for _mid, tier, limit, _chars, _cut in entries:
        tiers.setdefault(tier, limit)
    text = "tool results: " + ", ".join(f"{tier} tier (<= {limit} chars)" for tier, limit in tiers.items())
    cut = [f"msg {mid} ({chars} chars)" for mid, _tier, _limit, chars, was_cut in entries if was_cut]
    if cut:
        text += "; truncated " + ", ".join(cut)
    return text
