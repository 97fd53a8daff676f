"""Speed benchmark of the code side: indexing (parse + graph + cards), incremental runs, loading, ranking.

The benchmark is a list of phase groups (``PHASE_GROUPS``); each group is a function that takes
the shared ``PerfContext`` and returns ``PhaseTiming`` records. Later groups may use what earlier
ones left in ``context.shared`` (the database path, the loaded index). Other parts of ctxbench
add their own groups (embedding, retrieval) with ``register_group``.

The repository is copied into a scratch folder first, so a "one file changed" run can edit a file
without touching the original, and every cold run starts from a fresh database.
"""
from __future__ import annotations

import importlib.util
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ctxbench.bench.perf_records import PerfContext, PhaseTiming
from ctxbench.config import Config

COLD_TARGET_S = 2.0  # parse + graph + cards, no embedding, textual's source (issue 3)
COLD_FLOOR_TIMES = 3.0  # a cold index within 3x the ast floor measured in the same run (issue 26)
UNCHANGED_TARGET_S = 0.3
DEFAULT_REPEAT = 3
CHANGED_FILE_MARKER = "\n\ndef _ctxbench_perf_probe():\n    return {n}\n"
CHANGED_FILE_COMMENT = "\n// ctxbench perf probe {n}\n"


def _change_marker(path: Path, n: int) -> str:
    """Text appended to change a file: a new function in Python, a comment elsewhere."""
    return (CHANGED_FILE_MARKER if path.suffix == ".py" else CHANGED_FILE_COMMENT).format(n=n)


@dataclass(frozen=True)
class PerfReport:
    repo: str
    repeat: int
    counts: tuple[tuple[str, int], ...]
    phases: tuple[PhaseTiming, ...]

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo, "repeat": self.repeat, **dict(self.counts),
                "phases": [p.to_json() for p in self.phases]}


PhaseGroup = Callable[[PerfContext], list[PhaseTiming]]


def default_repo() -> Path | None:
    """Textual's installed source, the reference codebase of the speed targets."""
    spec = importlib.util.find_spec("textual")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


class _Clock:
    """Wall and CPU time of one run; the CPU of the child processes it waited for counts too (a cold index parses
    in forked processes on a machine with more than one core)."""

    def __enter__(self) -> "_Clock":
        self.wall0, self.cpu0 = time.perf_counter(), _cpu_with_children()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = _cpu_with_children() - self.cpu0


