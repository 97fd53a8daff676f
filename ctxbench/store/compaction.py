"""The ``compaction`` component of the store: summaries of history, tasks, and each session's auto-compact
threshold.

- ``summaries``: the ``summaries`` record of seed 004 — the turns (``group_ids``) and messages
  (``source_ids``) a summary stands in for, its text and source (``extractive`` or ``model:NAME``), tokens
  before and after, the protected turns inside its span (``kept_groups``), the finished task it summarises,
  and its status (``active``, or ``undone`` when the compaction was undone: the turns come back, the row
  stays for the record). Summaries belong to a branch; a fork inherits those that cover only turns it sees.
- ``tasks``: named scopes of turns (``/task start``, or opened by a STATE block's goal), one open per
  branch at most.
- ``compaction_settings``: a session's own auto-compact threshold over the config's.

Rows go with their session (foreign keys, ON DELETE CASCADE). :class:`Summaries` and :class:`Tasks` are
the repositories.
"""
from __future__ import annotations

import json
import sqlite3
from typing import Sequence

from ctxbench.records.compaction import TASK_OPENERS, Summary, Task, TaskChange
from ctxbench.records.errors import NotFound
from ctxbench.store import db
from ctxbench.store.clock import now_iso
from ctxbench.store.sessions import active_branch

COMPONENT = "compaction"

_V1 = """
CREATE TABLE summaries (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    branch_id     TEXT NOT NULL REFERENCES branches(id) ON DELETE CASCADE,
    group_ids     TEXT NOT NULL,
    source_ids    TEXT NOT NULL,
    kept_groups   TEXT NOT NULL DEFAULT '[]',
    text          TEXT NOT NULL,
    source        TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after  INTEGER NOT NULL,
    task_id       INTEGER NOT NULL DEFAULT 0,
    status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'undone')),
    created_at    TEXT NOT NULL,
    undone_at     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX summaries_by_branch ON summaries (branch_id, status, id);

CREATE TABLE tasks (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    branch_id     TEXT NOT NULL REFERENCES branches(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    opened_by     TEXT NOT NULL CHECK (opened_by IN ('user', 'state')),
    started_group INTEGER NOT NULL,
    ended_group   INTEGER,
    started_at    TEXT NOT NULL,
    ended_at      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX tasks_by_branch ON tasks (branch_id, id);

CREATE TABLE compaction_settings (
    session_id     TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    auto_threshold REAL NOT NULL
);
"""

MIGRATIONS: tuple[db.Migration, ...] = (_V1,)


def _summary(r: sqlite3.Row) -> Summary:
    return Summary(
        id=int(r["id"]), session_id=r["session_id"], branch_id=r["branch_id"],
        group_ids=tuple(json.loads(r["group_ids"])), message_ids=tuple(json.loads(r["source_ids"])),
        text=r["text"], source=r["source"], tokens_before=int(r["tokens_before"]),
        tokens_after=int(r["tokens_after"]), created_at=r["created_at"],
        kept_groups=tuple(json.loads(r["kept_groups"])), task_id=int(r["task_id"]), status=r["status"])


def _task(r: sqlite3.Row) -> Task:
    return Task(id=int(r["id"]), session_id=r["session_id"], branch_id=r["branch_id"], name=r["name"],
                opened_by=r["opened_by"], started_group=int(r["started_group"]),
                ended_group=None if r["ended_group"] is None else int(r["ended_group"]),
                started_at=r["started_at"], ended_at=r["ended_at"])


def active_summaries(conn: sqlite3.Connection, branch_id: str) -> tuple[Summary, ...]:
    rows = conn.execute("SELECT * FROM summaries WHERE branch_id = ? AND status = 'active' ORDER BY id",
                        (branch_id,)).fetchall()
    return tuple(_summary(r) for r in rows)


def open_task(conn: sqlite3.Connection, branch_id: str) -> Task | None:
    row = conn.execute("SELECT * FROM tasks WHERE branch_id = ? AND ended_group IS NULL ORDER BY id DESC LIMIT 1",
                       (branch_id,)).fetchone()
    return _task(row) if row else None


