"""One cold index (or the ast floor) of REPO in one process, after a warm-up index: run it under valgrind's
cachegrind with N = 0 and N = 1 and subtract, for an instruction count that does not move with the machine's load
(a proxy for CPU, not wall time: regex and parser instructions are not all equally cheap).

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python benchmarks/index_instructions.py index|floor N REPO
"""
from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path

from ctxbench.bench.index_baselines import ast_floor_seconds, python_files
from ctxbench.codegraph.index import build_index
from ctxbench.codegraph.walk import walk
from ctxbench.config import Config
from ctxbench.store.db import connect


def main() -> None:
    what, runs, repo = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    config = Config().index
    if "parse_processes" in {f.name for f in dataclasses.fields(config)}:  # one process (a tree before it: always)
        config = dataclasses.replace(config, parse_processes=1)

    def index() -> None:
        tmp = Path(tempfile.mkdtemp())
        conn = connect(tmp / "index.db")
        try:
            build_index(repo, conn, config)
        finally:
            conn.close()
            shutil.rmtree(tmp)

    index()  # imports and first-use work are no part of the count
    paths = python_files(repo, walk(repo, config).files)
    ast_floor_seconds(paths)
    for _ in range(runs):
        index() if what == "index" else ast_floor_seconds(paths)


if __name__ == "__main__":
    main()
