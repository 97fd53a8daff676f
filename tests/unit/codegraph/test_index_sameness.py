"""What a cold index stores for the fixture repositories, row for row: speed work on the indexer (the parse, the
secret scan, the cards, the store) must leave every stored row as it was. The digests were taken from the indexer
before that work; a change that means to change what is stored bumps ``PARSER_VERSION`` and the digests with it."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from codegraph_helpers import copy_multi
from ctxbench.codegraph.index import build_index
from ctxbench.config import Config
from ctxbench.store.db import connect

DEMO_REPO = Path(__file__).resolve().parents[3] / "fixtures" / "demo_repo"

# every stored row of each table but times (mtime, indexed_at) and the root's own path, sorted (see stored_rows)
DIGESTS = {
    "multi": "84e2771e6d759c6ca847a2f45965011553731e118e3ceb25961d4c39856514a7",
    "demo_repo": "db33a00bbef9a7b5b5f97a246e287d4b56216bd1a4f1f7d6ca4919e74e62781a",
}
TABLES = (("code_files", "path, language, size, sha, error, partial, parse"), ("code_symbols", "*"),
          ("code_cards", "*"), ("code_edges", "*"), ("code_skipped", "*"), ("code_repos", "fingerprint, summary"))


def stored_rows(conn) -> list[str]:
    lines = []
    for table, columns in TABLES:
        lines += sorted(f"{table}\t{tuple(row)!r}" for row in conn.execute(f"SELECT {columns} FROM {table}"))
    return lines


def _repo(name: str, tmp_path: Path) -> Path:
    if name == "multi":
        return copy_multi(tmp_path)
    root = tmp_path / name
    shutil.copytree(DEMO_REPO, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_a_cold_index_stores_the_same_rows_as_before(name, tmp_path):
    conn = connect(tmp_path / "index.db")
    try:
        build_index(_repo(name, tmp_path), conn, Config().index)
        rows = stored_rows(conn)
    finally:
        conn.close()
    assert len(rows) > 100
    assert hashlib.sha256("\n".join(rows).encode()).hexdigest() == DIGESTS[name]
