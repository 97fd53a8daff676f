"""Sessions and branches: rows, listing, per-branch settings overrides, group id allocation.

Every session starts with a branch named ``main``; a branch forks from a message of its
parent and sees the parent's messages up to that fork point plus its own.

:class:`Sessions` and :class:`Branches` are the repositories the service uses (each call on a
connection the :class:`~ctxbench.store.database.Database` lends, each write one transaction or part
of the caller's); the module functions below them are the SQL, shared with the other store modules.
"""
from __future__ import annotations

import json
import secrets
import sqlite3
from pathlib import Path
from typing import Any, Mapping

from ctxbench.store import db
from ctxbench.store.clock import now_iso
from ctxbench.records.errors import UnknownBranch, UnknownSession
from ctxbench.records.sessions import BranchInfo, SessionInfo
from ctxbench.store.db import Connections

MAIN_BRANCH = "main"
_ID_BYTES = 6


def new_session_id() -> str:
    return "s_" + secrets.token_hex(_ID_BYTES)


def new_branch_id() -> str:
    return "b_" + secrets.token_hex(_ID_BYTES)


def create_session(conn: sqlite3.Connection, title: str = "", repo: str | None = None) -> str:
    session_id = new_session_id()
    now = now_iso()
    conn.execute(
        "INSERT INTO sessions (id, title, repo, created_at) VALUES (?, ?, ?, ?)", (session_id, title, repo, now)
    )
    branch_id = new_branch_id()
    conn.execute(
        "INSERT INTO branches (id, session_id, name, created_at) VALUES (?, ?, ?, ?)",
        (branch_id, session_id, MAIN_BRANCH, now),
    )
    conn.execute("UPDATE sessions SET active_branch = ? WHERE id = ?", (branch_id, session_id))
    return session_id


def require_session(conn: sqlite3.Connection, session_id: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        raise UnknownSession(f"unknown session {session_id!r}")
    return row


def active_branch(conn: sqlite3.Connection, session_id: str) -> str:
    return str(require_session(conn, session_id)["active_branch"])


_INFO_SQL = """
SELECT s.id, s.title, s.repo, s.created_at,
       (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) AS message_count,
       (SELECT COUNT(*) FROM message_groups g WHERE g.session_id = s.id) AS group_count,
       COALESCE((SELECT MAX(m.created_at) FROM messages m WHERE m.session_id = s.id), s.created_at) AS last_activity
FROM sessions s
"""


def _info(row: sqlite3.Row) -> SessionInfo:
    return SessionInfo(
        id=row["id"],
        title=row["title"],
        repo=row["repo"],
        created_at=row["created_at"],
        message_count=int(row["message_count"]),
        group_count=int(row["group_count"]),
        last_activity=row["last_activity"],
    )


def list_sessions(conn: sqlite3.Connection, repo: str | None = None) -> list[SessionInfo]:
    """Sessions, most recently active first."""
    sql = _INFO_SQL
    params: tuple[Any, ...] = ()
    if repo is not None:
        sql += " WHERE s.repo = ?"
        params = (repo,)
    sql += " ORDER BY last_activity DESC, s.created_at DESC, s.id"
    return [_info(r) for r in conn.execute(sql, params)]


def session_info(conn: sqlite3.Connection, session_id: str) -> SessionInfo:
    row = conn.execute(_INFO_SQL + " WHERE s.id = ?", (session_id,)).fetchone()
    if row is None:
        raise UnknownSession(f"unknown session {session_id!r}")
    return _info(row)


def set_title(conn: sqlite3.Connection, session_id: str, title: str) -> None:
    require_session(conn, session_id)
    conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))


# tables of other store components that name a session without a foreign key (the ``llm``
# component's model calls, tool traces, suggestions and reference counts); present once used
UNLINKED_SESSION_TABLES = ("model_calls", "tool_traces", "pin_suggestions", "reference_turns")


