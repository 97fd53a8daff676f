"""Activation scores per branch and item (updated each turn by the planner's activation rules)."""
from __future__ import annotations

import sqlite3
from typing import Mapping

from ctxbench.store import sessions as session_store
from ctxbench.store.clock import now_iso
from ctxbench.store.db import Connections


def scores(conn: sqlite3.Connection, branch_id: str) -> dict[str, float]:
    rows = conn.execute("SELECT item_id, score FROM activation WHERE branch_id = ? ORDER BY item_id", (branch_id,))
    return {r["item_id"]: float(r["score"]) for r in rows}


def set_scores(conn: sqlite3.Connection, session_id: str, branch_id: str, new_scores: Mapping[str, float], *,
               replace: bool) -> None:
    """Upsert scores; with ``replace`` the items not named are forgotten."""
    if replace:
        conn.execute("DELETE FROM activation WHERE branch_id = ?", (branch_id,))
    stamp = now_iso()
    conn.executemany(
        "INSERT INTO activation (session_id, branch_id, item_id, score, updated_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (branch_id, item_id) DO UPDATE SET score = excluded.score, updated_at = excluded.updated_at",
        [(session_id, branch_id, item, float(score), stamp) for item, score in sorted(new_scores.items())],
    )


class Activation:
    """Activation scores of a session's items (``card:…``, ``path:…``, ``group:…``)."""

    def __init__(self, database: Connections) -> None:
        self._db = database

    def scores(self, session_id: str) -> dict[str, float]:
        """The scores on the session's active branch."""
        with self._db.connection() as conn:
            return scores(conn, session_store.active_branch(conn, session_id))

    def set(self, session_id: str, new_scores: Mapping[str, float], *, replace: bool = True) -> None:
        with self._db.transaction() as conn:
            set_scores(conn, session_id, session_store.active_branch(conn, session_id), new_scores, replace=replace)
