"""What happened at each model call, stored with its PlanId.

The ``llm`` component of the store (its own schema version, beside ``core``) holds:

- ``model_calls``: one row per model call: the plan it sent, the round inside the turn, the
  model, how it ended (``ok``, ``partial``, ``failed``, ``cancelled``), the error line, and the
  assistant message it produced;
- ``tool_traces``: one row per tool call: name, arguments, whether it worked, the messages that
  hold the call and its result, and how long it took;
- ``pin_suggestions``: pins proposed by the model (``suggest_pins``) until the user accepts or
  rejects them;
- ``reference_turns``: in how many turns the model or the user referenced each item (promotion).

The plan itself, its RetrievalSet and the usage report live in the ``core`` tables
(:mod:`ctxbench.store.plans`); together they are everything a call is attributable to.
:class:`Traces` is the repository over them; it shares the session's database and its transactions.
"""
from __future__ import annotations

import sqlite3
from typing import Iterable

from ctxbench.store import db
from ctxbench.store.clock import now_iso
from ctxbench.records.traces import ModelCall, StoredSuggestion, ToolTrace

COMPONENT = "llm"

_V1 = """
CREATE TABLE model_calls (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_id              TEXT NOT NULL,
    session_id           TEXT NOT NULL,
    group_id             INTEGER NOT NULL,
    round                INTEGER NOT NULL,
    provider             TEXT NOT NULL,
    model                TEXT NOT NULL,
    status               TEXT NOT NULL CHECK (status IN ('ok', 'partial', 'failed', 'cancelled')),
    finish_reason        TEXT NOT NULL DEFAULT '',
    error                TEXT NOT NULL DEFAULT '',
    assistant_message_id INTEGER,
    tools_offered        INTEGER NOT NULL DEFAULT 0,
    created_at           TEXT NOT NULL
);
CREATE INDEX model_calls_by_plan ON model_calls (plan_id, id);
CREATE INDEX model_calls_by_session ON model_calls (session_id, id);

CREATE TABLE tool_traces (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_id           TEXT NOT NULL,
    session_id        TEXT NOT NULL,
    group_id          INTEGER NOT NULL,
    tool_call_id      TEXT NOT NULL,
    name              TEXT NOT NULL,
    arguments         TEXT NOT NULL,
    ok                INTEGER NOT NULL,
    call_message_id   INTEGER,
    result_message_id INTEGER,
    result_chars      INTEGER NOT NULL DEFAULT 0,
    duration_ms       REAL NOT NULL DEFAULT 0,
    created_at        TEXT NOT NULL
);
CREATE INDEX tool_traces_by_plan ON tool_traces (plan_id, id);

CREATE TABLE pin_suggestions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    target     TEXT NOT NULL,
    reason     TEXT NOT NULL DEFAULT '',
    source     TEXT NOT NULL DEFAULT 'model',
    plan_id    TEXT NOT NULL DEFAULT '',
    status     TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'accepted', 'rejected')),
    created_at TEXT NOT NULL,
    UNIQUE (session_id, target)
);
"""

_V1 += """
CREATE TABLE reference_turns (
    session_id TEXT NOT NULL,
    item_id    TEXT NOT NULL,
    turns      INTEGER NOT NULL,
    last_turn  INTEGER NOT NULL,
    PRIMARY KEY (session_id, item_id)
);
"""

MIGRATIONS: tuple[db.Migration, ...] = (_V1,)


