"""What kept derivatives of ctxbench's code (history snapshots, the demo's seed) are filed under changes with any
module of the package, not only with a hand-kept list of them."""
from __future__ import annotations

import shutil

from ctxbench.service import code_digest, demo_seed, history_snapshot


def _digest_of(package) -> str:
    code_digest.package_digest.cache_clear()
    try:
        return code_digest.package_digest()
    finally:
        code_digest.package_digest.cache_clear()


def test_a_change_to_any_module_changes_what_snapshots_and_seeds_are_filed_under(tmp_path, monkeypatch):
    copy = tmp_path / "ctxbench"
    shutil.copytree(code_digest.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "models"))
    monkeypatch.setattr(code_digest, "PACKAGE", copy)
    before = (_digest_of(copy), history_snapshot.code_digest(), demo_seed.seed_key("d", "config"))
    code_digest.package_digest.cache_clear()
    moved = copy / "planner" / "strategies" / "fused_units.py"  # a module no list named when it was split out
    moved.write_text(moved.read_text() + "\n# changed\n")
    after = (_digest_of(copy), history_snapshot.code_digest(), demo_seed.seed_key("d", "config"))
    assert all(b != a for b, a in zip(before, after))
    code_digest.package_digest.cache_clear()


def test_the_same_source_gives_the_same_digest(tmp_path, monkeypatch):
    copy = tmp_path / "ctxbench"
    shutil.copytree(code_digest.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "models"))
    monkeypatch.setattr(code_digest, "PACKAGE", copy)
    assert _digest_of(copy) == _digest_of(copy)
