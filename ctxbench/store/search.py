"""Keyword search over groups (hybrid history strategy) and memos, with SQLite FTS5 BM25.

User turns are turned into safe FTS5 queries: each word is quoted (so FTS5 syntax in the
text cannot break or steer the query), stop words are dropped and the rest are ORed.
Seed 001 explains why the stop words matter: fillers like "continue", "next" or "go on"
otherwise rank any old group that happens to contain them as highly relevant.
"""
from __future__ import annotations

import re
import sqlite3
from typing import Iterable

from ctxbench.records.messages import Message
from ctxbench.store import messages as message_store
from ctxbench.store import sessions as session_store
from ctxbench.store.db import Connections

# Conversational fillers and common English function words; none says what a turn is about.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each else few for from
    further get go goes going got had has have having he her here hers him his how i if in into is it
    its itself just let lets me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these they this
    those through to too under until up very was we were what when where which while who whom why will
    with would you your yours
    continue continuing next ok okay please thanks thank yes yeah yep sure proceed carry keep going
    resume again more go on same fine good great cool alright right hi hello hey now
    """.split()
)

_WORD = re.compile(r"\w+", re.UNICODE)
MIN_TERM_CHARS = 2


def query_terms(text: str) -> list[str]:
    """The distinct content words of ``text``, lowercased, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if len(word) < MIN_TERM_CHARS or word in STOP_WORDS:
            continue
        seen.setdefault(word, None)
    return list(seen)


def fts_query(text: str) -> str:
    """An FTS5 MATCH expression: every content word quoted, ORed; empty when none is left."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in query_terms(text))


def search_groups(
    conn: sqlite3.Connection, session_id: str, branch_id: str, query: str, limit: int
) -> tuple[int, ...]:
    """Group ids visible on ``branch_id`` ranked by BM25 relevance to ``query`` (best first).

    Only active messages are indexed, so dropped and deleted groups never appear.
    """
    match = fts_query(query)
    if not match or limit <= 0:
        return ()
    visible = set(message_store.branch_group_ids(conn, session_id, branch_id))
    rows = conn.execute(
        "SELECT g.group_id FROM group_search JOIN message_groups g ON g.n = group_search.rowid "
        "WHERE group_search MATCH ? AND g.session_id = ? ORDER BY bm25(group_search), g.group_id",
        (match, session_id),
    )
    out: list[int] = []
    for row in rows:
        group_id = int(row["group_id"])
        if group_id in visible:
            out.append(group_id)
            if len(out) >= limit:
                break
    return tuple(out)


class GroupSearch:
    """BM25 keyword search over a session's Turns on its active branch."""

    def __init__(self, database: Connections, default_limit: int) -> None:
        self._db = database
        self.default_limit = default_limit

    def groups(self, session_id: str, query: str, limit: int | None = None) -> tuple[int, ...]:
        """Group ids of the active branch ranked by BM25 relevance to ``query`` (``default_limit`` at most)."""
        limit = self.default_limit if limit is None else limit
        with self._db.connection() as conn:
            return search_groups(conn, session_id, session_store.active_branch(conn, session_id), query, limit)



class MemoryGroupIndex:
    """An in-memory FTS5 table of some turns' text, ranked by BM25 with the same query as :func:`search_groups`:
    for callers that have a session's messages but no database (``ctxbench bench plan-latency``)."""

    def __init__(self, history: Iterable[Message]) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE turns USING fts5(content)")
        texts: dict[int, list[str]] = {}
        for m in history:
            if m.status == "active" and m.content:
                texts.setdefault(m.group_id, []).append(m.content)
        self.conn.executemany("INSERT INTO turns (rowid, content) VALUES (?, ?)",
                              [(gid, "\n".join(parts)) for gid, parts in texts.items()])
        self.conn.commit()

    def ranking(self, query: str, limit: int) -> tuple[int, ...]:
        expr = fts_query(query)
        if not expr or limit <= 0:
            return ()
        rows = self.conn.execute(
            "SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns), rowid LIMIT ?", (expr, limit)
        )
        return tuple(int(r[0]) for r in rows)


class MemoryTextIndex:
    """An in-memory FTS5 table of (rowid, text) rows ranked by BM25 with the same query as :func:`search_groups`:
    for benchmarks that rank texts outside any database (the LoCoMo baselines, the plan timing)."""

    def __init__(self, rows: Iterable[tuple[int, str]], tokenize: str = "unicode61") -> None:
        if tokenize not in ("unicode61", "porter unicode61"):
            raise ValueError(f"unknown tokenizer {tokenize!r}")
        self.conn = sqlite3.connect(":memory:", check_same_thread=False)
        self.conn.execute(f"CREATE VIRTUAL TABLE texts USING fts5(content, tokenize = '{tokenize}')")
        self.conn.executemany("INSERT INTO texts (rowid, content) VALUES (?, ?)", [(i, t) for i, t in rows if t])
        self.conn.commit()

    def ranking(self, query: str, limit: int = -1) -> list[tuple[int, float]]:
        """(rowid, BM25 relevance > 0) best first; ties: the higher rowid (the newer text) first."""
        expr = fts_query(query)
        if not expr:
            return []
        rows = self.conn.execute("SELECT rowid, bm25(texts) FROM texts WHERE texts MATCH ? "
                                 "ORDER BY bm25(texts), rowid DESC LIMIT ?", (expr, limit))
        return [(int(r[0]), -float(r[1])) for r in rows]
