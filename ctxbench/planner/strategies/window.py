"""Rolling window (seeds 000/001): the last N turns (0 = all), newest first until the budget is full.

Turns older than the window are excluded ``outside_window``. Inside it, turns are taken newest
first; the first turn that does not fit whole is taken partially (its user message and a prefix of
its atoms); older turns that still fit whole are taken after it (a long turn no longer ends the window
and leaves the budget empty), the others are ``over_budget``. In the cache order (``planner/cache.py``) the
window starts at a page boundary instead, so consecutive plans share it as a prefix; turns before it are
``over_budget``.
"""
from __future__ import annotations

from typing import Sequence

from ctxbench.planner.budget import FULL, Budget, HistorySelection
from ctxbench.planner.cache import fill_anchored, page_tokens, uses_cache_order
from ctxbench.planner.strategies.context import StrategyContext

REASON = "recent_window"
ANCHORED_DETAIL = "latest turns from a page boundary (cache order)"


def fill_newest_first(selection: HistorySelection, budget: Budget, order: Sequence[int], reason: str = REASON) -> None:
    partial_taken = False
    smallest = selection.smallest_before()
    for gi in reversed(order):
        remaining = budget.remaining
        if remaining <= 0 or (partial_taken and remaining < smallest[gi]):
            break  # nothing older fits whole any more (``order`` is chronological)
        if selection.fill_group(gi, budget, reason, partial=not partial_taken) != FULL:
            partial_taken = True


def limit_window(selection: HistorySelection, order: list[int], n: int) -> list[int]:
    """The last ``n`` of ``order`` (all when n <= 0); the older ones get ``outside_window``."""
    if n <= 0 or len(order) <= n:
        return order
    for gi in order[:-n]:
        selection.set_default(gi, "outside_window", f"older than the last {n} turns")
    return order[-n:]


def select(selection: HistorySelection, budget: Budget, context: StrategyContext) -> None:
    # (the turns a summary stands in for are never recent: when ``semantic`` falls back here they stay out)
    turns = selection.recent(selection.available())
    order = limit_window(selection, turns, context.inputs.window_groups)
    if uses_cache_order(context.config) and fill_anchored(
            selection, budget, order, page_tokens(context.config, context.inputs.budget), REASON,
            ANCHORED_DETAIL, pages_from=turns):
        return
    fill_newest_first(selection, budget, order)