def delete_session(conn: sqlite3.Connection, session_id: str) -> None:
    """Delete a session and everything stored for it: messages, plans and what only they referenced."""
    require_session(conn, session_id)
    # FTS rows are not covered by foreign keys
    conn.execute(
        "DELETE FROM group_search WHERE rowid IN (SELECT n FROM message_groups WHERE session_id = ?)", (session_id,)
    )
    _forget_plans(conn, session_id)
    from ctxbench.store import message_search  # its rows are FTS5 rows too

    message_search.forget_session(conn, session_id)
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in UNLINKED_SESSION_TABLES:
        if table in present:
            conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))


def _forget_plans(conn: sqlite3.Connection, session_id: str) -> None:
    """Delete a session's plans, the plan messages of its messages, the chunks of its plans and the retrieval sets
    only it used."""
    used = [r[0] for r in conn.execute(
        "SELECT DISTINCT retrieval_id FROM plans WHERE session_id = ? AND retrieval_id IS NOT NULL", (session_id,))]
    conn.execute("DELETE FROM plans WHERE session_id = ?", (session_id,))  # usage reports follow (foreign key)
    conn.execute("DELETE FROM plan_messages WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM plan_chunks WHERE session_id = ?", (session_id,))
    for chunk, marks in db.in_chunks(used):
        conn.execute(
            f"DELETE FROM retrieval_sets WHERE id IN ({marks}) "
            "AND NOT EXISTS (SELECT 1 FROM plans WHERE plans.retrieval_id = retrieval_sets.id)",
            chunk,
        )


# -- settings overrides (of the active branch) ---------------------------------------------------------------------

def settings_overrides(conn: sqlite3.Connection, session_id: str) -> dict[str, Any]:
    """The settings the session's active branch overrides (settings belong to a branch since schema v5)."""
    row = conn.execute("SELECT settings FROM branches WHERE id = ?", (active_branch(conn, session_id),)).fetchone()
    return dict(json.loads(row["settings"]))


def set_settings_overrides(conn: sqlite3.Connection, session_id: str, overrides: Mapping[str, Any]) -> None:
    conn.execute("UPDATE branches SET settings = ? WHERE id = ?",
                 (json.dumps(dict(overrides), sort_keys=True), active_branch(conn, session_id)))


# -- group ids ------------------------------------------------------------------------------

def next_group_id(conn: sqlite3.Connection, session_id: str) -> int:
    """The id the next new group of this session will get (not reserved)."""
    return int(require_session(conn, session_id)["next_group_id"])


def allocate_group(conn: sqlite3.Connection, session_id: str) -> int:
    """Reserve and return a new group id (unique within the session, across branches)."""
    group_id = next_group_id(conn, session_id)
    conn.execute("UPDATE sessions SET next_group_id = ? WHERE id = ?", (group_id + 1, session_id))
    return group_id


def note_group_used(conn: sqlite3.Connection, session_id: str, group_id: int) -> None:
    """Keep the allocator ahead of a group id chosen by the caller."""
    conn.execute(
        "UPDATE sessions SET next_group_id = MAX(next_group_id, ?) WHERE id = ?", (group_id + 1, session_id)
    )


# -- branches -------------------------------------------------------------------------------

def _branch(row: sqlite3.Row) -> BranchInfo:
    return BranchInfo(
        id=row["id"],
        session_id=row["session_id"],
        name=row["name"],
        parent_id=row["parent_id"],
        fork_message_id=row["fork_message_id"],
        head_message_id=row["head_message_id"],
        created_at=row["created_at"],
    )


def get_branch(conn: sqlite3.Connection, branch_id: str) -> BranchInfo:
    row = conn.execute("SELECT * FROM branches WHERE id = ?", (branch_id,)).fetchone()
    if row is None:
        raise UnknownBranch(f"unknown branch {branch_id!r}")
    return _branch(row)


def list_branches(conn: sqlite3.Connection, session_id: str) -> list[BranchInfo]:
    require_session(conn, session_id)
    rows = conn.execute("SELECT * FROM branches WHERE session_id = ? ORDER BY created_at, id", (session_id,))
    return [_branch(r) for r in rows]


def find_branch(conn: sqlite3.Connection, session_id: str, name_or_id: str) -> BranchInfo:
    row = conn.execute(
        "SELECT * FROM branches WHERE session_id = ? AND (id = ? OR name = ?)", (session_id, name_or_id, name_or_id)
    ).fetchone()
    if row is None:
        raise UnknownBranch(f"session {session_id} has no branch {name_or_id!r}")
    return _branch(row)


