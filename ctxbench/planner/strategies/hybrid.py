"""Hybrid keyword + recency with Reciprocal Rank Fusion (seed 000).

* keyword list: ``inputs.keyword_ranking`` (group ids by SQLite FTS5 BM25, computed by the store);
* recency list: the turns newest first. Subset rule: when the keyword list is not empty, the
  recency list keeps only turns the keyword search also found; otherwise it is global recency;
* score(g) = keyword_weight / (k + keyword rank) + recency_weight / (k + recency rank), ranks from 1;
* turns are taken by score (ties: newer first), each one whole or not at all: a turn that does not
  fit whole is left out and the next one is tried; ``window_groups`` > 0 caps how many turns compete;
* reason ``keyword_match`` for turns with a keyword rank, else ``recent_window``; turns with no
  score (left out by the subset rule) are ``below_threshold``. The payload is re-ordered
  chronologically by the plan assembly.
"""
from __future__ import annotations

from ctxbench.config import HybridConfig
from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.planner.strategies.context import StrategyContext


def rrf_scores(
    keyword: list[int], recency: list[int], config: HybridConfig
) -> tuple[dict[int, float], dict[int, int], dict[int, int]]:
    """(score, keyword rank, recency rank) per group id; ranks start at 1."""
    scores: dict[int, float] = {}
    kw_rank: dict[int, int] = {}
    rec_rank: dict[int, int] = {}
    for rank, gid in enumerate(keyword, 1):
        kw_rank[gid] = rank
        scores[gid] = scores.get(gid, 0.0) + config.keyword_weight / (config.rrf_k + rank)
    for rank, gid in enumerate(recency, 1):
        rec_rank[gid] = rank
        scores[gid] = scores.get(gid, 0.0) + config.recency_weight / (config.rrf_k + rank)
    return scores, kw_rank, rec_rank


def _view_index(selection: HistorySelection) -> dict[int, int]:
    """Group id -> group index (kept with the history's layout)."""
    hit = selection.memo.get("view_index")
    if hit is None:
        hit = selection.memo["view_index"] = {g.group_id: gi for gi, g in enumerate(selection.groups)}
    return hit


UNFOUND = ("below_threshold", "not found by the keyword search (subset rule)")


def select(selection: HistorySelection, budget: Budget, context: StrategyContext) -> None:
    config = context.config.hybrid
    groups, excluded = selection.groups, selection.excluded
    view_index = _view_index(selection)
    keyword = [gid for gid in dict.fromkeys(context.inputs.keyword_ranking)
               if gid in view_index and view_index[gid] not in excluded]
    if keyword and config.subset_rule:  # recency among the turns the keyword search found
        recency = sorted((gid for gid in keyword if view_index[gid] not in selection.summarised),
                         key=lambda gid: -view_index[gid])
    else:
        recency = [groups[gi].group_id for gi in reversed(selection.recent(selection.available()))]
    if not keyword:
        context.notes.append("hybrid: the keyword search found no earlier turn; ranked by recency alone")
    scores, kw_rank, rec_rank = rrf_scores(keyword, recency, config)
    if len(scores) < len(groups) - len(excluded):  # the turns left out by the subset rule, said when read
        selection.explain = lambda gi: (UNFOUND, None) if groups[gi].group_id not in scores else (None, None)
    ranked = sorted(scores, key=lambda gid: (-scores[gid], -view_index[gid]))
    n = context.inputs.window_groups
    if n > 0:
        for gid in ranked[n:]:
            selection.set_default(view_index[gid], "outside_window", f"ranked below the top {n} turns")
        ranked = ranked[:n]
    for gid in ranked:
        gi = view_index[gid]
        selection.scores[gi] = scores[gid]
        if budget.remaining <= 0:
            continue
        reason = "keyword_match" if gid in kw_rank else "recent_window"
        parts = [f"rrf {scores[gid]:.5f}"]
        if gid in kw_rank:
            parts.append(f"keyword rank {kw_rank[gid]}")
        if gid in rec_rank:
            parts.append(f"recency rank {rec_rank[gid]}")
        selection.fill_group(gi, budget, reason, detail=selection.recalled(gi, ", ".join(parts)), partial=False)


select.recalls_summarised = True  # type: ignore[attr-defined]
