"""CPU seconds per phase of a cold index (median of N runs) beside the ast floor's CPU seconds, in this process only:
steadier than wall time on a shared machine (``ctxbench bench perf --only index`` gives the wall figures and the
ratio of the cold index's CPU to the floor's). The phases' clocks are switched to process time for the run; the
loading of the index after it is timed too. The index parses in this process alone (``index.parse_processes = 1``:
forked parsers' seconds are no phase of this one). Repository: textual's installed source, or the one given.

    PYTHONPATH=. python benchmarks/index_cpu_phases.py [RUNS] [REPO]
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

from ctxbench.bench.index_baselines import ast_floor_seconds, python_files
from ctxbench.codegraph import index as index_mod
from ctxbench.codegraph import python_ast, treesitter
from ctxbench.codegraph.walk import walk
from ctxbench.config import Config
from ctxbench.redaction.scanner import _detectors
from ctxbench.store.database import Database


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if len(sys.argv) > 2:
        repo = Path(sys.argv[2]).resolve()
    else:
        repo = Path(list(importlib.util.find_spec("textual").submodule_search_locations)[0])
    index_mod.time = types.SimpleNamespace(perf_counter=time.process_time, time=time.time)  # type: ignore[assignment]
    python_ast.perf_counter = treesitter.perf_counter = time.process_time  # type: ignore[assignment]
    config = Config().index
    if "parse_processes" in {f.name for f in dataclasses.fields(config)}:  # (a tree from before the forked parse)
        config = dataclasses.replace(config, parse_processes=1)
    paths = python_files(repo, walk(repo, config).files)
    _detectors()  # the secret rules' one-time import is no phase of an index
    floor, totals, phases = [], [], {}
    for _ in range(runs):
        floor.append(ast_floor_seconds(paths)[1])
        with tempfile.TemporaryDirectory() as tmp:
            database = Database(Path(tmp) / "index.db")
            conn = database.dedicated_connection()
            c0 = time.process_time()
            result = index_mod.build_index(repo, conn, config)
            totals.append(time.process_time() - c0)
            for name, sec in result.phases:
                phases.setdefault(name, []).append(sec)
            index_mod._LOADED.clear()
            c0 = time.process_time()
            index_mod.load_index(repo, conn, config)
            phases.setdefault("(load)", []).append(time.process_time() - c0)
            index_mod._LOADED.clear()
            database.close()
    median = statistics.median
    print(json.dumps({"floor_cpu": round(median(floor), 3), "index_cpu": round(median(totals), 3),
                      "ratio": round(median(totals) / median(floor), 2),
                      "phases": {n: round(median(v), 3) for n, v in phases.items()}}))


if __name__ == "__main__":
    main()
