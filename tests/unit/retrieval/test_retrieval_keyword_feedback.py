"""Pseudo-relevance feedback for the keyword component (the first hits lend their most
distinctive id and signature words to a second keyword query, added below the first hits, which keep their
places) and a lower class weight. A tiny indexed repository, no model (keyword, name and graph components)."""
from __future__ import annotations

import pytest

from ctxbench.config import Config
from ctxbench.service.index_views import retriever_for
from ctxbench.retrieval.tables import build_feedback_words
from ctxbench.store.db import connect

from retrieval_fixture import index_repo, view, with_retrieval, write_repo

DIRECT = ("keyword", "name")  # no graph neighbours: only what the components rank
QUESTION = "how is one row formatted as a padded line"


@pytest.fixture
def conn(tmp_path):
    c = connect(tmp_path / "store.db")
    yield c
    c.close()


def _retrievers(conn, index, **changes):
    base = dict(class_scope_weight=0.0, graph_support_weight=0.0, **changes)
    on = retriever_for(conn, None, with_retrieval(prf_keyword_weight=1.0, feedback_hits=1, feedback_terms=4,
                                              feedback_head=1, **base), None, index=index)
    off = retriever_for(conn, None, with_retrieval(prf_keyword_weight=0.0, **base), None, index=index)
    return on, off


def test_the_first_hits_words_find_their_relatives_below_the_head(tmp_path, conn):
    """"row ... padded line" finds TableRenderer._render_line first; its id's words the question does not hold
    (table, renderer) are searched again, so the renderer's other symbols that were found gain a feedback share and
    climb, while the first hit keeps its place and the symbols no feedback word matches keep their scores."""
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    on, off = _retrievers(conn, index)
    before = off.retrieve(QUESTION, k=20, sources=DIRECT).hits
    assert before[0].symbol == "render.table.TableRenderer._render_line"
    feedback = on.feedback_ranking(index, QUESTION, {"keyword": on.keyword_ranking(QUESTION, 50)})
    assert feedback and feedback[0][0].startswith("render.table.TableRenderer")
    terms = build_feedback_words(index).df  # word -> how many cards hold it
    assert {"table", "renderer"} <= set(terms)
    after = on.retrieve(QUESTION, k=20, sources=DIRECT).hits
    assert after[0].symbol == before[0].symbol  # the head keeps its place
    old = {h.symbol: h.score for h in before}
    lifted = [h for h in after if "prf_keyword" in dict(h.components)]
    assert any(h.symbol == "render.table.TableRenderer.render" for h in lifted)
    for hit in lifted:
        assert hit.score > old.get(hit.symbol, 0.0) and "feedback keyword rank" in hit.why
    head = after[0]
    assert head.score >= max(h.score for h in after[1:])  # raised over the lifted hits when they pass it
    if head.score != pytest.approx(old[head.symbol]):
        assert "kept among the first 1" in head.why and "feedback_head" in dict(head.components)
    assert all(h.score == pytest.approx(old[h.symbol]) for h in after[1:] if h not in lifted and h.symbol in old)
    scores = [h.score for h in after]
    assert scores == sorted(scores, reverse=True)  # the planner's order (by score) is the hits' order
    order = [h.symbol for h in after]
    order_before = [h.symbol for h in before]
    # the renderer class climbs over parse_headers (which no feedback word matches)
    assert order_before.index("render.table.TableRenderer") > order_before.index("net.http.parse_headers")
    assert order.index("render.table.TableRenderer") < order.index("net.http.parse_headers")
    # the constructor, which no query word matches, is found by the feedback alone: it does not join (nothing ties
    # it to the question itself)
    assert "render.table.TableRenderer.__init__" not in order


def test_the_feedback_words_leave_out_the_query_words_and_weight_zero_is_off(tmp_path, conn):
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    on, off = _retrievers(conn, index)
    seen: list[tuple[str, ...]] = []
    import ctxbench.retrieval.retriever as module

    real = module.keyword_search_terms

    def spy(conn_, repo, terms, limit, config=None):
        seen.append(tuple(terms))
        return real(conn_, repo, terms, limit, config)

    module.keyword_search_terms = spy
    try:
        on.retrieve(QUESTION, k=20, sources=DIRECT)
    finally:
        module.keyword_search_terms = real
    assert len(seen) == 1 and 0 < len(seen[0]) <= 4
    assert not {"row", "line", "pad", "padded", "formatted", "format"} & set(seen[0])
    assert "renderer" in seen[0]
    assert all("prf_keyword" not in dict(h.components) for h in off.retrieve(QUESTION, k=20, sources=DIRECT).hits)


def test_the_head_keeps_the_order_it_had_without_feedback(tmp_path, conn):
    """With a head of three, the first three hits are those (and in the order) retrieval gives without feedback."""
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    head = retriever_for(conn, None, with_retrieval(prf_keyword_weight=5.0, feedback_head=3, class_scope_weight=0.0),
                     None, index=index)
    off = retriever_for(conn, None, with_retrieval(prf_keyword_weight=0.0, class_scope_weight=0.0), None, index=index)
    for question in (QUESTION, "least recently used cache evicting the oldest entry", "split raw headers"):
        assert [h.symbol for h in head.retrieve(question, k=20).hits[:3]] == \
            [h.symbol for h in off.retrieve(question, k=20).hits[:3]]


def test_a_class_weighs_less_than_its_members_by_default(tmp_path, conn):
    """The default class weight (0.6) scales a class hit's fused score: against 0.8, by 0.75."""
    assert dict(Config().retrieval.kind_weights)["class"] == 0.6
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    question = "least recently used cache"
    plain = dict(prf_keyword_weight=0.0, class_scope_weight=0.0, graph_support_weight=0.0)  # nothing added after
    low = retriever_for(conn, None, with_retrieval(**plain), None, index=index)
    high = retriever_for(conn, None, with_retrieval(**plain,
                                                kind_weights=(("module", 0.5), ("class", 0.8), ("nested", 0.5))),
                     None, index=index)
    a = {h.symbol: h.score for h in low.retrieve(question, k=20, sources=DIRECT).hits}
    b = {h.symbol: h.score for h in high.retrieve(question, k=20, sources=DIRECT).hits}
    assert a["store.cache.LRUCache"] == pytest.approx(b["store.cache.LRUCache"] * 0.75)
    assert a["store.cache.LRUCache.get"] == pytest.approx(b["store.cache.LRUCache.get"])
