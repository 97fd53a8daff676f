"""Query clusters ("phases", seed 002): each retrieval query of a session gets a QueryClusterId.

The rule is simple and deterministic. A session's queries come one after another; the *current* cluster
is the one the previous query joined. A new query joins it when the cosine similarity of its unit vector
to the cluster's centroid is at least ``[retrieval] cluster_threshold``; otherwise it starts a new cluster
with the next id. A centroid is the running mean of the unit vectors of its queries (not re-normalised:
its cosine to a query is taken against its direction). The same queries in the same order always give
the same ids, centroids and counts (:func:`assign_all`).

Only the current cluster is compared with: clusters are phases of a conversation, so coming back to an
earlier topic after another one starts a new cluster rather than reopening the old one.

The vectors are the query vectors retrieval already computes (``Retriever.query_vector``): nothing is
encoded twice. Nothing here touches the store; ``service.query_clusters`` keeps the assignments.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np



@dataclass(frozen=True)
class QueryCluster:
    """One cluster as it stands after its latest query: its id, centroid (running mean of its queries' unit
    vectors) and how many queries it holds."""

    id: int
    centroid: tuple[float, ...]
    count: int

    def vector(self) -> np.ndarray:
        return np.asarray(self.centroid, dtype=np.float32)


@dataclass(frozen=True)
class Assignment:
    """Where one query went: the cluster after it joined (or started) it, its cosine to the centroid it was
    compared with (None when there was no current cluster to compare with), and whether it started one."""

    cluster: QueryCluster
    similarity: float | None
    started: bool


def unit(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """``vector`` as float32 of length 1 (a zero vector stays zero)."""
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def cosine(centroid: np.ndarray, query_unit: np.ndarray) -> float:
    """Cosine of a query's unit vector to a centroid's direction (0 for a zero centroid or mismatched sizes)."""
    if centroid.shape != query_unit.shape:
        return 0.0
    norm = float(np.linalg.norm(centroid))
    return float(np.dot(centroid, query_unit) / norm) if norm > 0 else 0.0


def assign(current: QueryCluster | None, vector: Sequence[float] | np.ndarray, threshold: float,
           next_id: int) -> Assignment:
    """The assignment of a query (its embedding ``vector``) given the session's current cluster (None: none
    yet). Below ``threshold`` — or with a centroid of another size (another embedding model) — it starts the
    cluster ``next_id``; otherwise it joins ``current``, whose centroid moves to the running mean."""
    q = unit(vector)
    if current is None:
        return Assignment(QueryCluster(next_id, _floats(q), 1), None, True)
    centroid = current.vector()
    similarity = cosine(centroid, q)
    if centroid.shape != q.shape or similarity < threshold:
        return Assignment(QueryCluster(next_id, _floats(q), 1), similarity, True)
    count = current.count + 1
    mean = centroid + (q - centroid) / count
    return Assignment(QueryCluster(current.id, _floats(mean), count), similarity, False)


def assign_all(vectors: Iterable[Sequence[float] | np.ndarray], threshold: float, first_id: int = 1
               ) -> list[Assignment]:
    """The assignments of a sequence of queries, in order, from no cluster: ids ``first_id``, ``first_id + 1``..."""
    out: list[Assignment] = []
    current: QueryCluster | None = None
    next_id = first_id
    for vector in vectors:
        a = assign(current, vector, threshold, next_id)
        if a.started:
            next_id = a.cluster.id + 1
        current = a.cluster
        out.append(a)
    return out


def _floats(v: np.ndarray) -> tuple[float, ...]:
    return tuple(float(x) for x in np.asarray(v, dtype=np.float32))