class Traces:
    """The ``llm`` tables of one database: model calls, tool traces, pin suggestions, reference counts."""

    def __init__(self, database: db.Connections) -> None:
        self._db = database

    def record_call(self, *, plan_id: str, session_id: str, group_id: int, round: int, provider: str, model: str,
                    status: str, finish_reason: str = "", error: str = "", assistant_message_id: int | None = None,
                    tools_offered: int = 0) -> ModelCall:
        with self._db.transaction() as conn:
            stamp = now_iso()
            cur = conn.execute(
                "INSERT INTO model_calls (plan_id, session_id, group_id, round, provider, model, status, finish_reason, "
                "error, assistant_message_id, tools_offered, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (plan_id, session_id, group_id, round, provider, model, status, finish_reason, error,
                 assistant_message_id, tools_offered, stamp),
            )
            return ModelCall(int(cur.lastrowid), plan_id, session_id, group_id, round, provider, model, status,
                             finish_reason, error, assistant_message_id, tools_offered, stamp)

    def record_tool(self, *, plan_id: str, session_id: str, group_id: int, tool_call_id: str, name: str,
                    arguments: str, ok: bool, call_message_id: int | None, result_message_id: int | None,
                    result_chars: int, duration_ms: float) -> ToolTrace:
        with self._db.transaction() as conn:
            stamp = now_iso()
            cur = conn.execute(
                "INSERT INTO tool_traces (plan_id, session_id, group_id, tool_call_id, name, arguments, ok, "
                "call_message_id, result_message_id, result_chars, duration_ms, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (plan_id, session_id, group_id, tool_call_id, name, arguments, int(ok), call_message_id,
                 result_message_id, result_chars, duration_ms, stamp),
            )
            return ToolTrace(int(cur.lastrowid), plan_id, session_id, group_id, tool_call_id, name, arguments, ok,
                             call_message_id, result_message_id, result_chars, duration_ms, stamp)

    def calls(self, *, plan_id: str | None = None, session_id: str | None = None) -> tuple[ModelCall, ...]:
        sql, params = _where(plan_id=plan_id, session_id=session_id)
        with self._db.connection() as conn:
            rows = conn.execute(f"SELECT * FROM model_calls{sql} ORDER BY id", params).fetchall()
        return tuple(_model_call(r) for r in rows)

    def last_call(self, session_id: str, status: str = "ok") -> ModelCall | None:
        """The session's latest model call with ``status`` (None: it has none)."""
        with self._db.connection() as conn:
            r = conn.execute("SELECT * FROM model_calls WHERE session_id = ? AND status = ? ORDER BY id DESC LIMIT 1",
                             (session_id, status)).fetchone()
        return _model_call(r) if r is not None else None

    def tool_traces(self, *, plan_id: str | None = None, session_id: str | None = None) -> tuple[ToolTrace, ...]:
        sql, params = _where(plan_id=plan_id, session_id=session_id)
        with self._db.connection() as conn:
            rows = conn.execute(f"SELECT * FROM tool_traces{sql} ORDER BY id", params).fetchall()
        return tuple(ToolTrace(r["id"], r["plan_id"], r["session_id"], r["group_id"], r["tool_call_id"], r["name"],
                               r["arguments"], bool(r["ok"]), r["call_message_id"], r["result_message_id"],
                               r["result_chars"], r["duration_ms"], r["created_at"]) for r in rows)

    # -- pin suggestions --------------------------------------------------------------------

    def add_suggestion(self, session_id: str, target: str, reason: str, source: str, plan_id: str) -> None:
        """Record a suggestion; one already decided (accepted/rejected) is not reopened."""
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO pin_suggestions (session_id, target, reason, source, plan_id, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, target) DO UPDATE SET "
                "reason = excluded.reason, plan_id = excluded.plan_id WHERE pin_suggestions.status = 'open'",
                (session_id, target, reason, source, plan_id, now_iso()),
            )

    def suggestions(self, session_id: str, status: str = "open") -> tuple[StoredSuggestion, ...]:
        with self._db.connection() as conn:
            rows = conn.execute(
                "SELECT * FROM pin_suggestions WHERE session_id = ? AND status = ? ORDER BY id", (session_id, status)
            ).fetchall()
        return tuple(StoredSuggestion(r["id"], r["session_id"], r["target"], r["reason"], r["source"], r["plan_id"],
                                      r["status"], r["created_at"]) for r in rows)

    def decide_suggestion(self, session_id: str, target: str, accepted: bool) -> bool:
        """Mark a suggestion accepted or rejected (the caller adds the pin when accepted)."""
        with self._db.transaction() as conn:
            cur = conn.execute(
                "UPDATE pin_suggestions SET status = ? WHERE session_id = ? AND target = ?",
                ("accepted" if accepted else "rejected", session_id, target),
            )
            return cur.rowcount > 0

    # -- references (for promotion) -----------------------------------------------------------

    def count_references(self, session_id: str, turn: int, items: Iterable[str]) -> dict[str, int]:
        """Count one more turn for each item referenced in ``turn``; returns all counts.

        Idempotent per turn: counting the same turn again (a retried reflection) changes nothing. Inside
        the caller's transaction (the reflection's) the counts commit or roll back with it.
        """
        with self._db.transaction() as conn:
            return _count_references(conn, session_id, turn, items)


def _model_call(r: sqlite3.Row) -> ModelCall:
    return ModelCall(r["id"], r["plan_id"], r["session_id"], r["group_id"], r["round"], r["provider"], r["model"],
                     r["status"], r["finish_reason"], r["error"], r["assistant_message_id"], r["tools_offered"],
                     r["created_at"])


def _count_references(conn: sqlite3.Connection, session_id: str, turn: int, items: Iterable[str]) -> dict[str, int]:
    for item in sorted(set(items)):
        conn.execute(
            "INSERT INTO reference_turns (session_id, item_id, turns, last_turn) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (session_id, item_id) DO UPDATE SET turns = turns + 1, last_turn = excluded.last_turn "
            "WHERE reference_turns.last_turn < excluded.last_turn",
            (session_id, item, turn),
        )
    rows = conn.execute("SELECT item_id, turns FROM reference_turns WHERE session_id = ?", (session_id,)).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def _where(**filters: object) -> tuple[str, list[object]]:
    parts = [f"{k} = ?" for k, v in filters.items() if v is not None]
    params = [v for v in filters.values() if v is not None]
    return ((" WHERE " + " AND ".join(parts)) if parts else ""), params
