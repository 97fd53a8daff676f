"""Semantic sliding window (seed 003) — the seam for the embedder.

score(turn) = similarity_weight * similarity + recency_weight * 0.5 ** (age / half_life)
              + sum of the importance weights of the flags in the turn

where ``similarity`` comes from ``inputs.semantic_ranking`` ((group id, cosine similarity), computed
by ``retrieval/history_vectors.py`` with the code retriever's embedder: the most similar earlier turns
above a floor) and ``age`` counts turns back from the newest one.
Turns are taken by score (ties: newer first) while they fit; ``window_groups`` > 0 caps how many
compete. Reason ``semantic_match`` for turns the ranking scored, else ``recent_window``.
When the ranking is empty (no embedder ready, or no turn similar enough) the plan says so in its
notes and falls back to the rolling window.
"""
from __future__ import annotations

import math

import numpy as np

from ctxbench.planner.budget import AtomValues, Budget, HistorySelection
from ctxbench.planner.strategies import window
from ctxbench.planner.strategies.context import StrategyContext
from ctxbench.records.scored import ScoredIds

FILL_BLOCK = 256  # turns checked against the budget at once (those that cannot fit are skipped in bulk)
FALLBACK_NOTE = ("semantic: no similarity ranking for this query (no embedder ready, or no earlier turn "
                 "similar enough); fell back to recency")


class _Turns:
    """The competing turns of one history as arrays, chronological (kept with the history's layout): group ids,
    importance, tokens needed whole, and the recency of each position."""

    def __init__(self, selection: HistorySelection, available: list[int], weights: dict[str, float],
                 memo_key: tuple) -> None:
        groups = selection.groups
        self.available = np.array(available, dtype=np.int64)
        self.gids = np.array([groups[gi].group_id for gi in available], dtype=np.int64)
        self.by_gid = np.argsort(self.gids, kind="stable")
        importance = []
        for gi in available:
            group = groups[gi]
            value = 0.0
            if group.flags:
                value = group.memo.get(memo_key)
                if value is None:
                    value = sum(weights.get(flag, 0.0) for flag in sorted(group.flags))
                    group.memo[memo_key] = value
            importance.append(value)
        self.importance = np.array(importance, dtype=np.float64)
        self.tokens = np.array([groups[gi].eligible_tokens for gi in available], dtype=np.int64)
        self._recency: dict[float, np.ndarray] = {}

    def recency(self, half_life: float) -> np.ndarray:
        """0.5 ** (age / half_life) per position, the newest 1.0, each older one the next times the decay (the
        products made in that order, so every score is the one a turn-by-turn loop gives)."""
        hit = self._recency.get(half_life)
        if hit is None:
            n = len(self.gids)
            if half_life > 0 and n:
                factors = np.full(n, 0.5 ** (1.0 / half_life))
                factors[0] = 1.0
                hit = np.multiply.accumulate(factors)[::-1].copy()
            else:
                hit = np.zeros(n)
            self._recency[half_life] = hit
        return hit

    def similarity(self, ranking) -> tuple[np.ndarray, np.ndarray]:
        """(similarity per position, 0.0 where the ranking has none; which positions it has) — the first value a
        group id has in the ranking."""
        if isinstance(ranking, ScoredIds):
            ids, values = np.frombuffer(ranking.ids, dtype=np.int64), np.frombuffer(ranking.scores, dtype=np.float64)
        else:
            ids = np.array([int(g) for g, _s in ranking], dtype=np.int64)
            values = np.array([float(s) for _g, s in ranking], dtype=np.float64)
        ids, first = np.unique(ids, return_index=True)
        values = values[first]
        sorted_gids = self.gids[self.by_gid]
        at = np.minimum(np.searchsorted(sorted_gids, ids), len(sorted_gids) - 1)
        found = sorted_gids[at] == ids
        sim = np.zeros(len(self.gids))
        has = np.zeros(len(self.gids), dtype=bool)
        positions = self.by_gid[at[found]]
        sim[positions] = values[found]
        has[positions] = True
        return sim, has


def _turns(selection: HistorySelection, available: list[int], weights: tuple[tuple[str, float], ...]) -> _Turns:
    key = ("semantic", weights, tuple(available) if len(available) < 64 else
           (len(available), available[0], available[-1], tuple(sorted(selection.excluded))))
    hit = selection.memo.get(key)
    if hit is None:
        hit = selection.memo[key] = _Turns(selection, available, dict(weights), ("semantic_importance", weights))
    return hit


def select(selection: HistorySelection, budget: Budget, context: StrategyContext) -> None:
    ranking = context.inputs.semantic_ranking
    if not ranking:
        context.notes.append(FALLBACK_NOTE)
        window.select(selection, budget, context)
        return
    available = selection.available()
    if not available:
        return
    config = context.config.semantic
    turns = _turns(selection, available, config.importance_weights)
    sim, has = turns.similarity(ranking)
    recency = turns.recency(config.recency_half_life_groups)
    barred = np.zeros(len(available), dtype=bool)  # summarised turns the query does not point at
    if selection.summarised:  # a turn a summary stands in for left the recency window: it competes on meaning alone
        gone = np.isin(turns.available, np.fromiter(selection.summarised, dtype=np.int64))
        recency = np.where(gone, 0.0, recency)
        floor = float(sim[has].mean() + config.summarised_min_z * sim[has].std()) if has.any() else math.inf
        barred = gone & ~(has & (sim >= floor))
    scores = config.similarity_weight * sim + config.recency_weight * recency + turns.importance
    position = np.arange(len(available))
    ranked = np.lexsort((-position, -scores))  # best first; ties: the newer turn
    n = context.inputs.window_groups
    if n > 0:
        for p in ranked[n:].tolist():
            selection.set_default(available[p], "outside_window", f"ranked below the top {n} turns")
        ranked = ranked[:n]
    scored = dict(zip(turns.available[ranked].tolist(), ranked.tolist()))  # group index -> position
    selection.scores = AtomValues(lambda gi: float(scores[scored[gi]]) if gi in scored else None)
    groups, picks = selection.groups, selection.picks
    # a turn already picked (a pin) may still add atoms; any other one is taken whole or not at all
    open_turn = turns.tokens[ranked] if not picks else np.where(
        np.isin(turns.available[ranked], np.fromiter(picks, dtype=np.int64, count=len(picks))), 0,
        turns.tokens[ranked])
    for start in range(0, len(ranked), FILL_BLOCK):
        remaining = budget.remaining
        if remaining <= 0:
            break
        # the turns of this block that fit what is left now (the budget only shrinks: the others never will)
        for j in np.flatnonzero(open_turn[start:start + FILL_BLOCK] <= remaining).tolist():
            p = int(ranked[start + j])
            remaining = budget.remaining
            if remaining <= 0:
                break
            gi = available[p]
            if barred[p]:
                continue  # the summary stands in for it
            if gi not in picks and groups[gi].eligible_tokens > remaining:
                continue  # does not fit whole (fill_group would take nothing)
            detail = f"score {scores[p]:.4f}"
            if has[p]:
                detail += f", similarity {sim[p]:.4f}"
            selection.fill_group(gi, budget, "semantic_match" if has[p] else "recent_window",
                                 detail=selection.recalled(gi, detail), partial=False)


select.recalls_summarised = True  # type: ignore[attr-defined]
