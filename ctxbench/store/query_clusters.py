"""Store component ``query_clusters``: the QueryClusterId each retrieval query of a session got.

One row per turn (session, group): the hash of the query that was clustered, the cluster it joined or started,
its cosine to the centroid it was compared with (NULL for a session's first), and the cluster as it stood after
the query — its count and centroid (float32) — so the next turn continues from the row of the latest turn its
branch sees (group ids are unique within a session, so a fork continues from the turns it shares). Rows go
with their session (foreign key); a turn planned again with another query (a group id reused after an undo)
replaces its row.
"""
from __future__ import annotations

import sqlite3
from array import array
from dataclasses import dataclass
from typing import Iterable

from ctxbench.store.clock import now_iso
from ctxbench.store.db import Connections

COMPONENT = "query_clusters"

_V1 = """
CREATE TABLE query_clusters (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    group_id    INTEGER NOT NULL,
    query_hash  TEXT NOT NULL,
    model       TEXT NOT NULL,
    cluster_id  INTEGER NOT NULL,
    started     INTEGER NOT NULL,
    similarity  REAL,
    threshold   REAL NOT NULL,
    count       INTEGER NOT NULL,
    centroid    BLOB NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (session_id, group_id)
) WITHOUT ROWID;
"""

MIGRATIONS = (_V1,)


@dataclass(frozen=True)
class ClusterRow:
    """A stored assignment: the turn, the query it clustered, and the cluster after it."""

    group_id: int
    query_hash: str
    model: str
    cluster_id: int
    started: bool
    similarity: float | None
    threshold: float  # [retrieval] cluster_threshold when it was assigned
    count: int
    centroid: tuple[float, ...]


def _row(r: sqlite3.Row) -> ClusterRow:
    floats = array("f")
    floats.frombytes(r["centroid"])
    centroid = tuple(floats)
    return ClusterRow(int(r["group_id"]), r["query_hash"], r["model"], int(r["cluster_id"]), bool(r["started"]),
                      None if r["similarity"] is None else float(r["similarity"]), float(r["threshold"]), int(r["count"]),
                      centroid)


def row_of(conn: sqlite3.Connection, session_id: str, group_id: int) -> ClusterRow | None:
    r = conn.execute("SELECT * FROM query_clusters WHERE session_id = ? AND group_id = ?",
                     (session_id, group_id)).fetchone()
    return _row(r) if r is not None else None


def latest_before(conn: sqlite3.Connection, session_id: str, group_id: int, visible: Iterable[int]
                  ) -> ClusterRow | None:
    """The row of the latest turn before ``group_id`` among the ``visible`` ones (the branch's turns)."""
    seen = set(visible)
    cursor = conn.execute("SELECT * FROM query_clusters WHERE session_id = ? AND group_id < ? ORDER BY group_id DESC",
                          (session_id, group_id))
    for r in cursor:  # a linear session's first row is the one; a fork skips the other branches' turns
        if int(r["group_id"]) in seen:
            return _row(r)
    return None


def next_cluster_id(conn: sqlite3.Connection, session_id: str) -> int:
    """One more than any cluster id the session used (on any branch): ids are never reused."""
    r = conn.execute("SELECT MAX(cluster_id) FROM query_clusters WHERE session_id = ?", (session_id,)).fetchone()
    return int(r[0] or 0) + 1


def put(conn: sqlite3.Connection, session_id: str, row: ClusterRow) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO query_clusters (session_id, group_id, query_hash, model, cluster_id, started, "
        "similarity, threshold, count, centroid, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, row.group_id, row.query_hash, row.model, row.cluster_id, int(row.started), row.similarity,
         row.threshold, row.count, array("f", row.centroid).tobytes(), now_iso()))


def rows(conn: sqlite3.Connection, session_id: str) -> tuple[ClusterRow, ...]:
    return tuple(_row(r) for r in conn.execute(
        "SELECT * FROM query_clusters WHERE session_id = ? ORDER BY group_id", (session_id,)))


class QueryClusters:
    """The query clusters of a session's turns."""

    def __init__(self, database: Connections) -> None:
        self._db = database

    def get(self, session_id: str, group_id: int) -> ClusterRow | None:
        with self._db.connection() as conn:
            return row_of(conn, session_id, group_id)

    def latest_before(self, session_id: str, group_id: int, visible: Iterable[int]) -> ClusterRow | None:
        with self._db.connection() as conn:
            return latest_before(conn, session_id, group_id, visible)

    def next_id(self, session_id: str) -> int:
        with self._db.connection() as conn:
            return next_cluster_id(conn, session_id)

    def put(self, session_id: str, row: ClusterRow) -> None:
        with self._db.transaction() as conn:
            put(conn, session_id, row)

    def list(self, session_id: str) -> tuple[ClusterRow, ...]:
        with self._db.connection() as conn:
            return rows(conn, session_id)
