"""Store component ``keyword``: the FTS5 table over the symbol cards of each indexed repository.

One row per card with identifier-aware text per column (name, dotted id, signature, doc, path, body)
and, per repository, the digest of the card set the rows were built from, so an unchanged index is
never rewritten. The text processing lives in :mod:`ctxbench.retrieval.keyword`; this module is its
SQL. MATCH expressions come from there already quoted (no user text reaches FTS5 syntax).

A repository's rows are written at once, so they hold one block of consecutive rowids. ``search`` asks FTS5
for that rowid range, which it filters as it scans, instead of comparing the unindexed ``repo`` column of
every matching row of every repository (the larger part of a warm query's keyword time). The block is found
once per connection and card set and checked inside the very statement that uses it (the card set still
the same, its first and last rows still the repository's); a statement that finds nothing is asked again
with the plain filter, so a stale block never changes an answer.
"""
from __future__ import annotations

import sqlite3
import threading
import weakref
from typing import Iterable, Sequence

from ctxbench.store.db import migrate, transaction

COMPONENT = "keyword"
MIGRATIONS = (
    """
    CREATE VIRTUAL TABLE code_fts USING fts5(
        repo UNINDEXED, symbol_id UNINDEXED, name, ident, signature, doc, path,
        tokenize = 'porter unicode61'
    );
    CREATE TABLE code_fts_state (repo TEXT PRIMARY KEY, card_set TEXT NOT NULL);
    """,
    # v2: a low-weight body column (identifiers and words of the card's excerpt)
    """
    DROP TABLE code_fts;
    DELETE FROM code_fts_state;
    CREATE VIRTUAL TABLE code_fts USING fts5(
        repo UNINDEXED, symbol_id UNINDEXED, name, ident, signature, doc, path, body,
        tokenize = 'porter unicode61'
    );
    """,
)
COLUMNS = ("name", "ident", "signature", "doc", "path", "body")  # the weighted text columns, in order


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Bring the component up to date on a connection that did not come from a Database (tests, tools)."""
    migrate(conn, COMPONENT, MIGRATIONS)


def card_set(conn: sqlite3.Connection, repo: str) -> str | None:
    """The digest of the card set the repository's rows were built from (None: never built)."""
    ensure_schema(conn)
    row = conn.execute("SELECT card_set FROM code_fts_state WHERE repo = ?", (repo,)).fetchone()
    return row[0] if row is not None else None


def replace_rows(conn: sqlite3.Connection, repo: str, rows: Sequence[tuple[str, ...]], digest: str) -> None:
    """Rewrite the repository's rows, ``(symbol_id, *COLUMNS)`` each, and remember their card set."""
    with transaction(conn):
        conn.execute("DELETE FROM code_fts WHERE repo = ?", (repo,))
        conn.executemany(
            "INSERT INTO code_fts(repo, symbol_id, name, ident, signature, doc, path, body) VALUES (?,?,?,?,?,?,?,?)",
            [(repo, *row) for row in rows],
        )
        conn.execute("INSERT OR REPLACE INTO code_fts_state(repo, card_set) VALUES (?, ?)", (repo, digest))


# per connection, repository -> (the card set it was looked at for, its block or None when its rows are not one)
_BLOCKS: "weakref.WeakKeyDictionary[sqlite3.Connection, dict[str, tuple[str | None, tuple[int, int] | None]]]" = \
    weakref.WeakKeyDictionary()
_BLOCKS_LOCK = threading.Lock()
_STATE = "SELECT card_set FROM code_fts_state WHERE repo = ?"
_ENDS = "SELECT count(*) FROM code_fts WHERE rowid IN (?, ?) AND repo = ?"


def _block(conn: sqlite3.Connection, repo: str) -> tuple[str, int, int] | None:
    """``(card_set, first rowid, last rowid)`` of the repository's rows when they are one block of consecutive
    rowids (None when not, or when it has no rows); looked at once per connection and card set."""
    try:
        with _BLOCKS_LOCK:
            known = _BLOCKS.setdefault(conn, {})
    except TypeError:  # a plain sqlite3 connection takes no weak reference: nothing remembered, the plain filter
        return None
    found = known.get(repo)
    if found is not None:
        digest, block = found
        if block is not None:
            return (digest, *block)  # checked by the statement that uses it
        state = conn.execute(_STATE, (repo,)).fetchone()
        if (state[0] if state else None) == digest:
            return None  # the card set whose rows were not one block
    first, last, count, digest = conn.execute(
        f"SELECT min(rowid), max(rowid), count(*), ({_STATE}) FROM code_fts WHERE repo = ?", (repo, repo)).fetchone()
    block = (first, last) if count and digest is not None and last - first + 1 == count else None
    with _BLOCKS_LOCK:
        known[repo] = (digest, block)
    return (digest, *block) if block is not None else None


def _block_holds(conn: sqlite3.Connection, repo: str, digest: str, first: int, last: int) -> bool:
    state = conn.execute(_STATE, (repo,)).fetchone()
    return state is not None and state[0] == digest and conn.execute(_ENDS, (first, last, repo)).fetchone()[0] == 2


def search(conn: sqlite3.Connection, repo: str, match: str, weights: Sequence[float], limit: int
           ) -> list[tuple[str, float]]:
    """``(symbol_id, relevance)`` of the rows matching ``match``, best first (relevance = -BM25, higher is
    better); ``weights`` per text column. A term FTS5 still refuses answers nothing rather than failing."""
    columns = ", ".join(str(float(x)) for x in (0.0, 0.0, *weights))
    try:
        block = _block(conn, repo)
        if block is not None:
            digest, first, last = block
            # the same rows as ``repo = ?`` while the card set is the one the block was found for and its first and
            # last rows are the repository's (a repository's rows are written as one block of that many rows)
            rows = conn.execute(
                f"SELECT symbol_id, bm25(code_fts, {columns}) AS rank FROM code_fts "
                "WHERE code_fts MATCH ? AND rowid BETWEEN ? AND ? "
                f"AND ({_STATE}) = ? AND ({_ENDS}) = 2 "
                "ORDER BY rank LIMIT ?",
                (match, first, last, repo, digest, first, last, repo, limit),
            ).fetchall()
            if rows:
                return [(r[0], -float(r[1])) for r in rows]
            if _block_holds(conn, repo, digest, first, last):
                return []  # the statement checked the same block itself: nothing matches
            with _BLOCKS_LOCK:  # stale: looked at again next time, and the plain filter answers now
                _BLOCKS.get(conn, {}).pop(repo, None)
        rows = conn.execute(
            f"SELECT symbol_id, bm25(code_fts, {columns}) AS rank FROM code_fts "
            "WHERE code_fts MATCH ? AND repo = ? ORDER BY rank LIMIT ?",
            (match, repo, limit),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    return [(r[0], -float(r[1])) for r in rows]


def matching(conn: sqlite3.Connection, repo: str, match: str, symbol_ids: Iterable[str]) -> set[str]:
    """Which of ``symbol_ids`` have a row matching ``match``."""
    ids = list(dict.fromkeys(symbol_ids))
    if not ids:
        return set()
    marks = ",".join("?" * len(ids))
    try:
        rows = conn.execute(
            f"SELECT symbol_id FROM code_fts WHERE code_fts MATCH ? AND repo = ? AND symbol_id IN ({marks})",
            (match, repo, *ids),
        ).fetchall()
    except sqlite3.OperationalError:
        return set()
    return {r[0] for r in rows}
