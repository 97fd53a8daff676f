"""Context layers of their own: the ``### STATE`` block (history kept) and the scratchpad, one of each per
branch, and memos (global, searchable by keyword).
:class:`Memory` is the repository the service uses; the module functions are the SQL.
"""
from __future__ import annotations

import json
import sqlite3
from typing import Sequence

from ctxbench.records.plans import Memo
from ctxbench.store.clock import now_iso
from ctxbench.store import sessions as session_store
from ctxbench.store.db import Connections
from ctxbench.store.search import fts_query
from ctxbench.records.sessions import StateVersion


# -- state block ----------------------------------------------------------------------------

def state_block(conn: sqlite3.Connection, branch_id: str) -> str:
    row = conn.execute(
        "SELECT content FROM session_state WHERE branch_id = ? ORDER BY id DESC LIMIT 1", (branch_id,)
    ).fetchone()
    return str(row["content"]) if row else ""


def set_state_block(conn: sqlite3.Connection, session_id: str, branch_id: str, content: str,
                    created_at: str | None = None) -> None:
    """Record a new version (unchanged text adds nothing)."""
    if state_block(conn, branch_id) == content:
        return
    conn.execute(
        "INSERT INTO session_state (session_id, branch_id, content, created_at) VALUES (?, ?, ?, ?)",
        (session_id, branch_id, content, created_at or now_iso()),
    )


def state_history(conn: sqlite3.Connection, branch_id: str) -> tuple[StateVersion, ...]:
    rows = conn.execute("SELECT * FROM session_state WHERE branch_id = ? ORDER BY id", (branch_id,))
    return tuple(StateVersion(int(r["id"]), r["content"], r["created_at"]) for r in rows)


def state_before(conn: sqlite3.Connection, branch_id: str, moment: str) -> StateVersion | None:
    """The version that was current just before ``moment`` (an ISO time): the newest written before it."""
    row = conn.execute(
        "SELECT * FROM session_state WHERE branch_id = ? AND created_at < ? ORDER BY id DESC LIMIT 1",
        (branch_id, moment),
    ).fetchone()
    return StateVersion(int(row["id"]), row["content"], row["created_at"]) if row else None


# -- scratchpad -----------------------------------------------------------------------------

def scratchpad(conn: sqlite3.Connection, branch_id: str) -> str:
    row = conn.execute("SELECT content FROM scratchpad WHERE branch_id = ?", (branch_id,)).fetchone()
    return str(row["content"]) if row else ""


def set_scratchpad(conn: sqlite3.Connection, session_id: str, branch_id: str, content: str) -> None:
    conn.execute(
        "INSERT INTO scratchpad (session_id, branch_id, content, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (branch_id) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
        (session_id, branch_id, content, now_iso()),
    )


# -- memos ----------------------------------------------------------------------------------

def _memo(row: sqlite3.Row) -> Memo:
    return Memo(id=int(row["id"]), content=row["content"], tags=tuple(json.loads(row["tags"])))


def add_memo(conn: sqlite3.Connection, content: str, tags: Sequence[str] = ()) -> Memo:
    if not content.strip():
        raise ValueError("a memo needs some text")
    tag_list = [str(t) for t in tags]
    cur = conn.execute(
        "INSERT INTO memos (content, tags, created_at) VALUES (?, ?, ?)",
        (content, json.dumps(tag_list), now_iso()),
    )
    memo_id = int(cur.lastrowid)
    conn.execute(
        "INSERT INTO memo_search (rowid, content, tags) VALUES (?, ?, ?)", (memo_id, content, " ".join(tag_list))
    )
    return Memo(id=memo_id, content=content, tags=tuple(tag_list))


def list_memos(conn: sqlite3.Connection) -> tuple[Memo, ...]:
    return tuple(_memo(r) for r in conn.execute("SELECT * FROM memos ORDER BY id"))


def remove_memo(conn: sqlite3.Connection, memo_id: int) -> bool:
    conn.execute("DELETE FROM memo_search WHERE rowid = ?", (memo_id,))
    return conn.execute("DELETE FROM memos WHERE id = ?", (memo_id,)).rowcount > 0


def search_memos(conn: sqlite3.Connection, query: str, limit: int) -> tuple[Memo, ...]:
    """Memos ranked by BM25 relevance to ``query`` (text and tags); empty query: none."""
    match = fts_query(query)
    if not match or limit <= 0:
        return ()
    rows = conn.execute(
        "SELECT m.* FROM memo_search JOIN memos m ON m.id = memo_search.rowid "
        "WHERE memo_search MATCH ? ORDER BY bm25(memo_search), m.id LIMIT ?",
        (match, limit),
    )
    return tuple(_memo(r) for r in rows)


class Memory:
    """The session's ``### STATE`` versions and scratchpad, and the global memos."""

    def __init__(self, database: Connections, memo_limit: int) -> None:
        self._db = database
        self.memo_limit = memo_limit  # memos a search returns unless told otherwise

    def state(self, session_id: str) -> str:
        """The ``### STATE`` of the session's active branch ("" when it has none)."""
        with self._db.connection() as conn:
            return state_block(conn, session_store.active_branch(conn, session_id))

    def set_state(self, session_id: str, content: str) -> None:
        """Record a new ``### STATE`` version on the active branch (earlier ones are kept)."""
        with self._db.transaction() as conn:
            set_state_block(conn, session_id, session_store.active_branch(conn, session_id), content)

    def restore_state_before(self, session_id: str, moment: str) -> str:
        """Make the version that was current just before ``moment`` current again (a new version with its text;
        none before it: no state); returns the state now current."""
        with self._db.transaction() as conn:
            branch_id = session_store.active_branch(conn, session_id)
            before = state_before(conn, branch_id, moment)
            set_state_block(conn, session_id, branch_id, before.content if before is not None else "")
            return state_block(conn, branch_id)

    def state_history(self, session_id: str) -> tuple[StateVersion, ...]:
        with self._db.connection() as conn:
            return state_history(conn, session_store.active_branch(conn, session_id))

    def scratchpad(self, session_id: str) -> str:
        with self._db.connection() as conn:
            return scratchpad(conn, session_store.active_branch(conn, session_id))

    def set_scratchpad(self, session_id: str, content: str) -> None:
        with self._db.transaction() as conn:
            set_scratchpad(conn, session_id, session_store.active_branch(conn, session_id), content)

    def memos(self) -> tuple[Memo, ...]:
        """All memos (global, not per session), oldest first."""
        with self._db.connection() as conn:
            return list_memos(conn)

    def add_memo(self, content: str, tags: Sequence[str] = ()) -> Memo:
        with self._db.transaction() as conn:
            return add_memo(conn, content, tags)

    def remove_memo(self, memo_id: int) -> bool:
        with self._db.transaction() as conn:
            return remove_memo(conn, memo_id)

    def search_memos(self, query: str, limit: int | None = None) -> tuple[Memo, ...]:
        """Memos ranked by keyword relevance to ``query`` (``memo_limit`` at most unless ``limit`` says)."""
        with self._db.connection() as conn:
            return search_memos(conn, query, self.memo_limit if limit is None else limit)
