"""History strategies: policies that pick past turns (groups) for a plan under the history budget.

Each strategy is a function ``select(selection, budget, context)`` that records its choices in the
``HistorySelection``; atoms it leaves are excluded ``over_budget`` unless it gave another reason.
"""
from __future__ import annotations

from ctxbench.planner.strategies.context import Strategy


def get_strategy(name: str) -> Strategy:
    from ctxbench.planner.strategies import fused, hybrid, levels, semantic, window

    table: dict[str, Strategy] = {
        "window": window.select,
        "hybrid": hybrid.select,
        "levels": levels.select,
        "semantic": semantic.select,
        "fused": fused.select,
    }
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown history strategy {name!r}; known: {', '.join(table)}") from None
