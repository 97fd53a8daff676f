"""Shared helpers of the code-graph and index tests: a private copy of the fixture repositories."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from ctxbench.config import IndexConfig

FIXTURES = Path(__file__).parent / "fixtures_repos"
MULTI = FIXTURES / "multi"
SMALL_FILE_LIMIT = 4096  # big.py (12 kB) is over it


def copy_multi(tmp_path: Path) -> Path:
    """Copy the multi-language fixture repository (and the folder its symlinks point to) into tmp_path."""
    shutil.copytree(FIXTURES / "outside", tmp_path / "outside", symlinks=True)
    root = tmp_path / "multi"
    shutil.copytree(MULTI, root, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def small_config() -> IndexConfig:
    return dataclasses.replace(IndexConfig(), max_file_bytes=SMALL_FILE_LIMIT)
