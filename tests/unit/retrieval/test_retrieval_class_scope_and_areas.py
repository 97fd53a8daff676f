"""The class a question is about lifts its members (generic method names whose class
is the clue), and demoted areas (tests, platform shims...) stop taking the semantic / keyword ranks of the code
a question is about. A tiny indexed repository, no model (keyword, name and graph components)."""
from __future__ import annotations

import pytest

from ctxbench.service.index_views import retriever_for
from ctxbench.store.db import connect

from retrieval_fixture import index_repo, view, with_retrieval, write_repo

DIRECT = ("keyword", "name")  # no graph neighbours: only what the components rank


@pytest.fixture
def conn(tmp_path):
    c = connect(tmp_path / "store.db")
    yield c
    c.close()


def test_the_members_of_a_class_the_query_is_about_gain_in_the_order_found(tmp_path, conn):
    """The question describes LRUCache by its doc's words without naming it: the class ranks among the keyword
    component's first hits, so its methods the components found form the class-scope component, in their order,
    and climb; other symbols do not join it. Weight 0 turns it off."""
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    question = "how does the least recently used cache with a maximum size store a value"
    on = retriever_for(conn, None, with_retrieval(class_scope_weight=1.0, class_scope_top=3, graph_support_weight=0.0),
                   None, index=index)
    off = retriever_for(conn, None, with_retrieval(class_scope_weight=0.0, graph_support_weight=0.0), None, index=index)
    keyword = on.keyword_ranking(question, 50)
    assert "store.cache.LRUCache" in [sid for sid, _ in keyword[:3]]
    members = on.class_member_ranking(None, keyword)
    assert members and all(sid.startswith("store.cache.LRUCache.") for sid, _ in members)
    found_order = [sid for sid, _ in keyword if sid.startswith("store.cache.LRUCache.")]
    assert [sid for sid, _ in members] == found_order
    after = on.retrieve(question, k=20, sources=DIRECT)
    before = {h.symbol: h.score for h in off.retrieve(question, k=20, sources=DIRECT).hits}
    lifted = [h for h in after.hits if "class_scope" in dict(h.components)]
    assert {h.symbol for h in lifted} == set(found_order)
    for hit in lifted:
        assert hit.score > before[hit.symbol] and "a class the query is about" in hit.why
    assert all(h.score == pytest.approx(before[h.symbol]) for h in after.hits if h not in lifted)
    assert all("class_scope" not in dict(h.components) for h in off.retrieve(question, k=20, sources=DIRECT).hits)
    # no class among the first hits: nothing to scope
    assert on.class_member_ranking(None, [("render.text.pad", 1.0), ("render.text._blank", 0.5)]) == []


def test_a_class_members_not_found_are_ranked_by_their_similarity(tmp_path, conn):
    """With semantic search, the class's other members join after the found ones, by their cosine."""
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    r = retriever_for(conn, None, with_retrieval(class_scope_weight=1.0, class_scope_top=3), None, index=index)
    cosine = {"store.cache.LRUCache.__init__": 0.2, "store.cache.LRUCache.get": 0.6, "store.cache.LRUCache.set": 0.4}
    ranking = r.class_member_ranking(lambda sid: cosine.get(sid, 0.0),
                                     [("store.cache.LRUCache", 3.0), ("store.cache.LRUCache.set", 2.0)])
    assert [sid for sid, _ in ranking] == ["store.cache.LRUCache.set", "store.cache.LRUCache.get",
                                           "store.cache.LRUCache.__init__"]


def test_demoted_areas_go_last_in_the_component_rankings(tmp_path, conn):
    """A test that matches the words best no longer takes the keyword component's first rank from the code it
    tests (unless the question asks about tests); it stays in the ranking, after the others."""
    repo = write_repo(tmp_path / "repo")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_cache.py").write_text(
        'def test_evict_oldest_cache_entry_when_full():\n    """Evict the oldest cache entry when full."""\n',
        encoding="utf-8")
    index = view(index_repo(repo, conn))
    test_id = "tests.test_cache.test_evict_oldest_cache_entry_when_full"
    code_id = "store.cache.LRUCache.set"
    # keyword feedback off: it raises the first hits over the hits it lifts, moving the scores compared here
    plain = retriever_for(conn, None, with_retrieval(areas_last_in_components=False, class_scope_weight=0.0,
                                                 graph_support_weight=0.0, prf_keyword_weight=0.0), None, index=index)
    last = retriever_for(conn, None, with_retrieval(areas_last_in_components=True, class_scope_weight=0.0,
                                                graph_support_weight=0.0, prf_keyword_weight=0.0), None, index=index)
    query = "evict the oldest cache entry when full"
    keyword = plain.keyword_ranking(query, 50)
    assert keyword[0][0] == test_id  # the test's name holds every word
    moved = last.tables(index).areas_last(keyword, frozenset(), last.retrieval)
    assert sorted(moved) == sorted(keyword)
    in_tests = [sid.startswith("tests.") for sid, _ in moved]
    assert in_tests == sorted(in_tests) and moved[in_tests.index(True)][0] == test_id  # tests last, in order
    before = {h.symbol: h.score for h in plain.retrieve(query, k=20, sources=DIRECT).hits}
    after = {h.symbol: h.score for h in last.retrieve(query, k=20, sources=DIRECT).hits}
    assert after[code_id] > before[code_id] and after[test_id] < before[test_id]
    asked = "which test covers evicting the oldest cache entry when full"
    assert [h.symbol for h in last.retrieve(asked, k=20, sources=DIRECT).hits] == \
        [h.symbol for h in plain.retrieve(asked, k=20, sources=DIRECT).hits]


def test_a_class_named_in_the_query_is_left_to_the_scope_component(tmp_path, conn):
    """"LRUCache" names the class: its members come from the scope component once, not from class scope too."""
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    r = retriever_for(conn, None, with_retrieval(class_scope_weight=1.0, class_scope_top=3), None, index=index)
    hits = r.retrieve("LRUCache", k=20, sources=DIRECT).hits
    assert hits[0].symbol == "store.cache.LRUCache"
    assert any("scope" in dict(h.components) for h in hits)
    assert all("class_scope" not in dict(h.components) for h in hits)
