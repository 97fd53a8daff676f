"""Graph support from the first hits, quoted phrases looked up in the code, wider
excerpts for the best hits. A tiny indexed repository, no model (keyword, name and graph components)."""
from __future__ import annotations

import textwrap

import pytest

from ctxbench.codegraph.graph import neighbours
from ctxbench.config import Config
from ctxbench.retrieval.phrases import phrase_grams, quoted_phrases
from ctxbench.service.index_views import retriever_for
from ctxbench.store.db import connect

from retrieval_fixture import index_repo, view, with_retrieval, write_repo

STOP = Config().retrieval.keyword_stopwords


@pytest.fixture
def conn(tmp_path):
    c = connect(tmp_path / "store.db")
    yield c
    c.close()


def long_module() -> str:
    """A module with a long function whose error message sits far below its head, a decoy that talks about
    the same things, and a nested helper holding a message of its own."""
    filler = "\n".join(f"    step_{i} = values[{i}] if len(values) > {i} else None" for i in range(40))
    return textwrap.dedent('''\
        """Loading of settings files."""


        def load_settings(values, strict=False):
            """Read settings from a list of values."""
        ''') + filler + textwrap.dedent('''
            if strict and step_0 is None:
                raise ValueError("duplicated mapping key in settings " + repr(values))
            return [step_0, step_1]


        def describe_settings(values):
            """Explain which settings keys are duplicated or missing in a mapping."""
            return "settings mapping key duplicated or missing: %r" % (values,)


        def outer(values):
            """Run a check."""

            def check(value):
                if value is None:
                    raise KeyError("value may not be empty here")
                return value

            return [check(v) for v in values]
        ''')


@pytest.fixture
def long_repo(tmp_path, conn):
    root = write_repo(tmp_path / "repo")
    (root / "settings").mkdir()
    (root / "settings" / "__init__.py").write_text("", encoding="utf-8")
    (root / "settings" / "loader.py").write_text(long_module(), encoding="utf-8")
    return index_repo(root, conn)


def test_quoted_phrases_are_runs_of_two_words_or_more_in_any_quotes():
    q = ("I get 'duplicated mapping key' and then \"Cannot send a request\"; `LRUCache.set` and 'x' are not "
         "messages, nor is don't; “typographic quotes” count")
    assert quoted_phrases(q) == [("duplicated", "mapping", "key"), ("cannot", "send", "a", "request"),
                                 ("typographic", "quotes")]
    assert quoted_phrases("nothing quoted here, isn't it") == []
    # a long phrase is looked for by its runs of three words, never by runs of stop words alone
    grams = phrase_grams(("it", "is", "a", "closed", "client"), stopwords=STOP)
    assert grams == ["is a closed", "a closed client"]
    assert phrase_grams(("missing", "option"), stopwords=STOP) == ["missing option"]


def test_a_quoted_message_finds_the_function_whose_body_holds_it(long_repo, conn):
    """The message is 40 lines into load_settings, past its card and its keyword text: only the phrase
    component reaches it, and it ranks first with the reason in words; off (weight 0) it adds nothing."""
    question = "Loading fails with 'duplicated mapping key in settings'. Where is that raised?"
    on = retriever_for(conn, None, with_retrieval(phrase_weight=1.0), None, index=view(long_repo))
    rs = on.retrieve(question, k=10)
    first = rs.hits[0]
    assert first.symbol == "settings.loader.load_settings"
    # the phrase's three runs of three words ("duplicated mapping key", "mapping key in", "key in settings")
    assert dict(first.components)["phrase"] == 3.0 and "holds the quoted text" in first.why
    assert on.phrase_ranking(question, 10) == [("settings.loader.load_settings", 3.0)]
    off = retriever_for(conn, None, with_retrieval(phrase_weight=0.0), None, index=view(long_repo))
    assert all("phrase" not in dict(h.components) for h in off.retrieve(question, k=10).hits)
    # the innermost symbol around the line gets the match: the nested helper, not the function around it
    assert on.phrase_ranking("why 'may not be empty'?", 10) == [("settings.loader.outer.check", 2.0)]
    assert on.phrase_ranking("no quotes at all", 10) == []


