"""docs/reliability.md names the test behind every case: each one must exist (a renamed or deleted test
would leave a row that proves nothing)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "reliability.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")}


def test_every_row_names_a_test_and_every_named_test_exists():
    rows = [line for line in DOC.read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and not line.startswith("| Case") and not line.startswith("|---")]
    assert len(rows) >= 30
    missing = []
    for row in rows:
        named = NAMED.findall(row.rsplit("|", 2)[-2])  # the last column
        assert named, f"a row without a test: {row[:80]}"
        for path, name in named:
            if not (ROOT / path).is_file() or name not in _tests_in(ROOT / path):
                missing.append(f"{path}::{name}")
    assert not missing, missing
