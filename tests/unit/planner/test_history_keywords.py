"""The fused strategy's keyword scores: FTS5's words, BM25 over the planned history's own statistics, kept up
incrementally; another branch or session never changes them."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ctxbench.records.messages import Message, ToolCall
from ctxbench.retrieval.history_keywords import HistoryKeywords, query_words
from ctxbench.retrieval.stemming import porter, tokens
from ctxbench.store.message_search import message_text
from ctxbench.store.search import fts_query

ROOT = Path(__file__).resolve().parents[3]
K1, B = 1.2, 0.75


def _fts5_terms(texts: list[str]) -> list[list[str]]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5 (c, tokenize = 'porter unicode61')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')")
    conn.executemany("INSERT INTO t (rowid, c) VALUES (?, ?)", list(enumerate(texts, 1)))
    out: list[list[str]] = [[] for _ in texts]
    for term, doc in conn.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        out[doc - 1].append(term)
    return out


def _corpus() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "ctxbench").rglob("*.py"))]
    texts += [p.read_text(encoding="utf-8") for p in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))]
    for line in (ROOT / "fixtures" / "sessions" / "long_session.jsonl").read_text(encoding="utf-8").splitlines():
        texts.append(str(json.loads(line).get("content") or ""))
    texts += [
        "Café naïve résumé FAÇADE Ångström Straße İstanbul ØRESUND ﬁle 東京タワー 한국어 Ελληνικά e\u0301tude 🧘‍♀️",
        "foo_bar don't 3.14 x² snake_case CamelCase agreed feed bled sses ies eed aed generalizations",
    ]
    # every code point up to 0x30000, a few hundred to a text: letters, marks, symbols, unassigned ones
    texts += ["".join(chr(c) for c in range(i, i + 400) if not 0xD800 <= c <= 0xDFFF) for i in range(128, 0x30000, 400)]
    return texts


def test_the_words_are_exactly_those_of_sqlites_porter_unicode61_tokenizer():
    texts = _corpus()
    expected = _fts5_terms(texts)
    assert sum(map(len, expected)) > 100_000
    mismatched = [i for i, text in enumerate(texts) if tokens(text) != expected[i]]
    assert mismatched == []


@pytest.mark.parametrize("word, stem", [("painting", "paint"), ("generalizations", "gener"), ("ponies", "poni"),
                                        ("caresses", "caress"), ("hopping", "hop"), ("filing", "file"),
                                        ("relational", "relat"), ("agreed", "agre"), ("sky", "sky")])
def test_the_porter_stemmer_folds_word_forms(word, stem):
    assert porter(word) == stem


def _message(mid: int, content: str, *, group: int | None = None, status: str = "active", branch: str = "main",
             **kw) -> Message:
    return Message(id=mid, session_id="s", branch_id=branch, group_id=group if group is not None else mid, role="user",
                   content=content, status=status, **kw)


_TEXTS = [
    "the ledger parser fails on negative amounts", "please explain the invoice schema",
    "parsing ledgers: the parser reads every ledger line twice", "retry the migration with a longer timeout",
    "the cache of the ledger balances is stale after a migration", "render the widget theme again",
    "nothing to see here", "the parser and the tokenizer share a ledger of tokens; the parser parses",
]


def _fts5_bm25(texts: list[str], query: str) -> dict[int, float]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5 (c, tokenize = 'porter unicode61')")
    conn.executemany("INSERT INTO t (rowid, c) VALUES (?, ?)", list(enumerate(texts, 1)))
    rows = conn.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH ?", (fts_query(query),))
    return {int(r[0]): -float(r[1]) for r in rows}


def test_scores_are_fts5s_bm25_over_a_table_holding_exactly_the_history():
    history = tuple(_message(i, t) for i, t in enumerate(_TEXTS, 1))
    query = "why does the ledger parser fail after the migration?"
    ours = dict(HistoryKeywords().message_scores(history, query, 100, k1=K1, b=B))
    theirs = _fts5_bm25(_TEXTS, query)
    assert set(ours) == set(theirs) and len(ours) >= 4
    for mid, score in theirs.items():
        assert ours[mid] == pytest.approx(score, rel=1e-5, abs=1e-6)


def test_other_branches_and_sessions_do_not_change_a_historys_scores():
    parent = tuple(_message(i, t) for i, t in enumerate(_TEXTS, 1))
    query = "ledger parser migration"
    alone = HistoryKeywords().message_scores(parent, query, 100, k1=K1, b=B)
    shared = HistoryKeywords()
    before = shared.message_scores(parent, query, 100, k1=K1, b=B)
    child = parent + tuple(_message(100 + i, "the ledger parser ledger parser ledger again", branch="child")
                           for i in range(20))
    on_child = shared.message_scores(child, query, 100, k1=K1, b=B)
    after = shared.message_scores(parent, query, 100, k1=K1, b=B)
    assert before == alone == after
    assert on_child != before and {mid for mid, _s in on_child} > {mid for mid, _s in before}  # its own statistics


def test_the_index_grows_with_the_history_and_follows_edits_and_drops():
    index = HistoryKeywords()
    history: tuple[Message, ...] = ()
    for i, text in enumerate(_TEXTS, 1):
        history += (_message(i, text),)
        grown = index.message_scores(history, "ledger parser timeout", 100, k1=K1, b=B)
        assert grown == HistoryKeywords().message_scores(history, "ledger parser timeout", 100, k1=K1, b=B)
    edited = tuple(_message(m.id, "an unrelated reply about the weather") if m.id == 1 else m for m in history)
    scores = dict(index.message_scores(edited, "ledger parser", 100, k1=K1, b=B))
    assert 1 not in scores and scores == dict(HistoryKeywords().message_scores(edited, "ledger parser", 100, k1=K1, b=B))
    assert dict(index.message_scores(edited, "weather", 100, k1=K1, b=B)).keys() == {1}
    dropped = tuple(_message(m.id, m.content, status="dropped") if m.id == 3 else m for m in history)
    assert 3 not in dict(index.message_scores(dropped, "ledger parser", 100, k1=K1, b=B))
    assert dict(index.message_scores(dropped, "ledger", 100, k1=K1, b=B)) == _without(dropped, "ledger", 3)


def _without(history: tuple[Message, ...], query: str, mid: int) -> dict[int, float]:
    """What a fresh index gives for the history without message ``mid`` at all."""
    return dict(HistoryKeywords().message_scores(tuple(m for m in history if m.id != mid), query, 100, k1=K1, b=B))


def test_tool_calls_and_results_are_searched_by_their_names_and_arguments():
    call = Message(id=2, session_id="s", branch_id="main", group_id=1, role="assistant", content="",
                   tool_calls=(ToolCall("c1", "read_file", '{"path": "src/ledger.py"}'),))
    result = Message(id=3, session_id="s", branch_id="main", group_id=1, role="tool", content="def parse(): ...",
                     tool_call_id="c1", tool_name="read_file")
    history = (_message(1, "look at the code", group=1), call, result)
    assert "ledger" in tokens(message_text(call))
    scores = dict(HistoryKeywords().message_scores(history, "what is in ledger.py", 10, k1=K1, b=B))
    assert set(scores) == {2}


def test_the_query_loses_its_stop_words_and_the_limit_keeps_the_best():
    assert query_words("please continue with the ledgers", stemmed=True) == ["ledger"]
    assert query_words("please continue with the ledgers", stemmed=False) == ["ledgers"]
    history = tuple(_message(i, "ledger " * (1 + i % 3) + "x " * i) for i in range(1, 60))
    top = HistoryKeywords().message_scores(history, "ledger", 5, k1=K1, b=B)
    every = HistoryKeywords().message_scores(history, "ledger", 100, k1=K1, b=B)
    assert len(top) == 5 and top == every[:5]
    assert [s for _m, s in every] == sorted((s for _m, s in every), reverse=True)


def test_turns_rank_as_fts5_ranks_a_table_of_exactly_their_active_text_on_exact_words():
    texts = {1: ["the amounts are wrong", "the ledger shows negative amounts"], 2: ["an amount is missing"],
             3: ["retry the migration", "the ledger migration timed out"], 4: ["nothing about it"],
             5: ["amounts again and again: amounts", "dropped words about amounts"]}
    history, mid = [], 0
    for gid, parts in texts.items():
        for i, text in enumerate(parts):
            mid += 1
            history.append(_message(mid, text, group=gid, status="dropped" if (gid, i) == (5, 1) else "active"))
    history = tuple(history)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE g USING fts5 (c, tokenize = 'unicode61')")
    conn.executemany("INSERT INTO g (rowid, c) VALUES (?, ?)",
                     [(gid, "\n".join(m.content for m in history if m.group_id == gid and m.status == "active"))
                      for gid in texts])
    for query in ("amounts", "ledger migration", "what about the amount of the ledger?"):
        expected = tuple(int(r[0]) for r in conn.execute(
            "SELECT rowid FROM g WHERE g MATCH ? ORDER BY bm25(g), rowid", (fts_query(query),)))
        assert HistoryKeywords().group_ranking(history, query, 100, k1=K1, b=B) == expected
    assert HistoryKeywords().group_ranking(history, "amounts", 100, k1=K1, b=B) == (5, 1)  # not "amount": exact words
    assert HistoryKeywords().group_ranking(history, "amounts", 1, k1=K1, b=B) == (5,)