def insert_summary(conn: sqlite3.Connection, session_id: str, branch_id: str, *, group_ids: Sequence[int],
                   message_ids: Sequence[int], text: str, source: str, tokens_before: int, tokens_after: int,
                   kept_groups: Sequence[int] = (), task_id: int = 0, created_at: str | None = None) -> int:
    cur = conn.execute(
        "INSERT INTO summaries (session_id, branch_id, group_ids, source_ids, kept_groups, text, source, "
        "tokens_before, tokens_after, task_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, branch_id, json.dumps(list(group_ids)), json.dumps(list(message_ids)),
         json.dumps(list(kept_groups)), text, source, tokens_before, tokens_after, task_id,
         created_at or now_iso()))
    return int(cur.lastrowid)


def copy_to_fork(conn: sqlite3.Connection, session_id: str, parent: str, child: str, fork_group: int | None) -> None:
    """A fork inherits the parent's summaries that cover only turns it sees (up to ``fork_group``), and the
    open task when it started before the fork."""
    if fork_group is None:
        return
    for s in active_summaries(conn, parent):
        if s.group_ids and max(s.group_ids) <= fork_group:
            insert_summary(conn, session_id, child, group_ids=s.group_ids, message_ids=s.message_ids, text=s.text,
                           source=s.source, tokens_before=s.tokens_before, tokens_after=s.tokens_after,
                           kept_groups=s.kept_groups, task_id=s.task_id, created_at=s.created_at)
    task = open_task(conn, parent)
    if task is not None and task.started_group <= fork_group:
        conn.execute("INSERT INTO tasks (session_id, branch_id, name, opened_by, started_group, started_at) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     (session_id, child, task.name, task.opened_by, task.started_group, task.started_at))


class Summaries:
    """Summaries of one database's sessions."""

    def __init__(self, database: db.Connections) -> None:
        self._db = database

    def add(self, session_id: str, *, group_ids: Sequence[int], message_ids: Sequence[int], text: str, source: str,
            tokens_before: int, tokens_after: int, kept_groups: Sequence[int] = (), task_id: int = 0) -> Summary:
        """Store a summary on the session's active branch (its turns are replaced from the next plan on)."""
        with self._db.transaction() as conn:
            branch = active_branch(conn, session_id)
            sid = insert_summary(conn, session_id, branch, group_ids=group_ids, message_ids=message_ids, text=text,
                                 source=source, tokens_before=tokens_before, tokens_after=tokens_after,
                                 kept_groups=kept_groups, task_id=task_id)
            return _summary(conn.execute("SELECT * FROM summaries WHERE id = ?", (sid,)).fetchone())

    def active(self, session_id: str) -> tuple[Summary, ...]:
        """The active branch's summaries in force, oldest first."""
        with self._db.connection() as conn:
            return active_summaries(conn, active_branch(conn, session_id))

    def all(self, session_id: str) -> tuple[Summary, ...]:
        """Every summary of the session, undone ones too, oldest first."""
        with self._db.connection() as conn:
            rows = conn.execute("SELECT * FROM summaries WHERE session_id = ? ORDER BY id", (session_id,)).fetchall()
        return tuple(_summary(r) for r in rows)

    def get(self, session_id: str, summary_id: int) -> Summary:
        with self._db.connection() as conn:
            row = conn.execute("SELECT * FROM summaries WHERE session_id = ? AND id = ?",
                               (session_id, summary_id)).fetchone()
        if row is None:
            raise NotFound(f"session {session_id} has no summary s{summary_id}")
        return _summary(row)

    def undo(self, session_id: str, summary_id: int | None = None) -> Summary:
        """Undo a summary (default: the newest active one on the active branch): its turns are sent again."""
        with self._db.transaction() as conn:
            branch = active_branch(conn, session_id)
            if summary_id is None:
                row = conn.execute("SELECT * FROM summaries WHERE branch_id = ? AND status = 'active' "
                                   "ORDER BY id DESC LIMIT 1", (branch,)).fetchone()
                if row is None:
                    raise NotFound("nothing to undo: the active branch has no summary in force")
            else:
                row = conn.execute("SELECT * FROM summaries WHERE branch_id = ? AND id = ?",
                                   (branch, summary_id)).fetchone()
                if row is None:
                    raise NotFound(f"the active branch has no summary s{summary_id}")
                if row["status"] != "active":
                    raise NotFound(f"summary s{summary_id} was already undone")
            conn.execute("UPDATE summaries SET status = 'undone', undone_at = ? WHERE id = ?", (now_iso(), row["id"]))
            return _summary(conn.execute("SELECT * FROM summaries WHERE id = ?", (row["id"],)).fetchone())

    # -- the session's auto-compact threshold ---------------------------------------------------------
    def auto_threshold(self, session_id: str) -> float | None:
        """The session's own threshold (share of the budget; 0 = off), or None to use the config's."""
        with self._db.connection() as conn:
            row = conn.execute("SELECT auto_threshold FROM compaction_settings WHERE session_id = ?",
                               (session_id,)).fetchone()
        return float(row[0]) if row else None

    def set_auto_threshold(self, session_id: str, threshold: float | None) -> None:
        with self._db.transaction() as conn:
            if threshold is None:
                conn.execute("DELETE FROM compaction_settings WHERE session_id = ?", (session_id,))
            else:
                conn.execute("INSERT INTO compaction_settings (session_id, auto_threshold) VALUES (?, ?) "
                             "ON CONFLICT(session_id) DO UPDATE SET auto_threshold = excluded.auto_threshold",
                             (session_id, threshold))


class Tasks:
    """Tasks of one database's sessions: at most one open per branch."""

    def __init__(self, database: db.Connections) -> None:
        self._db = database

    def current(self, session_id: str) -> Task | None:
        with self._db.connection() as conn:
            return open_task(conn, active_branch(conn, session_id))

    def list(self, session_id: str) -> tuple[Task, ...]:
        """The active branch's tasks, oldest first."""
        with self._db.connection() as conn:
            rows = conn.execute("SELECT * FROM tasks WHERE branch_id = ? ORDER BY id",
                                (active_branch(conn, session_id),)).fetchall()
        return tuple(_task(r) for r in rows)

    def find(self, session_id: str, name_or_id: str) -> Task:
        """A task of the active branch by ``t3``/``3`` or by name (the newest of that name)."""
        key = name_or_id.strip()
        number = key[1:] if key[:1] in ("t", "T") and key[1:].isdigit() else key
        for task in reversed(self.list(session_id)):
            if (number.isdigit() and task.id == int(number)) or task.name == key:
                return task
        raise NotFound(f"no task {name_or_id!r} on the active branch")

    def start(self, session_id: str, name: str, *, first_group: int, opened_by: str = "user") -> TaskChange:
        """Open a task from turn ``first_group`` on; the open one (if any) ends at the turn before, and its
        leases of scope ``task`` with it."""
        name = " ".join(name.split())
        if not name:
            raise ValueError("a task needs a name, e.g. /task start fix-rounding")
        if opened_by not in TASK_OPENERS:
            raise ValueError(f"a task is opened by one of {', '.join(TASK_OPENERS)}, not {opened_by!r}")
        with self._db.transaction() as conn:
            branch = active_branch(conn, session_id)
            ended, leases = _end(conn, branch, first_group - 1)
            cur = conn.execute(
                "INSERT INTO tasks (session_id, branch_id, name, opened_by, started_group, started_at) "
                "VALUES (?, ?, ?, ?, ?, ?)", (session_id, branch, name, opened_by, first_group, now_iso()))
            task = _task(conn.execute("SELECT * FROM tasks WHERE id = ?", (cur.lastrowid,)).fetchone())
            return TaskChange(task, ended, leases)

    def end(self, session_id: str, *, last_group: int) -> TaskChange:
        """End the open task at turn ``last_group``, and its leases of scope ``task`` with it."""
        with self._db.transaction() as conn:
            ended, leases = _end(conn, active_branch(conn, session_id), last_group)
            return TaskChange(None, ended, leases)


def _end(conn: sqlite3.Connection, branch_id: str, last_group: int) -> tuple[Task | None, int]:
    task = open_task(conn, branch_id)
    if task is None:
        return None, 0
    last = max(last_group, task.started_group - 1)
    conn.execute("UPDATE tasks SET ended_group = ?, ended_at = ? WHERE id = ?", (last, now_iso(), task.id))
    leases = conn.execute("DELETE FROM pins WHERE branch_id = ? AND kind = 'leased' AND scope = 'task'",
                          (branch_id,)).rowcount
    return _task(conn.execute("SELECT * FROM tasks WHERE id = ?", (task.id,)).fetchone()), leases