def create_branch(
    conn: sqlite3.Connection, session_id: str, name: str, parent_id: str, fork_message_id: int | None
) -> str:
    require_session(conn, session_id)
    parent = get_branch(conn, parent_id)
    if parent.session_id != session_id:
        raise UnknownBranch(f"branch {parent_id!r} is not in session {session_id}")
    if conn.execute("SELECT 1 FROM branches WHERE session_id = ? AND name = ?", (session_id, name)).fetchone():
        raise ValueError(f"session {session_id} already has a branch named {name!r}")
    branch_id = new_branch_id()
    conn.execute(
        "INSERT INTO branches (id, session_id, name, parent_id, fork_message_id, created_at, settings) "
        "VALUES (?, ?, ?, ?, ?, ?, (SELECT settings FROM branches WHERE id = ?))",
        (branch_id, session_id, name, parent_id, fork_message_id, now_iso(), parent_id),
    )
    return branch_id


def set_active_branch(conn: sqlite3.Connection, session_id: str, branch_id: str) -> None:
    branch = get_branch(conn, branch_id)
    if branch.session_id != session_id:
        raise UnknownBranch(f"branch {branch_id!r} is not in session {session_id}")
    conn.execute("UPDATE sessions SET active_branch = ? WHERE id = ?", (branch_id, session_id))


def lineage(conn: sqlite3.Connection, branch_id: str) -> list[tuple[str, int | None]]:
    """(branch id, last visible message id or None for all) from the branch up to its root."""
    out: list[tuple[str, int | None]] = []
    limit: int | None = None
    current: str | None = branch_id
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        branch = get_branch(conn, current)
        out.append((current, limit))
        if branch.parent_id is not None:
            # the parent is visible up to the fork point (0: forked before its first message),
            # further capped by any tighter limit from below
            fork = branch.fork_message_id or 0
            limit = fork if limit is None else min(fork, limit)
        current = branch.parent_id
    return out


# -- repositories -------------------------------------------------------------------------------------

class Sessions:
    """Sessions: create, list, rename, delete; their settings overrides and group ids."""

    def __init__(self, database: Connections) -> None:
        self._db = database

    def create(self, title: str = "", repo: str | None = None) -> str:
        with self._db.transaction() as conn:
            return create_session(conn, title, repo)

    def require(self, session_id: str) -> None:
        """Raise UnknownSession unless the session exists."""
        with self._db.connection() as conn:
            require_session(conn, session_id)

    def list(self, repo: str | Path | None = None) -> list[SessionInfo]:
        """Sessions, most recently active first (only those of the repository at ``repo`` when given)."""
        with self._db.connection() as conn:
            return list_sessions(conn, str(Path(repo).resolve()) if repo is not None else None)

    def info(self, session_id: str) -> SessionInfo:
        with self._db.connection() as conn:
            return session_info(conn, session_id)

    def latest(self, repo: str | Path | None = None) -> str | None:
        """The most recently active session (of ``repo`` when given), or None."""
        found = self.list(repo)
        return found[0].id if found else None

    def rename(self, session_id: str, title: str) -> None:
        with self._db.transaction() as conn:
            set_title(conn, session_id, title)

    def delete(self, session_id: str) -> None:
        with self._db.transaction() as conn:
            delete_session(conn, session_id)

    def overrides(self, session_id: str) -> dict[str, Any]:
        with self._db.connection() as conn:
            return settings_overrides(conn, session_id)

    def set_overrides(self, session_id: str, overrides: Mapping[str, Any]) -> None:
        with self._db.transaction() as conn:
            set_settings_overrides(conn, session_id, overrides)

    def next_group_id(self, session_id: str) -> int:
        """The id the next new group will get (not reserved)."""
        with self._db.connection() as conn:
            return next_group_id(conn, session_id)

    def allocate_group(self, session_id: str) -> int:
        """Reserve a new group id for a Turn about to be written."""
        with self._db.transaction() as conn:
            return allocate_group(conn, session_id)
