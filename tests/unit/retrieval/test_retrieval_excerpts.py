"""Heavy excerpts chosen by the query: body only, the best-matching window, real line numbers; areas."""
from __future__ import annotations

import textwrap

from ctxbench.config import Config
from ctxbench.records.code import SymbolCard
from ctxbench.retrieval.areas import GENERATED, PLATFORM, TEST, VENDORED, area_of, asks_for
from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.retrieval.excerpts import (SourceLines, body_region, choose_window, query_excerpt, query_words,
                                         render_excerpt, stem)
from ctxbench.service.index_views import retriever_for
from ctxbench.store.db import connect

from retrieval_fixture import index_repo, view, write_repo

LONG = textwrap.dedent('''
    def main(args=None, standalone=True):
        """Run the program.

        A long docstring that the card already shows.
        """
        if args is None:
            args = read_args()
    ''') + "".join(f"    step_{n}(args)\n" for n in range(40)) + textwrap.dedent('''\
        try:
            run(args)
        except OSError as e:
            if e.errno == errno.EPIPE:
                sys.stdout = FlushWrapper(sys.stdout)
                sys.exit(1)
            raise
    ''').replace("\n", "\n    ").rstrip() + "\n"


def _card(path: str, lines: list[str], language: str = "python") -> SymbolCard:
    return SymbolCard("m.main", "function", "m", path, 2, len(lines), "def main(args=None, standalone=True):",
                      "Run the program.", "", language=language)


def test_stem_and_query_words():
    assert stem("piped") == stem("pipes") == "pip" and stem("rendering") == "render" and stem("entries") == "entry"
    assert query_words(["closed", "pipe", "x"]) == frozenset({"clos", "pipe"})


def test_body_region_skips_signature_and_docstring():
    lines = LONG.splitlines()
    start, end = body_region(lines, 2, len(lines), "python")
    assert lines[start - 1].strip() == "if args is None:" and end == len(lines)
    js = ["function send(body) {", "  const a = 1;", "  return a;", "}"]
    assert body_region(js, 1, 4, "javascript") == (2, 4)
    one = ["def f(): return 1"]
    assert body_region(one, 1, 1, "python") == (1, 1)


def test_the_window_that_matches_the_question_wins_over_the_head(tmp_path):
    (tmp_path / "m.py").write_text(LONG, encoding="utf-8")
    lines = LONG.splitlines()
    card = _card("m.py", lines)
    words = query_words(["broken", "pipe", "closed", "exit", "output"])
    got = query_excerpt(card, SourceLines(tmp_path, ()), words, 30, 3, 240)
    epipe = next(n for n, t in enumerate(lines, 1) if "EPIPE" in t)
    assert got is not None and got.first <= epipe <= got.last and got.last - got.first + 1 <= 30
    assert '"""' not in got.text and "def main" not in got.text  # the card shows them already
    first_line = got.text.splitlines()[0]
    assert first_line.split()[0] == str(got.first)  # real file line numbers
    assert f"{epipe}" in got.text and "errno.EPIPE" in got.text
    # a question with no word in the body gets the head of the body, not the signature
    head = query_excerpt(card, SourceLines(tmp_path, ()), query_words(["zebra"]), 30, 3, 240)
    assert lines[head.first - 1].strip() == "if args is None:"


def test_choose_window_prefers_rare_words_and_keeps_context():
    lines = ["common"] * 100
    lines[70] = "common rare"
    first, last = choose_window(lines, 1, 100, frozenset({"common", "rare"}), 10, context=3)
    assert first == 68 and last == 77  # three lines above the match


# A body whose matching lines sit inside a nested block: the window that starts 3 lines above the first match
# starts inside the block and leaves out the line that opens it (the ``except`` the answer hangs on).
NESTED = ["def run(fn):"] + [f"    step_{n}()" for n in range(20)] + [
    "    try:",
    "        coro = fn()",
    "    except TypeError:",          # 24: the statement that answers starts here
    "        if is_coroutine(fn):",
    "            fn.close()",
    "            note = 1",
    "            raise TypeError(",
    "                'expecting an async function but got a coroutine')",  # 29: the strong match
] + [f"    tail_{n}()" for n in range(30)]


def test_statement_start_moves_a_window_up_to_the_line_opening_its_block():
    lines = NESTED
    words = query_words(["expecting", "async", "function", "coroutine"])
    end = len(lines)
    first, last = choose_window(lines, 2, end, words, 12, context=1)
    assert (first, last) == (28, 39)  # one line above the message: inside ``if is_coroutine(fn):``
    first, last = choose_window(lines, 2, end, words, 12, context=1, statement_lines=12)
    assert lines[first - 1].strip() == "except TypeError:" and (first, last) == (24, 35)
    # not further than statement_lines up, and never so far that the last strong match falls out
    assert choose_window(lines, 2, end, words, 12, context=1, statement_lines=2) == (28, 39)
    assert choose_window(lines, 2, end, words, 4, context=1, statement_lines=12)[1] >= 29
    # a window that already starts on a body-level line does not move
    assert choose_window(lines, 2, end, query_words(["tail"]), 12, statement_lines=12) == \
        choose_window(lines, 2, end, query_words(["tail"]), 12)


