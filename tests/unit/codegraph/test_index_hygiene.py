"""What the code index keeps: stale card vectors are removed, a Python file with one syntax error keeps its
other symbols (tree-sitter's error-tolerant parse), and empty files do not become embedded cards."""
from __future__ import annotations

import os

import numpy as np

from ctxbench.codegraph.index import build_index, load_index
from ctxbench.config import Config
from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.retrieval.vectors import embed_cards, model_key
from ctxbench.store.db import connect, migrate
from ctxbench.store.schema import components
from ctxbench.store.vectors import save_vectors

BROKEN = '''"""Ledger helpers."""
import os


def good_one(x):
    """Adds one."""
    return x + 1


def broken(:
    return 2


class Ledger:
    """Holds entries."""

    def post(self, entry):
        return entry

    def bad(self, x y):
        return x

    def total(self):
        return good_one(0)


@staticmethod
def decorated():
    pass


def last():
    return os.sep
'''


def _conn(tmp_path):
    conn = connect(tmp_path / "ctx.db")
    for name, steps in components():
        migrate(conn, name, steps)
    return conn


def _index(root, conn, embedder=None):
    stats = {}

    def embed(cards, progress):
        stats["s"] = embed_cards(cards, conn, embedder, progress)
        return stats["s"]

    result = build_index(root, conn, Config().index, embed=embed if embedder is not None else None)
    return result, stats.get("s")


def test_a_syntax_error_keeps_the_other_symbols(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "ledger.py").write_text(BROKEN)
    conn = _conn(tmp_path)
    result, _ = _index(root, conn)
    (error,) = result.parse_errors
    assert error.path == "ledger.py" and error.partial and "SyntaxError" in error.error
    index = load_index(root, conn, Config().index)
    assert {"ledger.good_one", "ledger.Ledger", "ledger.Ledger.post", "ledger.Ledger.total", "ledger.decorated",
            "ledger.last"} <= set(index.symbols)
    assert "ledger.broken" not in index.symbols and "ledger.Ledger.bad" not in index.symbols
    # line numbers hold: the blanked statements kept their lines
    assert index.symbols["ledger.last"].line == BROKEN.split("\n").index("def last():") + 1
    assert index.cards["ledger.Ledger.total"].snippet.strip() == "return good_one(0)"
    assert ("ledger.Ledger.total", "ledger.good_one") in {(a, b) for a, b in index.graph.edges()}


def test_a_hopeless_file_is_still_a_parse_error_without_symbols(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "junk.py").write_text("))))(((( :: def def class\n" * 3)
    conn = _conn(tmp_path)
    result, _ = _index(root, conn)
    (error,) = result.parse_errors
    assert not error.partial and result.symbols == 0


def test_empty_files_do_not_become_embedded_cards(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    for n in range(300):
        (root / "pkg" / f"empty{n}.py").write_text("" if n % 2 else "\n   \n")
    (root / "pkg" / "real.py").write_text("def used():\n    return 1\n")
    conn = _conn(tmp_path)
    result, stats = _index(root, conn, HashingEmbedder())
    assert result.files == 302
    assert result.cards == 3  # the package, real.py and used(): nothing for the 300 empty files
    assert stats.embedded == 3
    assert conn.execute("SELECT COUNT(*) FROM card_vectors").fetchone()[0] == 3


def test_stale_card_vectors_are_removed_and_turn_vectors_kept(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    target = root / "calc.py"
    target.write_text('def add(a, b):\n    """Adds two numbers."""\n    return a + b\n')
    conn = _conn(tmp_path)
    embedder = HashingEmbedder()
    save_vectors(conn, [("turn-hash", np.ones(embedder.dimension, dtype=np.float32))],
                 f"{embedder.key}|turn-h2|seq128")  # a history turn's vector shares the table
    _index(root, conn, embedder)
    before = {r[0] for r in conn.execute("SELECT card_hash FROM card_vectors WHERE model = ?",
                                         (model_key(embedder.key),))}
    assert len(before) == 2  # the module and add()
    target.write_text('def add(a, b):\n    """Adds two numbers, exactly."""\n    return a + b\n')
    st = os.stat(target)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    result, stats = _index(root, conn, embedder)
    after = {r[0] for r in conn.execute("SELECT card_hash FROM card_vectors WHERE model = ?",
                                        (model_key(embedder.key),))}
    current = {r[0] for r in conn.execute("SELECT card_hash FROM code_cards")}
    assert after == current and after != before
    assert stats.removed == len(before - after) >= 1 and result.vectors_removed == stats.removed
    assert conn.execute("SELECT COUNT(*) FROM card_vectors WHERE card_hash = 'turn-hash'").fetchone()[0] == 1
