"""Retriever behaviour on a tiny indexed repository (hashing embedder: fast, deterministic)."""
from __future__ import annotations

import dataclasses
import sqlite3

import numpy as np
import pytest

from ctxbench.codegraph.index import IndexNotFound, build_index, load_index
from ctxbench.config import Config
from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.retrieval.retriever import NOTE_LOADING, NOTE_NO_EMBEDDER
from ctxbench.service.index_views import retriever_for
from ctxbench.retrieval.vectors import (
    build_faiss,
    embed_cards,
    embed_text,
    load_or_build_index,
    VectorIndex,
)
from ctxbench.store.db import connect

from retrieval_fixture import index_repo, view, write_repo


@pytest.fixture
def repo(tmp_path):
    return write_repo(tmp_path / "repo")


@pytest.fixture
def conn(tmp_path):
    c = connect(tmp_path / "store.db")
    yield c
    c.close()


@pytest.fixture
def index(repo, conn):
    return index_repo(repo, conn)


class NotReadyEmbedder:
    """An embedder still loading its model."""

    key = "never"
    ready = False
    error = None

    def __init__(self):
        self.started = 0

    def start_loading(self):
        self.started += 1

    def wait(self, timeout=None):
        return False

    def encode(self, texts, progress=None, **kw):  # pragma: no cover - must not be called
        raise AssertionError("encode called while the model is loading")


def symbols(rs):
    return [h.symbol for h in rs.hits]


def test_fused_retrieval_finds_the_method_and_explains_why(index, conn):
    r = retriever_for(conn, None, Config(), HashingEmbedder(), index=view(index))
    rs = r.retrieve("how is one table row formatted as a padded line?", k=5)
    assert rs.semantic_available and rs.notes == ()
    assert symbols(rs)[0] == "render.table.TableRenderer._render_line"
    top = rs.hits[0]
    assert top.path == "render/table.py" and top.line == 15
    assert "semantic" in top.why and "keyword rank 1" in top.why
    names = dict(top.components)
    assert names["keyword_rank"] == 1.0 and -1.0 <= names["semantic"] <= 1.0
    assert top.card_hash == index.cards[top.symbol].card_hash
    assert top.card_text.startswith("# render.table.TableRenderer._render_line")
    # Heavy: the card's head (signature, doc) and, after it, the body lines the query matches, numbered
    assert "def _render_line" in top.card_head and "def _render_line" not in top.excerpt
    assert 'return " | ".join(pad(cell, width)' in top.excerpt
    assert top.excerpt.split()[0] == str(top.excerpt_lines[0]) and top.excerpt_lines[0] > top.line
    assert rs.scaffold == "SCAFFOLD"
    assert [h.score for h in rs.hits] == sorted((h.score for h in rs.hits), reverse=True)


def test_same_query_same_retrieval_set_id(index, conn):
    r = retriever_for(conn, None, Config(), HashingEmbedder(), index=view(index))
    a = r.retrieve("evict the oldest cache entry")
    b = r.retrieve("evict the oldest cache entry")
    c = r.retrieve("download a web page")
    assert a.id == b.id and a.id != c.id and a.id.startswith("rs_")


def test_graph_expansion_adds_callee_with_relation_in_words(index, conn):
    r = retriever_for(conn, None, Config(), None, index=view(index))
    rs = r.retrieve("format one row as a padded line", k=10)
    by_symbol = {h.symbol: h for h in rs.hits}
    assert "render.text.pad" in by_symbol
    pad = by_symbol["render.text.pad"]
    assert "called by TableRenderer._render_line" in pad.why
    assert dict(pad.components)["graph"] > 0
    without_graph = r.retrieve("format one row as a padded line", k=10, sources=("keyword",))
    assert all("graph" not in dict(h.components) for h in without_graph.hits)


