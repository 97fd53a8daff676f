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
from functools import lru_cache
from typing import Callable, Iterable, Sequence

from ctxbench.records.code import SymbolCard
from ctxbench.config import RetrievalConfig
from ctxbench.retrieval.vectors import card_set_digest, split_identifier
from ctxbench.store import code_search

_TEXT_VERSION = "k2"  # bump when the indexed text changes

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")


IDENTIFIER_CACHE_SIZE = 65_536  # identifiers whose index words are remembered (a repository repeats its names)


@lru_cache(maxsize=IDENTIFIER_CACHE_SIZE)
def _identifier_words(ident: str) -> tuple[str, ...]:
    """One identifier's index words: split into words, then the joined form when there are several."""
    words = split_identifier(ident)
    return (*words, "".join(words)) if len(words) > 1 else tuple(words)


def identifier_tokens(text: str) -> str:
    """Index text: each identifier split into words, plus its joined lower-case form when that differs. Each
    identifier is split once per process (the cards of a repository hold the same names thousands of times)."""
    out: list[str] = []
    for ident in _IDENT.findall(text):
        out.extend(_identifier_words(ident))
    return " ".join(out)


def _row(card: SymbolCard, body: str = "") -> tuple[str, ...]:
    """A card's row: its symbol id, then the text of each of ``code_search.COLUMNS`` (``body``: the text of
    the body column, default the card's excerpt or snippet)."""
    name = card.symbol_id.rsplit(".", 1)[-1]
    return (
        card.symbol_id,
        identifier_tokens(name),
        identifier_tokens(card.symbol_id),
        identifier_tokens(card.signature),
        identifier_tokens(card.doc),
        identifier_tokens(card.path),
        identifier_tokens(body or card.excerpt or card.snippet),
    )


def sync_keyword_index(conn: sqlite3.Connection, repo: str, cards: Sequence[SymbolCard],
                       body: Callable[[SymbolCard], str] | None = None, body_key: str = "") -> bool:
    """Make the FTS rows of ``repo`` match ``cards``; returns True when they had to be rewritten. ``body`` gives
    a card's body text for the body column (``body_key`` names that choice, so changing it rewrites the rows)."""
    digest = card_set_digest(cards, _TEXT_VERSION + body_key)
    if code_search.card_set(conn, repo) == digest:
        return False
    code_search.replace_rows(conn, repo, [_row(c, body(c) if body is not None else "") for c in cards], digest)
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
    return keyword_search_terms(conn, repo, query_terms(query, config.keyword_stopwords), limit, config)


def keyword_search_terms(conn: sqlite3.Connection, repo: str, terms: Sequence[str], limit: int,
                         config: RetrievalConfig | None = None) -> list[tuple[str, float]]:
    """``keyword_search`` for words already reduced (``query_terms`` form), e.g. a query's expansion words."""
    config = config or RetrievalConfig()
    if not terms or limit <= 0:
        return []
    columns = len(code_search.COLUMNS)
    weights = (tuple(config.keyword_column_weights) + (0.0,) * columns)[:columns]
    return code_search.search(conn, repo, _match(terms), weights, limit)


def symbols_matching(conn: sqlite3.Connection, repo: str, terms: Sequence[str], symbol_ids: Iterable[str]
                     ) -> set[str]:
    """Which of ``symbol_ids`` match at least one of ``terms`` (words as ``query_terms`` gives them)."""
    if not terms:
        return set()
    return code_search.matching(conn, repo, _match(terms), symbol_ids)
