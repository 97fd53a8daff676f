"""Store component ``message_search``: an FTS5 table over single messages.

``group_search`` (core) ranks whole turns for the hybrid strategy; this table ranks each message on its
own (rowid = message id), so a strategy can select one message of a turn without the rest. Its text is
what :func:`ctxbench.store.messages.searchable_text` gives (content, tool names and arguments), with
Porter stemming ("painted" finds "painting": measured on the LoCoMo tune conversations, BM25 over
stemmed words ranks evidence turns better than exact words; benchmarks/README.md). Rows are written with
the messages (``store.messages``); dropped messages keep their row.

No plan ranks with this table's ``bm25()`` any more: its statistics span every branch and session, so the
fused strategy scores messages over the planned history alone (``retrieval.history_keywords``), with this
table's words (``unicode61_chars`` lets ``retrieval.stemming`` tokenize exactly as this table does).
"""
from __future__ import annotations

import json
import sqlite3
import threading
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


_PROBE_LOCK = threading.Lock()


def unicode61_chars(chars: Iterable[str]) -> dict[str, str]:
    """What FTS5's ``unicode61`` tokenizer (this table's, without the stemmer) makes of each character: its
    case-folded form without diacritics when it belongs to a word, ``""`` when it belongs to a word but folds
    to nothing (a combining mark), ``" "`` when it separates words. Asked of SQLite itself (an in-memory FTS5
    table), so a tokenizer written elsewhere (``retrieval.stemming``) can match this table's words exactly."""
    wanted = sorted(set(chars))
    if not wanted:
        return {}
    with _PROBE_LOCK:
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute("CREATE VIRTUAL TABLE probe USING fts5 (c, tokenize = 'unicode61')")
            conn.execute("CREATE VIRTUAL TABLE probe_terms USING fts5vocab (probe, 'instance')")
            conn.executemany("INSERT INTO probe (rowid, c) VALUES (?, ?)",
                             [(i, f"a{ch}b") for i, ch in enumerate(wanted, 1)])
            terms: dict[int, list[str]] = {}
            for term, doc in conn.execute("SELECT term, doc FROM probe_terms ORDER BY doc, offset"):
                terms.setdefault(int(doc), []).append(term)
        finally:
            conn.close()
    out: dict[str, str] = {}
    for i, ch in enumerate(wanted, 1):
        found = terms.get(i, [])
        out[ch] = found[0][1:-1] if len(found) == 1 else " "
    return out