def test_graph_neighbour_found_only_through_the_graph_has_graph_provenance(index, conn):
    r = retriever_for(conn, None, Config(), None, index=view(index))
    rs = r.retrieve("Fill with spaces on the right up to the given width", k=20)
    assert symbols(rs)[0] == "render.text.pad"
    hit = next(h for h in rs.hits if h.symbol == "render.text._blank")
    assert hit.provenance == "graph" and hit.neighbour_of == "render.text.pad"
    assert hit.why.endswith(" · called by text.pad") and hit.why.startswith(f"score {hit.score:.3f} (RRF")
    assert "keyword" not in dict(hit.components)


def rs_symbols(rs):
    return set(symbols(rs))


def test_semantic_unavailable_while_model_loads_keyword_and_graph_still_answer(index, conn):
    embedder = NotReadyEmbedder()
    r = retriever_for(conn, None, Config(), embedder, index=view(index))
    rs = r.retrieve("least recently used cache", k=5)
    assert rs.semantic_available is False
    assert rs.notes == (NOTE_LOADING,)
    assert embedder.started == 1
    assert symbols(rs)[0].startswith("store.cache.LRUCache")
    assert all("semantic" not in dict(h.components) for h in rs.hits)


def test_no_embedder_note(index, conn):
    rs = retriever_for(conn, None, Config(), None, index=view(index)).retrieve("pad text")
    assert rs.semantic_available is False and rs.notes == (NOTE_NO_EMBEDDER,)
    assert rs.hits


def test_identifier_in_the_query_ranks_that_symbol_first(index, conn):
    r = retriever_for(conn, None, Config(), None, index=view(index))
    rs = r.retrieve("what does `LRUCache.set` do when full?", k=5)
    assert symbols(rs)[0] == "store.cache.LRUCache.set"
    assert "named in the query" in rs.hits[0].why
    bare = r.name_ranking("why does parse_headers split on colons")
    assert [s for s, _ in bare] == ["net.http.parse_headers"]
    assert r.name_ranking("how does this work") == []


def test_pins_activation_and_mentions_boost(index, conn):
    r = retriever_for(conn, None, Config(), None, index=view(index))
    plain = r.retrieve("render table rows", k=20)
    assert "net.http.fetch_url" not in symbols(plain)
    pinned = r.retrieve("render table rows", k=20, pins=("card:net.http.fetch_url",))
    hit = next(h for h in pinned.hits if h.symbol == "net.http.fetch_url")
    assert "pinned" in hit.why and hit.provenance == "pin"
    base = {h.symbol: h.score for h in plain.hits}
    active = r.retrieve("render table rows", k=20, activation={"render.text.shout": 2.0},
                        mentioned=("store.cache.LRUCache",))
    scores = {h.symbol: h for h in active.hits}
    assert "store.cache.LRUCache" in scores and "mentioned" in scores["store.cache.LRUCache"].why
    assert "render.text.shout" in base  # the fixture's precondition: activation boosts a hit that is there
    assert scores["render.text.shout"].score > base["render.text.shout"]
    assert "recently active" in scores["render.text.shout"].why


def test_retriever_loads_the_index_from_the_store(repo, conn):
    build_index(repo, conn, Config().index)
    r = retriever_for(conn, repo, Config(), None)
    rs = r.retrieve("download a web page over http", k=3)
    assert symbols(rs)[0] == "net.http.fetch_url"


def test_unindexed_repository_gives_an_empty_set_with_a_note(tmp_path, conn):
    (tmp_path / "empty").mkdir()
    r = retriever_for(conn, tmp_path / "empty", Config(), None)
    with pytest.raises(IndexNotFound):
        load_index(tmp_path / "empty", conn)
    rs = r.retrieve("anything")
    assert rs.hits == () and rs.notes == ("repository not indexed",)


# -- vectors -----------------------------------------------------------------------------------------

def test_embed_cards_reuses_cached_vectors_by_card_hash(index, conn):
    cards = list(index.cards.values())
    first = embed_cards(cards, conn, HashingEmbedder())
    again = embed_cards(cards, conn, HashingEmbedder())
    assert (first.embedded, first.reused) == (len(cards), 0)
    assert (again.embedded, again.reused) == (0, len(cards))
    other_model = embed_cards(cards[:3], conn, HashingEmbedder(dimension=64))
    assert other_model.embedded == 3  # vectors are keyed by model too