def test_whole_slack_sends_a_body_just_over_the_width_whole():
    lines = ["def f():"] + [f"    a_{n} = {n}" for n in range(44)] + ["    return tail_value"]
    words = query_words(["tail", "value"])
    assert choose_window(lines, 2, 46, words, 40) == (7, 46)  # 45 lines: the window cuts the head
    assert choose_window(lines, 2, 46, words, 40, slack=6) == (2, 46)  # within 6 lines of the width: whole
    assert choose_window(lines, 2, 46, words, 40, slack=4) == (7, 46)
    # no query words: the head of the body, as before
    assert choose_window(lines, 2, 46, frozenset(), 40, slack=6) == (2, 41)


def test_occurrence_share_lets_many_matching_lines_outweigh_one_rare_word():
    lines = ["x = 0"] * 100
    lines[20], lines[22] = "alpha()", "beta()"  # two distinct words, once each (beta is rare)
    for n in range(70, 80):
        lines[n] = "alpha(n)"  # one word on ten lines
    words = frozenset({"alpha", "beta"})
    first, last = choose_window(lines, 1, 100, words, 10, context=0)
    assert first <= 21 and 23 <= last  # by distinct words: the rare one decides
    first, last = choose_window(lines, 1, 100, words, 10, context=0, occurrence=0.5)
    assert (first, last) == (71, 80)  # each matching line counts half its weight: the dense run wins


def test_blank_lines_left_out_of_the_rendered_excerpt_keep_their_numbers():
    lines = ["def f():", "    a = 1", "", "    b = 2", "   ", "    return a + b"]
    assert render_excerpt(lines, 2, 6, 240) == "2  a = 1\n3\n4  b = 2\n5\n6  return a + b"
    assert render_excerpt(lines, 2, 6, 240, blank=False) == "2  a = 1\n4  b = 2\n6  return a + b"


def test_source_lines_mask_secrets_and_refuse_secret_files(tmp_path):
    (tmp_path / "a.py").write_text('API_KEY = "sk-abcdefghijklmnopqrstuvwxyz123456"\n', encoding="utf-8")
    (tmp_path / ".env").write_text("TOKEN=x\n", encoding="utf-8")
    source = SourceLines(tmp_path, Config().index.secret_file_globs)
    assert "sk-abcdef" not in source.lines("a.py")[0]
    assert source.lines(".env") is None and source.lines("missing.py") is None


def test_heavy_cards_carry_the_query_excerpt_and_no_repeated_head(tmp_path):
    from ctxbench.planner.render import card_text

    repo = write_repo(tmp_path / "repo")
    conn = connect(tmp_path / "b.db")
    retriever = retriever_for(conn, repo, Config(), HashingEmbedder(), index=view(index_repo(repo, conn)))
    hit = next(h for h in retriever.retrieve("evict the oldest cache entry when full").hits
               if h.symbol == "store.cache.LRUCache.set")
    assert hit.excerpt_lines[0] > hit.line  # the body, after the signature and docstring
    heavy = card_text(hit, True)
    assert heavy.count("def set(") == 1 and heavy.count("Store a value") == 1
    assert "self.data.pop" in heavy
    assert card_text(hit, False) == hit.card_text  # Light keeps the thin card
    off = retriever_for(conn, repo, Config().__class__(retrieval=Config().retrieval.__class__(query_excerpts=False)),
                    HashingEmbedder(), index=view(index_repo(repo, conn)))
    plain = next(h for h in off.retrieve("evict the oldest cache entry when full").hits
                 if h.symbol == "store.cache.LRUCache.set")
    assert plain.card_head == "" and plain.excerpt_lines[0] == plain.line  # the stored head, as before
    conn.close()


def test_areas_from_paths():
    assert area_of("pkg/tests/test_core.py") == TEST and area_of("trio/_core/_tests/test_run.py") == TEST
    assert area_of("src/app.test.js") == TEST and area_of("conftest.py") == TEST
    assert area_of("click/testing.py") == ""  # test helpers are a feature
    assert area_of("rich/_win32_console.py") == PLATFORM and area_of("trio/_core/_io_windows.py") == PLATFORM
    assert area_of("click/_winconsole.py") == PLATFORM
    assert area_of("trio/_core/_generated_run.py") == GENERATED and area_of("api/msg_pb2.py") == GENERATED
    assert area_of("pip/_vendor/rich/console.py") == VENDORED
    assert area_of("rich/console.py") == "" and area_of("window.py") == ""
    assert asks_for(["why", "does", "the", "test", "fail", "on", "windows"]) == {TEST, PLATFORM}
    assert asks_for(["render", "a", "table"]) == frozenset()


def test_test_code_is_demoted_unless_the_question_asks_for_it(tmp_path):
    repo = write_repo(tmp_path / "repo")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_cache.py").write_text(
        'def test_evict_oldest_cache_entry_when_full():\n    """Evict the oldest cache entry when full."""\n',
        encoding="utf-8")
    conn = connect(tmp_path / "b.db")
    index = view(index_repo(repo, conn))
    test_id = "tests.test_cache.test_evict_oldest_cache_entry_when_full"

    def rank(config, query):
        hits = [h.symbol for h in retriever_for(conn, repo, config, HashingEmbedder(), index=index).retrieve(query).hits]
        return hits.index(test_id)

    plain = Config().__class__(retrieval=Config().retrieval.__class__(area_weights=()))
    query = "evict the oldest cache entry when full"
    assert rank(Config(), query) > rank(plain, query)
    asked = "which test covers evicting the oldest cache entry when full"
    assert rank(Config(), asked) == rank(plain, asked)
    conn.close()
