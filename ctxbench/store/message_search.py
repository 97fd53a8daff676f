"""Store component ``message_search``: an FTS5 table over single messages, for the ``fused`` history strategy.

``group_search`` (core) ranks whole turns for the hybrid strategy; this table ranks each message on its
own (rowid = message id), so a strategy can select one message of a turn without the rest. Its text is
what :func:`ctxbench.store.messages.searchable_text` gives (content, tool names and arguments), with
Porter stemming ("painted" finds "painting": measured on the LoCoMo tune conversations, BM25 over
stemmed words ranks evidence turns better than exact words; benchmarks/README.md). Rows are written with
the messages (``store.messages``) and scoped to a session at query time; dropped messages keep their row
(the planner leaves dropped turns out itself).
"""
from __future__ import annotations

import json
import sqlite3
from typing import Iterable, Sequence

from ctxbench.records.messages import Message
from ctxbench.store.db import migrate

COMPONENT = "message_search"


def searchable_text(content: str, calls: Sequence[tuple[str, str]], tool_name: str | None) -> str:
    """What a message contributes to keyword search: its text, then each tool call's name and arguments,
    then the tool's name (for a result)."""
    parts = [content]
    for name, arguments in calls:
        parts += [name, arguments]
    if tool_name:
        parts.append(tool_name)
    return "\n".join(p for p in parts if p)


def _v1_fill(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE VIRTUAL TABLE message_search USING fts5 (session_id UNINDEXED, content, "
                 "tokenize = 'porter unicode61')")
    rows = conn.execute("SELECT id, session_id, content, tool_calls, tool_name FROM messages ORDER BY id")
    conn.executemany(
        "INSERT INTO message_search (rowid, session_id, content) VALUES (?, ?, ?)",
        [(r[0], r[1], text) for r in rows.fetchall()
         if (text := searchable_text(r[2], [(c["name"], c["arguments"]) for c in json.loads(r[3] or "[]")], r[4]))])


MIGRATIONS = (_v1_fill,)


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Bring the component up to date on a connection that did not come from a Database (tests, tools)."""
    migrate(conn, COMPONENT, MIGRATIONS)


def _present(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'message_search'").fetchone() is not None


def message_text(m: Message) -> str:
    return searchable_text(m.content, [(c.name, c.arguments) for c in m.tool_calls], m.tool_name)


def index_messages(conn: sqlite3.Connection, messages: Iterable[Message]) -> None:
    """(Re)write the rows of these messages (a no-op before the component exists: its migration fills it)."""
    messages = list(messages)
    if not messages or not _present(conn):
        return
    conn.executemany("DELETE FROM message_search WHERE rowid = ?", [(m.id,) for m in messages])
    conn.executemany("INSERT INTO message_search (rowid, session_id, content) VALUES (?, ?, ?)",
                     [(m.id, m.session_id, text) for m in messages if (text := message_text(m))])


def forget(conn: sqlite3.Connection, message_ids: Iterable[int]) -> None:
    if _present(conn):
        conn.executemany("DELETE FROM message_search WHERE rowid = ?", [(int(i),) for i in message_ids])


def forget_session(conn: sqlite3.Connection, session_id: str) -> None:
    if _present(conn):
        conn.execute("DELETE FROM message_search WHERE session_id = ?", (session_id,))


def search(conn: sqlite3.Connection, session_id: str, match: str, limit: int) -> tuple[tuple[int, float], ...]:
    """(message id, BM25 relevance > 0) of the session's messages matching ``match`` (an FTS5 expression
    already quoted, see ``store.search.fts_query``), best first."""
    if not match or limit <= 0 or not _present(conn):
        return ()
    rows = conn.execute(
        "SELECT rowid, bm25(message_search) FROM message_search WHERE message_search MATCH ? AND session_id = ? "
        "ORDER BY bm25(message_search), rowid LIMIT ?", (match, session_id, limit))
    return tuple((int(r[0]), round(-float(r[1]), 6)) for r in rows)
