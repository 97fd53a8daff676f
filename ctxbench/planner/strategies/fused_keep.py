"""The fused strategy's cache-keeping step: a prefix of the previous plan's history atoms, in its order, kept while it
still scores near the cut (``planner.cache.kept_prefix``), so consecutive plans share a prompt-cache prefix."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ctxbench.config import PlannerConfig
from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.planner.cache import kept_prefix
from ctxbench.planner.strategies.fused_fill import fill_rest, record, taken_units
from ctxbench.planner.strategies.fused_units import Units

KEPT_NOTE = "; kept from the previous plan (prompt cache)"


def keep_previous(selection: HistorySelection, budget: Budget, units: Units, order: np.ndarray, score: np.ndarray,
                  values: list[float], kw: np.ndarray, kept: Sequence[str], planner: PlannerConfig, history_budget: int,
                  by_recency: bool) -> tuple[str, ...]:
    """Include the prefix of the previous plan's history atoms ``kept`` that stays (``planner.cache.kept_prefix``),
    charged to ``budget`` before the rest is picked; their details name their rank and say they were kept. Returns
    the ids of the previous plan's atoms the kept prefix spans that are in (kept, or in already: the latest turns,
    the rules), in the previous plan's order."""
    unit_ids = units.unit_ids(selection)
    competing = np.zeros(units.n, dtype=bool)
    competing[order] = True
    taken = taken_units(selection, units)
    share = min(budget.remaining, int(history_budget * planner.cache_keep_share))

    def unit_of(atom: str) -> int:
        u = unit_ids.get(atom, -1)
        return u if u >= 0 and competing[u] else -1

    keep, end = kept_prefix(kept, unit_of, score, order.tolist(), units.tokens, units.user_units, taken,
                            budget.remaining, share, planner.cache_keep_margin,
                            int(history_budget * planner.cache_keep_slack))
    if keep:
        chosen, _ranks, users = fill_rest(selection, budget, units, np.asarray(keep, dtype=np.int64))
        rank = np.empty(units.n, dtype=np.int64)
        rank[order] = np.arange(1, len(order) + 1)
        record(selection, units, chosen, [int(rank[u]) for u in chosen], users, values, kw, by_recency, KEPT_NOTE)
        for u in (*chosen, *users):  # with the user messages they brought
            if u >= 0:
                taken[u] = 1
    # the prefix of the previous plan's atoms this one sends in that order: those kept, and those in already
    return tuple(atom for atom in kept[:end] if taken[unit_ids[atom]])
