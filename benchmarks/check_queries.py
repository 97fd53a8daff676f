#!/usr/bin/env python3
"""Check a code query set against its codebase without running any retrieval.

For every codebase of the manifest (or of ``--role``): the query file loads with the bench's own reader,
every gold symbol is in the index the bench builds of that codebase (the indexer only: nothing is
embedded, nothing retrieved), every marked line range lies inside its gold symbol's span, and how/bug
questions whose gold is a function over 30 lines have their answering lines marked. Prints the counts
by kind and the share of questions that name a gold symbol verbatim, computed as ``bench code`` does.

    python benchmarks/check_queries.py --role holdout5     # exit 1 when a check fails (any role of the manifest)
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path

from ctxbench.bench.code import ROLES, align_gold, gold_named_share, load_manifest, load_queries
from ctxbench.codegraph.index import build_index, load_index
from ctxbench.store.schema import open_core

HERE = Path(__file__).resolve().parent
LONG = 30  # lines: a gold function longer than this needs its answering lines marked (how/bug)


def check(spec, conn: sqlite3.Connection) -> list[str]:
    problems: list[str] = []
    build_index(spec.repo, conn)
    index = load_index(spec.repo, conn)
    prefix = os.path.basename(str(index.root)) if (Path(index.root) / "__init__.py").is_file() else ""
    queries, unknown = align_gold(load_queries(spec.queries), index.cards, prefix)
    problems += [f"{spec.name}: gold {g} is not in the index" for g in unknown]
    for q in queries:
        for symbol, first, last in q.lines:
            sym = index.symbols.get(symbol)
            if sym is not None and not sym.line <= first <= last <= sym.end_line:
                problems.append(f"{spec.name} {q.id}: lines {first}-{last} outside {symbol} "
                                f"({sym.line}-{sym.end_line})")
        long = [g for g in q.gold if g in index.symbols and index.symbols[g].kind in ("function", "method")
                and index.symbols[g].end_line - index.symbols[g].line + 1 > LONG]
        if q.kind in ("how", "bug") and long and not q.lines:
            problems.append(f"{spec.name} {q.id}: {q.kind} question on long {', '.join(long)} has no lines")
    kinds = Counter(q.kind for q in queries)
    print(f"{spec.name:<12} {len(index.symbols)} symbols, {len(queries)} questions "
          f"({', '.join(f'{k} {kinds[k]}' for k in ('how', 'bug', 'where', 'concept'))}), "
          f"{sum(1 for q in queries if q.lines)} with marked lines, "
          f"names gold verbatim {gold_named_share(queries):.0%}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=HERE / "codebases.toml")
    parser.add_argument("--role", choices=(*ROLES, "all"), default="all")
    args = parser.parse_args(argv)
    specs = [s for s in load_manifest(args.manifest) if args.role in ("all", s.role)]
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in specs:
            if not spec.repo.is_dir():
                problems.append(f"{spec.name}: {spec.repo} is missing (run benchmarks/fetch_codebases.py)")
                continue
            conn = open_core(Path(tmp) / f"{spec.name}.db")
            try:
                problems += check(spec, conn)
            finally:
                conn.close()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