def test_graph_support_moves_linked_direct_hits_and_adds_none(tmp_path, conn):
    """Without graph neighbours (Light), a direct hit linked in the code graph to one of the strongest hits
    gains support, says so, and climbs; no symbol joins the set that the direct components did not find."""
    index = index_repo(write_repo(tmp_path / "repo"), conn)
    question = "render every row of the table as padded text lines"
    light = ("keyword", "name")
    # keyword feedback off: it raises the first hits over the hits it lifts, which would blur the scores compared here
    plain = retriever_for(conn, None, with_retrieval(graph_support_weight=0.0, prf_keyword_weight=0.0), None,
                      index=view(index))
    helped = retriever_for(conn, None, with_retrieval(graph_support_weight=1.0, graph_support_seeds=2,
                                                  prf_keyword_weight=0.0), None, index=view(index))
    before = plain.retrieve(question, k=20, sources=light)
    after = helped.retrieve(question, k=20, sources=light)
    assert {h.symbol for h in after.hits} == {h.symbol for h in before.hits}
    assert all(h.provenance != "graph" for h in after.hits)
    seeds = [h.symbol for h in before.hits[:2]]
    linked = {nb.symbol for s in seeds for nb in neighbours(index.graph, s)}
    supported = [h for h in after.hits if "support" in dict(h.components)]
    assert supported and all(h.symbol in linked for h in supported)
    old = {h.symbol: h.score for h in before.hits}
    for hit in supported:
        assert hit.score > old[hit.symbol] and "supported: " in hit.why
    unsupported = [h for h in after.hits if "support" not in dict(h.components)]
    assert all(h.score == pytest.approx(old[h.symbol]) for h in unsupported)
    # with graph neighbours (Heavy) support stays off unless graph_support_heavy says otherwise
    heavy = helped.retrieve(question, k=20)
    assert all("support" not in dict(h.components) for h in heavy.hits)


def test_the_best_hits_get_the_wider_excerpt(long_repo, conn):
    """excerpt_top_lines widens the query-chosen excerpt of the excerpt_top_hits best hits only."""
    question = "which step values does load_settings read from the list of values"
    # no whole-body slack: the body (43 lines) would be sent whole, and this is about the widths
    config = with_retrieval(excerpt_lines=12, excerpt_top_lines=30, excerpt_top_hits=1, excerpt_whole_slack=0)
    rs = retriever_for(conn, None, config, None, index=view(long_repo)).retrieve(question, k=10)
    first = rs.hits[0]
    assert first.symbol == "settings.loader.load_settings"
    start, end = first.excerpt_lines
    assert end - start + 1 == 30
    narrow = retriever_for(conn, None, with_retrieval(excerpt_lines=12, excerpt_top_lines=0, excerpt_whole_slack=0), None,
                       index=view(long_repo)).retrieve(question, k=10)
    start, end = narrow.hits[0].excerpt_lines
    assert end - start + 1 == 12
    for hit in rs.hits[1:]:
        if hit.card_head:  # an excerpt chosen by the query (a module keeps its stored head)
            assert hit.excerpt_lines[1] - hit.excerpt_lines[0] + 1 <= 12
    # with a whole-body slack of 16 lines the 43-line body is within reach of the 30-line window: sent whole
    whole = retriever_for(conn, None, with_retrieval(excerpt_lines=12, excerpt_top_lines=30, excerpt_top_hits=1,
                                                 excerpt_whole_slack=16), None, index=view(long_repo))
    start, end = whole.retrieve(question, k=10).hits[0].excerpt_lines
    assert end - start + 1 == 43 and "duplicated mapping key" in whole.retrieve(question, k=10).hits[0].excerpt
