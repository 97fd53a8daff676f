"""Store component ``keyword``: the FTS5 table over the symbol cards of each indexed repository.

One row per card with identifier-aware text per column (name, dotted id, signature, doc, path, body)
and, per repository, the digest of the card set the rows were built from, so an unchanged index is
never rewritten. The text processing lives in :mod:`ctxbench.retrieval.keyword`; this module is its
SQL. MATCH expressions come from there already quoted (no user text reaches FTS5 syntax).
"""
from __future__ import annotations

import sqlite3
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


def search(conn: sqlite3.Connection, repo: str, match: str, weights: Sequence[float], limit: int
           ) -> list[tuple[str, float]]:
    """``(symbol_id, relevance)`` of the rows matching ``match``, best first (relevance = -BM25, higher is
    better); ``weights`` per text column. A term FTS5 still refuses answers nothing rather than failing."""
    columns = ", ".join(str(float(x)) for x in (0.0, 0.0, *weights))
    try:
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