def test_faiss_index_file_beside_the_db_and_rebuilt_when_cards_change(repo, tmp_path, conn):
    config = Config()
    index = index_repo(repo, conn, config)
    embedder = HashingEmbedder()
    vi, stats = load_or_build_index(conn, str(index.root), list(index.cards.values()), embedder, config.embedding)
    files = list(tmp_path.glob("store.*.faiss"))
    assert len(files) == 1 and len(vi) == len(index.cards) and vi.kind == "flat"
    assert stats.embedded == len(index.cards)
    mtime = files[0].stat().st_mtime_ns
    vi2, stats2 = load_or_build_index(conn, str(index.root), list(index.cards.values()), embedder, config.embedding)
    assert stats2.embedded == 0 and files[0].stat().st_mtime_ns == mtime  # read back, not rebuilt
    # change one function: only its card is re-embedded and the index is rebuilt
    text = (repo / "render" / "text.py").read_text()
    (repo / "render" / "text.py").write_text(text.replace("Upper-case a string", "Capitalise a string"))
    index2 = index_repo(repo, conn, config)
    vi3, stats3 = load_or_build_index(conn, str(index2.root), list(index2.cards.values()), embedder, config.embedding)
    assert stats3.embedded >= 1 and stats3.reused >= len(index2.cards) - 3
    assert len(vi3) == len(index2.cards)
    q = embedder.encode([embed_text(index2.cards["render.text.shout"])])[0]
    assert vi3.search(q, 1)[0][0] == "render.text.shout"


def test_approximate_index_above_the_flat_threshold(index):
    config = dataclasses.replace(Config().embedding, flat_index_max=5)
    embedder = HashingEmbedder()
    cards = sorted(index.cards.values(), key=lambda c: c.symbol_id)
    matrix = embedder.encode([embed_text(c) for c in cards])
    faiss_index, kind = build_faiss(matrix, config)
    assert kind == "hnsw"
    vi = VectorIndex(faiss_index, [c.symbol_id for c in cards], kind)
    for row in (0, 7, len(cards) - 1):
        best, score = vi.search(matrix[row], 1)[0]
        assert best == cards[row].symbol_id and score == pytest.approx(1.0, abs=1e-5)
    flat, kind = build_faiss(matrix, Config().embedding)
    assert kind == "flat"


def test_in_memory_database_keeps_the_faiss_index_in_memory(index):
    mem = connect(":memory:")
    vi, stats = load_or_build_index(mem, "r", list(index.cards.values()), HashingEmbedder(), Config().embedding)
    assert len(vi) == len(index.cards) and stats.embedded == len(index.cards)
    assert mem.execute("SELECT count(*) FROM vector_indexes").fetchone()[0] == 0


def test_embed_text_is_compact(index):
    card = index.cards["render.table.TableRenderer._render_line"]
    text = embed_text(card)
    assert text.startswith("render table table renderer render line (method)")
    assert "Format one row as a padded line." in text
    assert "join" not in text  # the body is not embedded
    assert isinstance(np.float32(0), np.floating)


def test_vector_schema_is_versioned(conn):
    embed_cards([], conn, HashingEmbedder())
    row = conn.execute("SELECT version FROM schema_versions WHERE component = 'vectors'").fetchone()
    assert row[0] == 1
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO card_vectors(card_hash, model, dim, vector) VALUES ('a', 'm', 1, x'00')")
        conn.execute("INSERT INTO card_vectors(card_hash, model, dim, vector) VALUES ('a', 'm', 1, x'00')")


