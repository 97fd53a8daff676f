#!/usr/bin/env python3
"""Digest every row a cold index stores, per repository, to show that speed work on the indexer changed none.

For textual's installed source and each folder of ``benchmarks/.codebases`` (or the repositories named), it indexes
the repository cold into a fresh database and hashes the stored rows the way
``tests/unit/codegraph/test_index_sameness.py`` does (every table, times and the root's own path left out). With
``--rows DIR`` it also writes each repository's rows to ``DIR/<name>.rows`` for a line diff.

    PYTHONPATH=. python benchmarks/index_rows_digest.py --out /tmp/before.json
    PYTHONPATH=. python benchmarks/index_rows_digest.py --out /tmp/after.json --compare /tmp/before.json
    PYTHONPATH=. python benchmarks/index_rows_digest.py --processes 1 --out /tmp/one.json --compare /tmp/before.json
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLES = (("code_files", "path, language, size, sha, error, partial, parse"), ("code_symbols", "*"),
          ("code_cards", "*"), ("code_edges", "*"), ("code_skipped", "*"), ("code_repos", "fingerprint, summary"))


def _repos(names: list[str]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    spec = importlib.util.find_spec("textual")
    if spec is not None and spec.submodule_search_locations:
        out["textual"] = Path(list(spec.submodule_search_locations)[0])
    codebases = HERE / ".codebases"
    if codebases.is_dir():
        for entry in sorted(codebases.iterdir()):
            if entry.is_dir():
                out[entry.name] = entry
    return {n: p for n, p in out.items() if not names or n in names}


def stored_rows(conn) -> list[str]:
    lines: list[str] = []
    for table, columns in TABLES:
        lines += sorted(f"{table}\t{tuple(row)!r}" for row in conn.execute(f"SELECT {columns} FROM {table}"))
    return lines


def main() -> int:
    from ctxbench.codegraph.index import build_index
    from ctxbench.config import Config
    from ctxbench.store.db import connect

    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--rows", type=Path)
    parser.add_argument("--processes", type=int, default=0, help="index.parse_processes (0: the default)")
    args = parser.parse_args()
    config = dataclasses.replace(Config().index, parse_processes=args.processes)
    digests: dict[str, dict[str, object]] = {}
    for name, root in _repos(args.names).items():
        with tempfile.TemporaryDirectory() as tmp:
            conn = connect(Path(tmp) / "index.db")
            try:
                build_index(root, conn, config)
                rows = stored_rows(conn)
            finally:
                conn.close()
        digests[name] = {"rows": len(rows), "sha256": hashlib.sha256("\n".join(rows).encode()).hexdigest()}
        if args.rows:
            args.rows.mkdir(parents=True, exist_ok=True)
            (args.rows / f"{name}.rows").write_text("\n".join(rows), encoding="utf-8")
        print(name, digests[name], flush=True)
    args.out.write_text(json.dumps(digests, indent=1), encoding="utf-8")
    if args.compare:
        before = json.loads(args.compare.read_text(encoding="utf-8"))
        differ = sorted(n for n in digests if n in before and before[n] != digests[n])
        print(f"{len(digests)} repositories, {len(differ)} differ: {', '.join(differ) or 'none'}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
