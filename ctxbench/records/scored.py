"""``ScoredIds``: a long, immutable list of (id, score) pairs kept as two flat arrays.

A plan of a 10,000-turn session carries a similarity for every turn (``PlanInputs.semantic_ranking``) or
every message (``message_similarity``, ~40,000 of them). As a tuple of Python pairs, making that list, hashing
it into the PlanId and reading it back into arrays cost more than the rest of the plan. ``ScoredIds`` holds
the ids (``array('q')``) and scores (``array('d')``) side by side: it reads as the tuple of pairs it stands
for (iteration, length, indexing, equality with such a tuple), the planner reads the arrays directly, and
:func:`pairs_digest` hashes either form to the same text, so the PlanId does not depend on which one the
inputs hold.
"""
from __future__ import annotations

import hashlib
import sys
from array import array
from typing import Any, Iterable, Iterator, Sequence

Pairs = Sequence[tuple[int, float]]


class ScoredIds(Sequence[tuple[int, float]]):
    """(id, score) pairs in a given order (a ranking: best first; a similarity list: history order)."""

    __slots__ = ("ids", "scores")

    def __init__(self, ids: Iterable[int] | array = (), scores: Iterable[float] | array = ()) -> None:
        self.ids = ids if isinstance(ids, array) and ids.typecode == "q" else array("q", ids)
        self.scores = scores if isinstance(scores, array) and scores.typecode == "d" else array("d", scores)
        if len(self.ids) != len(self.scores):
            raise ValueError(f"{len(self.ids)} ids but {len(self.scores)} scores")

    @classmethod
    def from_buffers(cls, ids: Any, scores: Any) -> "ScoredIds":
        """From anything with the buffer protocol holding int64 ids and float64 scores (a numpy array: one copy)."""
        out_ids, out_scores = array("q"), array("d")
        out_ids.frombytes(memoryview(ids).cast("B"))
        out_scores.frombytes(memoryview(scores).cast("B"))
        return cls(out_ids, out_scores)

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[tuple[int, float]]:
        return zip(self.ids, self.scores)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return tuple(zip(self.ids[index], self.scores[index]))
        return self.ids[index], self.scores[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ScoredIds):
            return self.ids == other.ids and self.scores == other.scores
        if isinstance(other, (tuple, list)):
            return len(other) == len(self) and all(tuple(a) == b for a, b in zip(other, self))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"({i}, {s})" for i, s in self[:3])
        return f"ScoredIds({len(self)}: {shown}{', ...' if len(self) > 3 else ''})"

    def to_json(self) -> list[list[Any]]:
        return list(map(list, zip(self.ids, self.scores)))  # in C: a plan's inputs hold ~40,000 pairs


def pairs_digest(pairs: Pairs) -> str:
    """sha256 of (id, score) pairs in order: each id as a little-endian int64, each score as a float64 — the same
    text for a ``ScoredIds`` and for the tuple of pairs it stands for."""
    if isinstance(pairs, ScoredIds):
        ids, scores = pairs.ids, pairs.scores
    else:
        ids, scores = array("q", (int(p[0]) for p in pairs)), array("d", (float(p[1]) for p in pairs))
    if sys.byteorder != "little":
        ids, scores = array("q", ids), array("d", scores)
        ids.byteswap()
        scores.byteswap()
    digest = hashlib.sha256()
    digest.update(len(ids).to_bytes(8, "little"))
    digest.update(ids.tobytes())
    digest.update(scores.tobytes())
    return "sha256:" + digest.hexdigest()