def test_kind_weights_demote_modules_unless_named(index, conn):
    query = "rendering of tables and text"
    # without keyword feedback, which raises the first hits over the hits it lifts
    plain_config = dataclasses.replace(Config(), retrieval=dataclasses.replace(Config().retrieval, prf_keyword_weight=0))
    plain = retriever_for(conn, None, plain_config, None, index=view(index)).retrieve(query, k=20)
    no_weights = dataclasses.replace(plain_config, retrieval=dataclasses.replace(plain_config.retrieval,
                                                                                 kind_weights=()))
    flat = retriever_for(conn, None, no_weights, None, index=view(index)).retrieve(query, k=20)
    score = {h.symbol: h.score for h in plain.hits}
    flat_score = {h.symbol: h.score for h in flat.hits}
    assert "render" in score and score["render"] == pytest.approx(flat_score["render"] * 0.5, rel=1e-6)
    # modules are never name hits (too broad); a named class is not demoted
    r = retriever_for(conn, None, plain_config, None, index=view(index))
    assert r.name_ranking("what is in `render.table`?") == []
    sources = ("keyword", "name")
    weighted = {h.symbol: h.score for h in r.retrieve("TableRenderer", k=5, sources=sources).hits}
    unweighted = {h.symbol: h.score for h in retriever_for(conn, None, no_weights, None, index=view(index))
                  .retrieve("TableRenderer", k=5, sources=sources).hits}
    assert weighted["render.table.TableRenderer"] == pytest.approx(unweighted["render.table.TableRenderer"])


def test_members_of_a_class_named_in_the_query_are_lifted(index, conn):
    r = retriever_for(conn, None, Config(), None, index=view(index))
    rs = r.retrieve("how does TableRenderer turn rows into lines?", k=10)
    by_symbol = {h.symbol: h for h in rs.hits}
    member = by_symbol["render.table.TableRenderer._render_line"]
    assert "member of table.TableRenderer" in member.why and dict(member.components)["scope"] > 0
    assert "named in the query" in by_symbol["render.table.TableRenderer"].why
    assert r.scope_ranking([("net.http.fetch_url", 1.0)], [("net.http.parse_headers", 0.5)]) == []


def test_capitalised_words_count_as_code_but_acronyms_do_not(index, conn):
    r = retriever_for(conn, None, Config(), None, index=view(index))
    assert [s for s, _ in r.name_ranking("the LRUCache keeps keys")] == ["store.cache.LRUCache"]
    assert r.name_ranking("HTTP and CSS and LRU") == []
    assert [s for s, _ in r.name_ranking("see LRUCache.get please")] == ["store.cache.LRUCache.get"]


def test_retrieval_does_not_wait_while_another_thread_embeds_the_cards(index, conn):
    from ctxbench.retrieval.retriever import NOTE_EMBEDDING

    r = retriever_for(conn, None, Config(), HashingEmbedder(), index=view(index))
    with r._vector_lock:  # as held by prepare() in the embedder's thread
        busy = r.retrieve("least recently used cache", k=5)
    assert busy.semantic_available is False and busy.notes == (NOTE_EMBEDDING,) and busy.hits
    done = r.retrieve("least recently used cache", k=5)
    assert done.semantic_available is True and done.notes == ()


def test_a_bare_name_many_symbols_share_is_left_out_of_the_name_component_but_a_dotted_one_counts():
    from ctxbench.retrieval.components import name_ranking
    from ctxbench.retrieval.tables import IndexTables

    inits = tuple(f"pkg.mod{i}.Thing{i}.__init__" for i in range(6))
    tables = IndexTables(version="v", names={"__init__": inits, "compile_init": ("pkg.make.compile_init",)},
                         modules={}, members={}, kinds={}, areas={})
    query = "where is the generated `__init__` built by `compile_init`"
    assert {s for s, _ in name_ranking(tables, query)} == set(inits) | {"pkg.make.compile_init"}
    assert [s for s, _ in name_ranking(tables, query, generic_max=5)] == ["pkg.make.compile_init"]
    assert [s for s, _ in name_ranking(tables, "`Thing3.__init__`", generic_max=5)] == ["pkg.mod3.Thing3.__init__"]
    assert {s for s, _ in name_ranking(tables, query, generic_max=6)} == set(inits) | {"pkg.make.compile_init"}