def _cpu_with_children() -> float:
    """CPU seconds of this process and of its children that have ended (and were waited for)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _median_phases(results: list[Any]) -> tuple[tuple[str, Any], ...]:
    names: dict[str, list[float]] = {}
    for r in results:
        for name, sec in r.phases:
            names.setdefault(name, []).append(sec)
    return tuple((f"{name}_s", round(statistics.median(v), 4)) for name, v in names.items())


def _after_index(repo: Path, conn: Any, config: Config) -> tuple[tuple[str, float], ...]:
    """What follows a cold index before its first scaffold, timed: loading it from the store, PageRank, anchors."""
    from ctxbench.codegraph import index as index_mod

    index_mod._LOADED.clear()
    t0 = time.perf_counter()
    index = index_mod.load_index(repo, conn, config.index, config.capsules)
    t1 = time.perf_counter()
    index.centrality
    t2 = time.perf_counter()
    index.anchor_lines
    t3 = time.perf_counter()
    index_mod._LOADED.clear()
    return (("load", t1 - t0), ("pagerank", t2 - t1), ("anchors", t3 - t2))


def index_group(ctx: PerfContext) -> list[PhaseTiming]:
    """Cold index (beside the ast floor and, given aider's interpreter, aider's repo map, with a row per phase),
    unchanged re-index and a one-file change, without embedding."""
    from ctxbench.bench import index_baselines
    from ctxbench.codegraph.index import build_index
    from ctxbench.codegraph.walk import walk
    from ctxbench.store.database import Database

    walked = walk(ctx.repo, ctx.config.index).files
    ctx.progress("ast floor")
    floor = index_baselines.ast_floor(ctx.repo, walked, ctx.repeat)
    cold_runs: list[float] = []
    cold_cpu: list[float] = []
    cold_results = []
    after: list[tuple[tuple[str, float], ...]] = []
    db_path = ctx.workdir / "perf.db"
    for i in range(ctx.repeat):
        ctx.progress(f"cold index {i + 1}/{ctx.repeat}")
        path = ctx.workdir / f"cold{i}.db"
        database = Database(path)
        conn = database.dedicated_connection()
        with _Clock() as clock:
            result = build_index(ctx.repo, conn, ctx.config.index)
        cold_runs.append(clock.wall)
        cold_cpu.append(clock.cpu)
        cold_results.append(result)
        after.append(_after_index(ctx.repo, conn, ctx.config))
        database.close()
        if i == ctx.repeat - 1:
            for suffix in ("", "-wal", "-shm"):
                src = Path(str(path) + suffix)
                if src.exists():
                    src.replace(Path(str(db_path) + suffix))
    last = cold_results[-1]
    ctx.shared["db_path"] = db_path
    ctx.shared["counts"] = (("files", last.files), ("symbols", last.symbols), ("edges", last.edges),
                            ("cards", last.cards), ("parse_errors", len(last.parse_errors)))

    database = Database(db_path)
    conn = database.dedicated_connection()
    ctx.progress("unchanged re-index")
    warm_runs: list[float] = []
    warm_cpu: list[float] = []
    warm_results = []
    for _ in range(max(ctx.repeat, 3)):
        with _Clock() as clock:
            warm_results.append(build_index(ctx.repo, conn, ctx.config.index))
        warm_runs.append(clock.wall)
        warm_cpu.append(clock.cpu)

    ctx.progress("one file changed")
    target = _file_to_change(ctx.repo, ctx.config)
    changed_runs: list[float] = []
    changed_cpu: list[float] = []
    changed_results = []
    if target is not None:
        original = target.read_text(encoding="utf-8")
        try:
            for i in range(ctx.repeat):
                target.write_text(original + _change_marker(target, i), encoding="utf-8")
                with _Clock() as clock:
                    changed_results.append(build_index(ctx.repo, conn, ctx.config.index))
                changed_runs.append(clock.wall)
                changed_cpu.append(clock.cpu)
        finally:
            target.write_text(original, encoding="utf-8")
            build_index(ctx.repo, conn, ctx.config.index)
    database.close()
    cold = PhaseTiming("index cold (parse+graph+cards)", tuple(cold_runs), COLD_TARGET_S,
                       (("files_parsed", last.files_parsed), *_median_phases(cold_results)), tuple(cold_cpu))
    out = [
        cold,
        PhaseTiming("index unchanged", tuple(warm_runs), UNCHANGED_TARGET_S,
                    (("files_parsed", warm_results[-1].files_parsed), *_median_phases(warm_results)), tuple(warm_cpu)),
    ]
    if changed_runs:
        out.append(PhaseTiming("index one file changed", tuple(changed_runs), None,
                               (("file", target.relative_to(ctx.repo).as_posix()),
                                ("files_parsed", changed_results[-1].files_parsed),
                                *_median_phases(changed_results)), tuple(changed_cpu)))
    out.append(floor)
    out.append(index_baselines.versus_floor(cold, floor, COLD_FLOOR_TIMES))
    out.extend(index_baselines.phase_table([r.phases for r in cold_results], cold_runs, after))
    aider = ctx.shared.get("aider_python")
    if aider:
        ctx.progress("aider repo map")
        out.append(index_baselines.aider_repo_map(Path(aider), ctx.repo, walked, ctx.repeat))
    return out


def _file_to_change(repo: Path, config: Config) -> Path | None:
    """An indexed file of median size (Python preferred) to edit in the one-file-changed run."""
    from ctxbench.codegraph.walk import walk

    files = [f for f in walk(repo, config.index).files if not (repo / f.path).is_symlink()]
    python = [f for f in files if f.language == "python"]
    pool = sorted(python or files, key=lambda f: (f.size, f.path))
    return repo / pool[len(pool) // 2].path if pool else None


def graph_group(ctx: PerfContext) -> list[PhaseTiming]:
    """Loading the index for retrieval, PageRank (plain and personalized) and the scaffold."""
    from ctxbench.codegraph import index as index_mod
    from ctxbench.codegraph.graph import pagerank, personalization
    from ctxbench.store.database import Database
    from ctxbench.tokens import get_tokenizer

    database = Database(ctx.shared["db_path"])
    conn = database.dedicated_connection()
    load_runs: list[float] = []
    for _ in range(ctx.repeat):
        index_mod._LOADED.clear()
        t0 = time.perf_counter()
        index = index_mod.load_index(ctx.repo, conn, ctx.config.index, ctx.config.capsules)
        load_runs.append(time.perf_counter() - t0)
    cached_runs = []
    for _ in range(max(ctx.repeat, 3)):
        t0 = time.perf_counter()
        index_mod.load_index(ctx.repo, conn, ctx.config.index, ctx.config.capsules)
        cached_runs.append(time.perf_counter() - t0)
    ctx.shared["index"] = index

    rank_runs = []
    for _ in range(ctx.repeat):
        index.graph.graph.clear()  # drop the cached transition matrix
        t0 = time.perf_counter()
        scores = pagerank(index.graph, None, ctx.config.index)
        rank_runs.append(time.perf_counter() - t0)
    top = sorted(scores, key=lambda s: -scores[s])[:5]
    personal_runs = []
    for _ in range(max(ctx.repeat, 3)):
        t0 = time.perf_counter()
        weights = personalization(index.graph, pins=top[:2], mentioned=top[2:4], activation={top[4]: 1.0},
                                  config=ctx.config.index)
        pagerank(index.graph, weights, ctx.config.index)
        personal_runs.append(time.perf_counter() - t0)

    tokenizer = get_tokenizer(ctx.config.tokenizer.name, ctx.config.tokenizer.cache_size)
    budget = int(ctx.config.default_budget_tokens() * ctx.config.planner.mode("light").scaffold_share)
    from ctxbench.codegraph.scaffold import build_scaffold

    scaffold_runs = []
    text = ""
    for _ in range(ctx.repeat):
        t0 = time.perf_counter()
        text = build_scaffold(index.graph, index.symbols, budget, tokenizer, config=ctx.config.index, scores=scores)
        scaffold_runs.append(time.perf_counter() - t0)
    database.close()
    return [
        PhaseTiming("load_index (from the store)", tuple(load_runs), None,
                    (("symbols", len(index.symbols)), ("graph_edges", index.graph.number_of_edges()))),
        PhaseTiming("load_index (cached)", tuple(cached_runs)),
        PhaseTiming("pagerank (plain, builds matrix)", tuple(rank_runs)),
        PhaseTiming("pagerank (personalized, cached matrix)", tuple(personal_runs)),
        PhaseTiming("scaffold", tuple(scaffold_runs), None,
                    (("budget_tokens", budget), ("tokens", tokenizer.count(text)))),
    ]


def _embed_group(ctx: PerfContext) -> list[PhaseTiming]:
    from ctxbench.bench.perf_retrieval import embed_group

    return embed_group(ctx)


def _retrieve_group(ctx: PerfContext) -> list[PhaseTiming]:
    from ctxbench.bench.perf_retrieval import retrieve_group

    return retrieve_group(ctx)


def _suite_group(name: str) -> PhaseGroup:
    def group(ctx: PerfContext) -> list[PhaseTiming]:
        from ctxbench.bench import perf_suite

        return getattr(perf_suite, f"{name}_group")(ctx)

    return group


def _plan_cache_group(ctx: PerfContext) -> list[PhaseTiming]:
    from ctxbench.bench.plan_cache import cache_group

    return cache_group(ctx)


PHASE_GROUPS: list[tuple[str, PhaseGroup]] = [
    ("index", index_group), ("graph", graph_group), ("embed", _embed_group), ("retrieve", _retrieve_group),
    ("startup", _suite_group("startup")), ("plan", _suite_group("plan")), ("ui", _suite_group("ui")),
    ("cache", _plan_cache_group), ("memory", _suite_group("memory")),
]


def register_group(name: str, group: PhaseGroup) -> None:
    """Add (or replace) a phase group; it runs after the existing ones and may use ``context.shared``."""
    for i, (existing, _) in enumerate(PHASE_GROUPS):
        if existing == name:
            PHASE_GROUPS[i] = (name, group)
            return
    PHASE_GROUPS.append((name, group))


def run(source: Path, config: Config, *, repeat: int = DEFAULT_REPEAT, groups: list[str] | None = None,
        progress: Callable[[str], None] | None = None, options: dict[str, Any] | None = None) -> PerfReport:
    """Run the phase groups (all, or the named ones; ``index`` always runs first since others need its database).
    ``options`` go into the groups' shared dict (``plan_turns``, ``plan_repeat``, ``mode_presses``)."""
    report = progress or (lambda what: None)
    source = Path(source).resolve()
    with tempfile.TemporaryDirectory(prefix="ctxbench-perf-") as tmp:
        workdir = Path(tmp)
        repo = workdir / source.name
        report(f"copying {source}")
        shutil.copytree(source, repo, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        ctx = PerfContext(source, repo, workdir, config, repeat, report)
        ctx.shared.update(options or {})
        phases: list[PhaseTiming] = []
        for name, group in PHASE_GROUPS:
            if groups and name not in groups and name != "index":
                continue
            phases.extend(group(ctx))
        counts = ctx.shared.get("counts", ())
    return PerfReport(str(source), repeat, tuple(counts), tuple(phases))
