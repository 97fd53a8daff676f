"""The baselines a cold index is measured against, in the same run: the ast floor and aider's repo map.

- The **ast floor**: read every Python file the index reads and parse it with the stdlib's ``ast.parse``, a
  plain loop with the cyclic GC paused as in the index (the least any Python indexer must do; ctxbench's parse
  does this and more).
- **aider's repo map**: aider's ``RepoMap.get_repo_map`` over the same Python files, cold (its tags cache is
  deleted before each run), in aider's own interpreter (a separate install: aider is no dependency of
  ctxbench). Only the map is timed, not aider's start-up; the model named only counts tokens, offline.

And the phases of a cold index as a table: each phase's median seconds and its share of the cold index.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, Sequence

from ctxbench.heap import gc_paused
from ctxbench.bench.perf_records import PhaseTiming

AIDER_TIMEOUT_S = 600
AIDER_MAP_TOKENS = 1024  # aider's default --map-tokens
AIDER_MODEL = "gpt-4o-mini"  # only its tokenizer is used (tiktoken, local)
AIDER_TAGS_CACHE_PREFIX = ".aider.tags.cache"

# what aider's interpreter runs: the repo map of the files named on stdin, timed inside, as one JSON line
_AIDER_SCRIPT = """
import json, sys, time
from aider.io import InputOutput
from aider.models import Model
from aider.repomap import RepoMap
root, model_name, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = json.loads(sys.stdin.read())
io = InputOutput(pretty=False, yes=True, fancy_input=False)
model = Model(model_name)
t0 = time.perf_counter()
repo_map = RepoMap(map_tokens=tokens, root=root, main_model=model, io=io, max_context_window=128000)
text = repo_map.get_repo_map([], files) or ""
print(json.dumps({"seconds": time.perf_counter() - t0, "chars": len(text)}))
"""


def python_files(repo: Path, files: Sequence[Any]) -> list[Path]:
    """The Python files among the walked ``files`` (``walk``'s SourceFile records), as paths."""
    return [repo / f.path for f in files if f.language == "python" and f.path.endswith((".py", ".pyi"))]


def ast_floor_seconds(paths: Sequence[Path]) -> tuple[float, float]:
    """Wall and CPU seconds to read and ``ast.parse`` every file of ``paths`` (a file that does not parse still
    counts), with the cyclic GC paused as the index pauses it while it parses (the floor is the parse alone, not
    the GC's passes)."""
    with gc_paused():
        t0, c0 = time.perf_counter(), time.process_time()
        for path in paths:
            try:
                ast.parse(path.read_bytes(), filename=str(path))
            except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
                pass
        return time.perf_counter() - t0, time.process_time() - c0


def ast_floor(repo: Path, files: Sequence[Any], repeat: int) -> PhaseTiming:
    paths = python_files(repo, files)
    runs = [ast_floor_seconds(paths) for _ in range(repeat)]
    return PhaseTiming("ast floor (read + ast.parse every Python file; baseline)", tuple(w for w, _ in runs), None,
                       (("python_files", len(paths)),), tuple(c for _, c in runs))


def _drop_tags_cache(repo: Path) -> None:
    for entry in repo.iterdir():
        if entry.name.startswith(AIDER_TAGS_CACHE_PREFIX):
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)


def aider_repo_map(python: Path, repo: Path, files: Sequence[Any], repeat: int) -> PhaseTiming:
    """aider's cold repo map of the Python files, ``repeat`` times (its tags cache dropped before each run)."""
    paths = [str(p) for p in python_files(repo, files)]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    runs: list[float] = []
    chars = 0
    note = ""
    for _ in range(repeat):
        _drop_tags_cache(repo)
        try:
            # -I: the repository's own modules (textual has a types.py, a signal.py) never shadow aider's imports
            done = subprocess.run([str(python), "-I", "-c", _AIDER_SCRIPT, str(repo), AIDER_MODEL,
                                   str(AIDER_MAP_TOKENS)], input=json.dumps(paths), capture_output=True, text=True,
                                  env=env, timeout=AIDER_TIMEOUT_S, cwd=repo.parent)
        except (OSError, subprocess.TimeoutExpired) as exc:
            note = f"{type(exc).__name__}: {exc}"
            break
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            note = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:200]
            break
        data = json.loads(lines[-1])
        runs.append(float(data["seconds"]))
        chars = int(data["chars"])
    _drop_tags_cache(repo)
    detail: tuple[tuple[str, Any], ...] = (("python_files", len(paths)), ("map_tokens", AIDER_MAP_TOKENS),
                                           ("map_chars", chars))
    if note:
        detail += (("failed", note),)
    return PhaseTiming("aider repo map, cold (baseline)", tuple(runs), None, detail)


def phase_table(cold_phases: Sequence[Sequence[tuple[str, float]]], cold_runs: Sequence[float],
                after: Sequence[Sequence[tuple[str, float]]] = ()) -> list[PhaseTiming]:
    """A row per phase of the cold index (its seconds in each run, detail: its share of the cold index's median),
    then the phases that follow the index before its first scaffold (``after``: loading it, PageRank, anchors),
    each with its share of the same median."""
    total = statistics.median(cold_runs) if cold_runs else 0.0
    rows: list[PhaseTiming] = []
    for label, runs_phases in (("cold index phase", cold_phases), ("after the index", after)):
        names: dict[str, list[float]] = {}
        for phases in runs_phases:
            for name, sec in phases:
                names.setdefault(name, []).append(sec)
        for name, secs in names.items():
            share = statistics.median(secs) / total if total else 0.0
            rows.append(PhaseTiming(f"  {label}: {name}", tuple(secs), None, (("share_of_index_cold", f"{share:.1%}"),)))
    return rows


def versus_floor(cold: PhaseTiming, floor: PhaseTiming, times: float) -> PhaseTiming:
    """The cold index against ``times`` × the ast floor measured in the same run (the target in seconds); the
    ratio of their CPU seconds beside it (steadier when other processes share the machine)."""
    ratio = cold.median_s / floor.median_s if floor.median_s else 0.0
    detail: tuple[tuple[str, Any], ...] = (("x_ast_floor", round(ratio, 2)), ("ast_floor_s", round(floor.median_s, 4)))
    if cold.cpu_median_s and floor.cpu_median_s:
        detail += (("x_ast_floor_cpu", round(cold.cpu_median_s / floor.cpu_median_s, 2)),)
    return PhaseTiming(f"index cold vs {times:g}x the ast floor", cold.runs, times * floor.median_s, detail,
                       cold.cpu_runs)
