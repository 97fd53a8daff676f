"""What warm retrieval keeps between queries (per-file words, regions, rendered windows; the per-token stems; one
word matcher per query) never changes a result: the same excerpts, hits and RetrievalSet ids as computed afresh."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import ctxbench
from ctxbench.config import Config
from ctxbench.retrieval import excerpts
from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.retrieval.excerpts import (SourceLines, WordMatcher, choose_window, line_words, query_excerpt,
                                         query_words, stem)
from ctxbench.retrieval.keyword import query_terms
from ctxbench.retrieval.retriever import SOURCES, Retriever
from ctxbench.service.index_views import retriever_for
from ctxbench.retrieval.vectors import split_identifier
from ctxbench.store.db import connect

from retrieval_fixture import index_repo, view, write_repo

PACKAGE = Path(ctxbench.__file__).parent
QUESTIONS = ("how does pressing tab move focus to the next widget", "render a table row with styles",
             "why is the cache entry evicted when full", "parse the config file and report bad keys")


def test_line_words_are_the_stems_of_the_split_identifiers():
    excerpts._TOKEN_WORDS.clear()
    lines = [ln for path in sorted(PACKAGE.rglob("*.py"))[:40] for ln in path.read_text(encoding="utf-8").splitlines()]
    lines += ["ÄbcDef x_y ÉtéCafé", "HTTPServer a1B2 __init__ 3d", "", "   ", "rendering(renders) -> entries"]
    for line in lines:
        assert line_words(line) == {stem(w) for w in split_identifier(line) if len(w) > 1}, line
    assert excerpts._TOKEN_WORDS  # they were remembered ...
    for line in lines:  # ... and give the same words from memory
        assert line_words(line) == {stem(w) for w in split_identifier(line) if len(w) > 1}, line


def test_shared_matcher_and_file_words_choose_the_windows_computed_afresh():
    source = SourceLines(PACKAGE, ())
    paths = [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py")) if p.stat().st_size > 8000][:12]
    assert len(paths) >= 6
    for question in QUESTIONS:
        words = query_words(query_terms(question))
        shared = WordMatcher(words)
        fresh = WordMatcher(words)
        for rel in paths:
            file = source.file(rel)
            lines = file.lines
            for start in range(1, len(lines) - 80, 37):
                end = start + 79
                # per line, the query words its words stand for: by the definition, then through the shared matcher
                expected = [{m for m in map(fresh, line_words(lines[n - 1])) if m is not None}
                            for n in range(start, end + 1)]
                assert shared.per_line(file.words(start, end)) == expected
                assert choose_window(lines, start, end, words, 30, 3, matcher=shared, file=file) == \
                    choose_window(list(lines), start, end, words, 30, 3)


def test_query_excerpt_from_kept_file_data_equals_a_fresh_read(tmp_path):
    repo = write_repo(tmp_path / "repo")
    conn = connect(tmp_path / "a.db")
    index = view(index_repo(repo, conn))
    kept = SourceLines(repo, ())
    for question in QUESTIONS:
        words = query_words(query_terms(question))
        matcher = WordMatcher(words)
        for card in index.cards.values():
            for width in (2, 5, 40):
                warm = query_excerpt(card, kept, words, width, 1, 240, matcher)
                cold = query_excerpt(card, SourceLines(repo, ()), words, width, 1, 240)
                assert warm == cold
    conn.close()


def _sets(retriever: Retriever) -> list:
    light = tuple(s for s in SOURCES if s != "graph")
    return [retriever.retrieve(q, sources=sources) for q in QUESTIONS for sources in (light, SOURCES)]


def test_warm_retrieval_sets_equal_the_first_ones_and_those_of_a_fresh_retriever(tmp_path):
    repo = write_repo(tmp_path / "repo")
    conn = connect(tmp_path / "b.db")
    index = view(index_repo(repo, conn))
    first = retriever_for(conn, repo, Config(), HashingEmbedder(), index=index)
    cold = _sets(first)
    assert any(h.card_head for s in cold for h in s.hits)  # query-chosen excerpts were made
    assert _sets(first) == cold  # the same retriever, warm
    churn = dataclasses.replace(Config(), retrieval=dataclasses.replace(Config().retrieval, excerpt_files_cached=1))
    assert _sets(retriever_for(conn, repo, churn, HashingEmbedder(), index=index)) == cold  # files read again and again
    assert [s.id for s in _sets(retriever_for(conn, repo, Config(), HashingEmbedder(), index=index))] == [s.id for s in cold]
    conn.close()


def _first_match(words: frozenset[str], word: str) -> str | None:
    """The rule as first written: the word itself, else the first query word (sorted) one of 4+ letters is a prefix of
    (1-3 letters longer), or of 4+ letters inside it."""
    if word in words:
        return word
    for q in sorted(words):
        short, long_ = (q, word) if len(q) <= len(word) else (word, q)
        if len(short) >= 4 and ((long_.startswith(short) and len(long_) - len(short) <= 3)
                                or (short is q and q in word)):
            return q
    return None


def test_word_matcher_follows_the_rule_as_first_written():
    code = sorted({w for path in sorted(PACKAGE.rglob("*.py"))[:60]
                   for ln in path.read_text(encoding="utf-8").splitlines() for w in line_words(ln)})
    assert len(code) > 1500
    queries = [query_words(query_terms(q)) for q in QUESTIONS] + [
        frozenset({"pipe", "clos", "wrap", "soft", "render", "rend", "ren"}), frozenset({"abcd", "abcdefg", "abcdef"}), frozenset({"abcdex", "bcde"}),
        frozenset({"cache", "cach", "caches", "evict"}), frozenset()]
    extra = ["piped", "epipe", "softwrap", "closed", "abcde", "abcdefgh", "rendering", "cachexy", "xcache", "abc"]
    for words in queries:
        matcher = WordMatcher(words)
        for word in code + extra:
            assert matcher(word) == _first_match(words, word), (sorted(words), word)
            assert matcher(word) == _first_match(words, word)  # remembered
