"""The fused strategy's explanation of a plan: every competing atom's score (rounded as the plan shows it) and why
each atom left out was, made when the plan's excluded items are read."""
from __future__ import annotations

import numpy as np

from ctxbench.planner.budget import AtomValues, HistorySelection
from ctxbench.planner.strategies.fused_units import Units

ROUND_MARGIN = 1e-6  # round6: scaled scores this close to a half are rounded by Python (their error is ~1e-9)


def round6(values: np.ndarray) -> list[float]:
    """``[round(v, 6) for v in values]``, vectorised: ``numpy.round`` scales, rounds half to even and divides, which
    gives Python's correctly rounded result except where the scaled value lies within rounding error of a half;
    those few are rounded by Python."""
    out = np.round(values, 6)
    with np.errstate(invalid="ignore", over="ignore"):  # infinities and NaN are left to Python below
        scaled = np.abs(values) * 1e6
        near_half = np.abs(scaled - np.floor(scaled) - 0.5) < ROUND_MARGIN
    for i in np.flatnonzero(near_half | ~np.isfinite(values)).tolist():
        out[i] = round(float(values[i]), 6)
    return out.tolist()


def explain(selection: HistorySelection, units: Units, score: np.ndarray, values: list[float], order: np.ndarray,
            by_recency: bool) -> None:
    """Every competing atom's score, and why each left out was, made when the plan's excluded items are read."""
    n = units.n
    ranks: list[np.ndarray] = []

    def rank_of() -> np.ndarray:
        if not ranks:
            out = np.empty(n, dtype=np.int64)
            out[order] = np.arange(1, n + 1)
            ranks.append(out)
        return ranks[0]

    per_group = units.per_group

    rounded = round6(score)

    def scores(gi: int) -> dict[int, float] | None:
        own = per_group.get(gi)
        if own is None:
            return None
        return {ai: rounded[u] for ai, u in enumerate(own) if u >= 0}

    picks = selection.picks  # not the selection: these readers live on it, and a cycle would outlive the plan

    texts: list[list[str]] = []

    def detail_texts() -> tuple[dict[int, tuple[int, ...]], list[str]]:
        """Why each unit was left out (were it left out), all at once: one pass, no dict per group."""
        if not texts:
            ranks = rank_of().tolist()
            if by_recency:
                texts.append([f"newest first ({rank} of {n}): nothing matched the query yet: the budget was full"
                              for rank in ranks])
            else:
                texts.append([f"rank {rank} of {n}, score {value:.3f}: the budget was full"
                              for rank, value in zip(ranks, score.tolist())])
        return per_group, texts[0]

    def details(gi: int) -> dict[int, str] | None:
        own = per_group.get(gi)
        if own is None:
            return None
        pick = picks.get(gi)
        why = detail_texts()[1]
        out = {ai: why[u] for ai, u in enumerate(own) if u >= 0 and (pick is None or ai not in pick.reasons)}
        return out or None

    selection.atom_scores = AtomValues(scores, (per_group, rounded))
    selection.atom_details = AtomValues(details, detail_texts)
