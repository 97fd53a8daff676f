"""Fusing ranked lists from several retrieval components into one ranking.

Each component (semantic, keyword, name, ...) gives symbols best first with a raw score. Two
fusions are offered and measured in benchmarks/README.md:

- ``rrf``: Reciprocal Rank Fusion, sum over components of ``weight / (k + rank)``; only ranks
  matter, so incomparable raw scores (cosine, BM25) need no calibration.
- ``score``: weighted sum of each component's raw score divided by that component's best score
  in this query (so each component contributes at most its weight).

The result keeps, per symbol, the raw score and rank of every component that found it, which the
retriever turns into the hit's ``components`` and ``why``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

FUSIONS = ("rrf", "score")

Ranking = Sequence[tuple[str, float]]  # (symbol id, raw score), best first


@dataclass(frozen=True, slots=True)
class Fused:
    """One symbol's fused score, with the raw score and rank of every component that found it (never changed:
    a fusion stage makes a new entry)."""

    symbol: str
    score: float = 0.0
    scores: Mapping[str, float] = field(default_factory=dict)  # component -> raw score
    ranks: Mapping[str, int] = field(default_factory=dict)  # component -> 1-based rank

    def plus(self, gain: float, scores: Mapping[str, float] | None = None, ranks: Mapping[str, int] | None = None
             ) -> Fused:
        """This entry with ``gain`` added to its score and ``scores`` / ``ranks`` merged into its own."""
        return Fused(self.symbol, self.score + gain, {**self.scores, **scores} if scores else self.scores,
                     {**self.ranks, **ranks} if ranks else self.ranks)

    def times(self, weight: float) -> Fused:
        """This entry with its score multiplied by ``weight``."""
        return Fused(self.symbol, self.score * weight, self.scores, self.ranks)


def fuse(rankings: Mapping[str, Ranking], weights: Mapping[str, float], *, method: str = "rrf",
         rrf_k: int = 60) -> list[Fused]:
    """Fuse component rankings; best first, ties broken by symbol id for a stable order."""
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}; known: {', '.join(FUSIONS)}")
    score: dict[str, float] = {}
    scores: dict[str, dict[str, float]] = {}
    ranks: dict[str, dict[str, int]] = {}
    for component in sorted(rankings):
        ranking = rankings[component]
        weight = float(weights.get(component, 1.0))
        if not ranking or weight == 0.0:
            continue
        top = max((s for _, s in ranking), default=0.0)
        seen: set[str] = set()
        rank = 0
        for symbol, raw in ranking:
            if symbol in seen:
                continue
            seen.add(symbol)
            rank += 1
            if symbol not in score:
                score[symbol], scores[symbol], ranks[symbol] = 0.0, {}, {}
            scores[symbol][component] = raw
            ranks[symbol][component] = rank
            if method == "rrf":
                score[symbol] += weight / (rrf_k + rank)
            else:
                score[symbol] += weight * (raw / top if top > 0 else 0.0)
    fused = [Fused(symbol, total, scores[symbol], ranks[symbol]) for symbol, total in score.items()]
    return sorted(fused, key=lambda f: (-f.score, f.symbol))


def rrf_unit(rrf_k: int) -> float:
    """The RRF score of a first place with weight 1: the scale boosts are expressed in."""
    return 1.0 / (rrf_k + 1)
