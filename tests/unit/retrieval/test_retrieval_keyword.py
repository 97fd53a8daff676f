"""Keyword search: identifier-aware tokens, query sanitization, BM25 ranking over FTS5."""
from __future__ import annotations

import pytest

from ctxbench.records.code import SymbolCard
from ctxbench.config import RetrievalConfig
from ctxbench.retrieval.keyword import (
    fts_query,
    identifier_tokens,
    keyword_search,
    query_terms,
    sync_keyword_index,
)
from ctxbench.retrieval.vectors import split_identifier
from ctxbench.store.db import connect


def card(symbol_id: str, signature: str = "", doc: str = "", path: str = "m.py") -> SymbolCard:
    return SymbolCard(symbol_id=symbol_id, kind="function", module=symbol_id.rsplit(".", 1)[0], path=path, line=1,
                      end_line=2, signature=signature, doc=doc, snippet="")


CARDS = [
    card("ui.table.TableRenderer", "class TableRenderer", "Draw a grid of cells.", "ui/table.py"),
    card("ui.table.TableRenderer._render_line", "def _render_line(self, row)", "Format one row.", "ui/table.py"),
    card("net.http.fetch_url", "def fetch_url(url)", "Download a page.", "net/http.py"),
    card("net.http.HTTPClient.send", "def send(self, request)", "Send a request and wait for the answer.",
         "net/http.py"),
    card("core.rendering.render_all", "def render_all(widgets)", "Rendering of every widget.", "core/rendering.py"),
]


@pytest.fixture
def conn(tmp_path):
    c = connect(tmp_path / "kw.db")
    sync_keyword_index(c, "repo", CARDS)
    yield c
    c.close()


def ids(hits):
    return [s for s, _ in hits]


def test_split_identifier_snake_camel_and_acronyms():
    assert split_identifier("_render_line") == ["render", "line"]
    assert split_identifier("TableRenderer") == ["table", "renderer"]
    assert split_identifier("HTTPClient.send") == ["http", "client", "send"]
    assert split_identifier("parse2d_points") == ["parse2d", "points"]


def test_identifier_tokens_keep_words_and_the_joined_form():
    assert identifier_tokens("_render_line") == "render line renderline"
    assert identifier_tokens("TableRenderer") == "table renderer tablerenderer"
    assert identifier_tokens("def fetch_url(url)") == "def fetch url fetchurl url"


def test_query_terms_drop_stop_words_and_split_identifiers():
    stop = RetrievalConfig().keyword_stopwords
    assert query_terms("How does the TableRenderer draw a line?", stop) == [
        "table", "renderer", "tablerenderer", "draw", "line"]
    assert query_terms("where is _render_line", stop) == ["render", "line", "renderline"]
    assert query_terms("how is it", stop) == []


@pytest.mark.parametrize("hostile", ['"unbalanced', "a AND OR NOT b", "NEAR(x y)", "col:value*", "^start -minus",
                                     "(((", "' OR 1=1 --", "ünïcødé wörds"])
def test_fts_query_is_always_valid_fts5(conn, hostile):
    expr = fts_query(hostile)
    for term in expr.split(" OR ") if expr else []:
        assert term.startswith('"') and term.endswith('"') and '"' not in term[1:-1]
    keyword_search(conn, "repo", hostile, 5)  # must not raise


def test_snake_and_camel_queries_find_the_identifier(conn):
    assert ids(keyword_search(conn, "repo", "render_line", 3))[0] == "ui.table.TableRenderer._render_line"
    assert ids(keyword_search(conn, "repo", "TableRenderer", 3))[0] == "ui.table.TableRenderer"
    assert ids(keyword_search(conn, "repo", "tablerenderer", 3))[0] == "ui.table.TableRenderer"
    assert ids(keyword_search(conn, "repo", "HTTPClient", 3))[0] == "net.http.HTTPClient.send"


def test_stemming_and_bm25_order(conn):
    hits = keyword_search(conn, "repo", "how does rendering work?", 5)
    assert set(ids(hits)) >= {"core.rendering.render_all", "ui.table.TableRenderer._render_line"}
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert keyword_search(conn, "repo", "the of and", 5) == []


def test_sync_rewrites_only_when_cards_change(conn):
    assert sync_keyword_index(conn, "repo", CARDS) is False
    changed = CARDS[:-1] + [card("core.rendering.render_all", "def render_all(widgets)", "Paint everything.")]
    assert sync_keyword_index(conn, "repo", changed) is True
    assert ids(keyword_search(conn, "repo", "paint", 3)) == ["core.rendering.render_all"]


def test_repositories_do_not_mix(conn):
    sync_keyword_index(conn, "other", [card("x.fetch_url", "def fetch_url()", "")])
    assert ids(keyword_search(conn, "repo", "fetch_url", 5)) == ["net.http.fetch_url"]
    assert ids(keyword_search(conn, "other", "fetch_url", 5)) == ["x.fetch_url"]
