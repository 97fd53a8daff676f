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

from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.planner.strategies import window
from ctxbench.planner.strategies.context import StrategyContext

FALLBACK_NOTE = ("semantic: no similarity ranking for this query (no embedder ready, or no earlier turn "
                 "similar enough); fell back to recency")


def select(selection: HistorySelection, budget: Budget, context: StrategyContext) -> None:
    ranking = context.inputs.semantic_ranking
    if not ranking:
        context.notes.append(FALLBACK_NOTE)
        window.select(selection, budget, context)
        return
    config = context.config.semantic
    weights = dict(config.importance_weights)
    similarity: dict[int, float] = {}
    for gid, sim in ranking:
        similarity.setdefault(gid, float(sim))
    available = selection.available()
    half_life = config.recency_half_life_groups
    decay = 0.5 ** (1.0 / half_life) if half_life > 0 else 0.0
    memo_key = ("semantic_importance", config.importance_weights)
    scores: dict[int, float] = {}
    recency = 1.0 if half_life > 0 else 0.0
    for gi in reversed(available):
        group = selection.groups[gi]
        importance = 0.0
        if group.flags:
            importance = group.memo.get(memo_key)
            if importance is None:
                importance = sum(weights.get(flag, 0.0) for flag in sorted(group.flags))
                group.memo[memo_key] = importance
        scores[gi] = (
            config.similarity_weight * similarity.get(group.group_id, 0.0)
            + config.recency_weight * recency
            + importance
        )
        recency *= decay
    ranked = sorted(scores, key=lambda gi: (-scores[gi], -gi))
    n = context.inputs.window_groups
    if n > 0:
        for gi in ranked[n:]:
            selection.set_default(gi, "outside_window", f"ranked below the top {n} turns")
        ranked = ranked[:n]
    for gi in ranked:
        selection.scores[gi] = scores[gi]
        if budget.remaining <= 0:
            continue
        gid = selection.groups[gi].group_id
        reason = "semantic_match" if gid in similarity else "recent_window"
        detail = f"score {scores[gi]:.4f}"
        if gid in similarity:
            detail += f", similarity {similarity[gid]:.4f}"
        selection.fill_group(gi, budget, reason, detail=detail, partial=False)
