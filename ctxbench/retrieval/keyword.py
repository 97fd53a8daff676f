"""Keyword search over symbol cards: SQLite FTS5 with identifier-aware tokens, ranked by BM25.

Identifiers are indexed as words *and* whole: ``_render_line`` is ``render line renderline``,
``TableRenderer`` is ``table renderer tablerenderer``, so a question in plain words and a
pasted identifier both match. The Porter stemmer folds ``rendering``/``renders`` to ``render``.
Queries are reduced to words (no FTS5 syntax from user text reaches MATCH), English function
words are dropped, and the rest are OR-ed so BM25 ranks by how many and how rare they are.
"""
from __future__ import annotations

import re
import sqlite3
from typing import Iterable, Sequence

from ctxbench.records.code import SymbolCard
from ctxbench.config import RetrievalConfig
from ctxbench.retrieval.vectors import card_set_digest, split_identifier
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
_TEXT_VERSION = "k2"  # bump when the indexed text changes

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")


def ensure_schema(conn: sqlite3.Connection) -> None:
    migrate(conn, COMPONENT, MIGRATIONS)


def identifier_tokens(text: str) -> str:
    """Index text: each identifier split into words, plus its joined lower-case form when that differs."""
    out: list[str] = []
    for ident in _IDENT.findall(text):
        words = split_identifier(ident)
        out.extend(words)
        joined = "".join(words)
        if len(words) > 1:
            out.append(joined)
    return " ".join(out)


def _row(repo: str, card: SymbolCard) -> tuple[str, ...]:
    name = card.symbol_id.rsplit(".", 1)[-1]
    return (
        repo,
        card.symbol_id,
        identifier_tokens(name),
        identifier_tokens(card.symbol_id),
        identifier_tokens(card.signature),
        identifier_tokens(card.doc),
        identifier_tokens(card.path),
        identifier_tokens(card.excerpt or card.snippet),
    )


def sync_keyword_index(conn: sqlite3.Connection, repo: str, cards: Sequence[SymbolCard]) -> bool:
    """Make the FTS rows of ``repo`` match ``cards``; returns True when they had to be rewritten."""
    ensure_schema(conn)
    digest = card_set_digest(cards, _TEXT_VERSION)
    row = conn.execute("SELECT card_set FROM code_fts_state WHERE repo = ?", (repo,)).fetchone()
    if row is not None and row[0] == digest:
        return False
    with transaction(conn):
        conn.execute("DELETE FROM code_fts WHERE repo = ?", (repo,))
        conn.executemany(
            "INSERT INTO code_fts(repo, symbol_id, name, ident, signature, doc, path, body) VALUES (?,?,?,?,?,?,?,?)",
            [_row(repo, c) for c in cards],
        )
        conn.execute("INSERT OR REPLACE INTO code_fts_state(repo, card_set) VALUES (?, ?)", (repo, digest))
    return True


def query_terms(query: str, stopwords: Iterable[str] = ()) -> list[str]:
    """The words of a query, as indexed (identifiers split and joined), without stop words, in order, unique."""
    stop = {w.lower() for w in stopwords}
    terms: dict[str, None] = {}
    for ident in _IDENT.findall(query):
        words = split_identifier(ident)
        for w in words:
            if w not in stop and len(w) > 1:
                terms.setdefault(w)
        if len(words) > 1:
            terms.setdefault("".join(words))
    return list(terms)


def _match(terms: Iterable[str]) -> str:
    """A safe FTS5 MATCH expression: the terms, each quoted, OR-ed. Empty when there are none."""
    return " OR ".join(f'"{t}"' for t in terms)


def fts_query(query: str, stopwords: Iterable[str] = ()) -> str:
    """A safe FTS5 MATCH expression: the query's terms, each quoted, OR-ed. Empty when nothing is left."""
    return _match(query_terms(query, stopwords))


def keyword_search(conn: sqlite3.Connection, repo: str, query: str, limit: int,
                   config: RetrievalConfig | None = None) -> list[tuple[str, float]]:
    """Symbols of ``repo`` matching ``query``, best first, with a positive BM25 relevance (higher is better)."""
    config = config or RetrievalConfig()
    match = fts_query(query, config.keyword_stopwords)
    if not match or limit <= 0:
        return []
    w = tuple(config.keyword_column_weights) + (0.0,) * (6 - len(config.keyword_column_weights))
    weights = ", ".join(str(float(x)) for x in (0.0, 0.0, *w[:6]))
    try:
        rows = conn.execute(
            f"SELECT symbol_id, bm25(code_fts, {weights}) AS rank FROM code_fts "
            "WHERE code_fts MATCH ? AND repo = ? ORDER BY rank LIMIT ?",
            (match, repo, limit),
        ).fetchall()
    except sqlite3.OperationalError:  # a term FTS5 still refuses: answer nothing rather than fail the turn
        return []
    return [(r[0], -float(r[1])) for r in rows]


def symbols_matching(conn: sqlite3.Connection, repo: str, terms: Sequence[str], symbol_ids: Iterable[str]
                     ) -> set[str]:
    """Which of ``symbol_ids`` match at least one of ``terms`` (words as ``query_terms`` gives them)."""
    ids = list(dict.fromkeys(symbol_ids))
    if not terms or not ids:
        return set()
    match = _match(terms)
    marks = ",".join("?" * len(ids))
    try:
        rows = conn.execute(
            f"SELECT symbol_id FROM code_fts WHERE code_fts MATCH ? AND repo = ? AND symbol_id IN ({marks})",
            (match, repo, *ids),
        ).fetchall()
    except sqlite3.OperationalError:
        return set()
    return {r[0] for r in rows}
