"""The keyword search asks FTS5 for a repository's block of rowids instead of filtering the repo column: always the
answers of the plain filter, whatever was rewritten since (another repository, the same one, rows out of order)."""
from __future__ import annotations

import sqlite3

from ctxbench.store import code_search
from ctxbench.store.db import connect

WEIGHTS = (4.0, 2.0, 1.0, 1.0, 0.5, 2.0)
WORDS = ("render table row", "cache evict entry", "focus next widget", "parse color", "nothing here at all")


def _rows(prefix: str, n: int, extra: str = "") -> list[tuple[str, ...]]:
    vocab = ["render", "table", "row", "cache", "evict", "entry", "focus", "next", "widget", "parse", "color"]
    return [(f"{prefix}.s{i}", vocab[i % 11], f"{vocab[i % 11]} {vocab[(i * 3) % 11]}", f"def s{i}()",
             f"{vocab[(i * 5) % 11]} {extra}", f"{prefix}/m{i % 4}.py", " ".join(vocab[: i % 7])) for i in range(n)]


def _plain(conn: sqlite3.Connection, repo: str, words: str) -> list[tuple[str, float]]:
    match = " OR ".join(f'"{w}"' for w in words.split())
    columns = ", ".join(str(float(x)) for x in (0.0, 0.0, *WEIGHTS))
    rows = conn.execute(f"SELECT symbol_id, bm25(code_fts, {columns}) AS rank FROM code_fts "
                        "WHERE code_fts MATCH ? AND repo = ? ORDER BY rank LIMIT 7", (match, repo)).fetchall()
    return [(r[0], -float(r[1])) for r in rows]


def _same(conn: sqlite3.Connection, *repos: str) -> None:
    for repo in repos:
        for words in WORDS:
            match = " OR ".join(f'"{w}"' for w in words.split())
            assert code_search.search(conn, repo, match, WEIGHTS, 7) == _plain(conn, repo, words), (repo, words)


def test_block_search_answers_as_the_repo_filter_through_rewrites(tmp_path):
    conn = connect(tmp_path / "k.db")
    code_search.ensure_schema(conn)
    code_search.replace_rows(conn, "/a", _rows("a", 40), "a1")
    code_search.replace_rows(conn, "/b", _rows("b", 30), "b1")
    _same(conn, "/a", "/b", "/missing")
    assert code_search._block(conn, "/a") == ("a1", 1, 40)  # the block is used
    assert code_search.search(conn, "/a", '"render"', WEIGHTS, 7)
    code_search.replace_rows(conn, "/a", _rows("a", 25, "more"), "a2")  # a new block after b's rows
    _same(conn, "/a", "/b")
    code_search.replace_rows(conn, "/b", _rows("b", 30), "b1")  # b rewritten with the same card set, other rowids
    _same(conn, "/a", "/b")
    code_search.replace_rows(conn, "/a", _rows("a", 25, "more"), "a2")  # a's rows again at the end, same card set
    _same(conn, "/a", "/b")
    # a row of /a written outside its block: the block no longer covers it, the plain filter answers
    conn.execute("INSERT INTO code_fts(repo, symbol_id, name, ident, signature, doc, path, body) "
                 "VALUES ('/b', 'b.x', 'render', 'render', '', '', '', '')")
    conn.execute("INSERT INTO code_fts(repo, symbol_id, name, ident, signature, doc, path, body) "
                 "VALUES ('/a', 'a.late', 'render', 'render table', '', '', '', '')")
    code_search._BLOCKS.clear()
    _same(conn, "/a", "/b")
    assert code_search._block(conn, "/a") is None
    assert "a.late" in {sid for sid, _ in code_search.search(conn, "/a", '"render"', WEIGHTS, 50)}
    conn.close()


def test_a_block_found_on_one_connection_never_answers_for_rows_rewritten_on_another(tmp_path):
    first = connect(tmp_path / "k.db")
    code_search.ensure_schema(first)
    code_search.replace_rows(first, "/a", _rows("a", 20), "a1")
    code_search.replace_rows(first, "/b", _rows("b", 20), "b1")
    _same(first, "/a", "/b")
    other = connect(tmp_path / "k.db")
    code_search.replace_rows(other, "/b", _rows("b", 5), "b2")
    code_search.replace_rows(other, "/a", _rows("a", 30, "more"), "a2")
    _same(first, "/a", "/b")  # the blocks first knew are stale: found again
    _same(other, "/a", "/b")
    first.close()
    other.close()


def test_a_plain_sqlite_connection_gets_the_plain_filter(tmp_path):
    made = connect(tmp_path / "k.db")
    code_search.ensure_schema(made)
    made.close()
    conn = sqlite3.connect(tmp_path / "k.db")  # no weak references to it: nothing is remembered
    code_search.replace_rows(conn, "/a", _rows("a", 20), "a1")
    code_search.replace_rows(conn, "/b", _rows("b", 20), "b1")
    _same(conn, "/a", "/b")
    assert code_search._block(conn, "/a") is None
    conn.close()
