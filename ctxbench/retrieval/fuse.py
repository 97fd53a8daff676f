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


@dataclass
class Fused:
    symbol: str
    score: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)  # component -> raw score
    ranks: dict[str, int] = field(default_factory=dict)  # component -> 1-based rank


def fuse(rankings: Mapping[str, Ranking], weights: Mapping[str, float], *, method: str = "rrf",
         rrf_k: int = 60) -> list[Fused]:
    """Fuse component rankings; best first, ties broken by symbol id for a stable order."""
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}; known: {', '.join(FUSIONS)}")
    fused: dict[str, Fused] = {}
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
            entry = fused.get(symbol)
            if entry is None:
                entry = fused[symbol] = Fused(symbol)
            entry.scores[component] = raw
            entry.ranks[component] = rank
            if method == "rrf":
                entry.score += weight / (rrf_k + rank)
            else:
                entry.score += weight * (raw / top if top > 0 else 0.0)
    return sorted(fused.values(), key=lambda f: (-f.score, f.symbol))


def rrf_unit(rrf_k: int) -> float:
    """The RRF score of a first place with weight 1: the scale boosts are expressed in."""
    return 1.0 / (rrf_k + 1)
