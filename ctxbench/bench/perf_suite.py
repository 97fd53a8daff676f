"""The phase groups that make ``ctxbench bench perf`` the whole performance suite in one run.

Beside the code side (``perf``: index cold / unchanged / one file changed, PageRank, scaffold;
``perf_retrieval``: embedding cards/s, retrieval latency) these measure

* ``startup`` — the import time of each package on the start-up path (``python -X importtime`` of what
  ``ctxbench`` imports before the first paint, in a fresh interpreter; the engine packages must not be among
  them) and the first paint of ``ctxbench demo`` on a pseudo-terminal (``bench.ui``);
* ``plan`` — plan latency p50/p95 on the 1,000-turn synthetic session at 8k and 32k: every strategy
  (``bench.plan_latency``, inputs precomputed) and the default strategy as a plan really runs it, query
  encoding (the real model, warm) and the keyword search included;
* ``ui`` — the mode hotkey → replanned meter (``bench.ui``), on the measured repository;
* ``memory`` — the peak resident memory of the run (this process and the processes it started).
"""
from __future__ import annotations

import re
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from ctxbench.bench.perf_records import PerfContext, PhaseTiming

STARTUP_MODULES = ("ctxbench.cli", "ctxbench.cli.open_cmd", "ctxbench.tui.app")
ENGINE_PACKAGES = ("torch", "sentence_transformers", "transformers", "faiss", "networkx", "tiktoken", "numpy")
IMPORT_LISTED = 8  # packages listed by import time (the rest are summed)
PLAN_TARGET_S = 0.020  # issue 11: p95 <= 20 ms per plan with the default at 1,000 turns, query encode included
PAINT_TARGET_S = 0.8
MODE_TARGET_S = 0.050
PLAN_BUDGETS = (8000, 32000)
_IMPORT_LINE = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")  # self | cumulative | name


def import_times() -> tuple[dict[str, float], float]:
    """(seconds per top-level package, total seconds) of the start-up imports, in a fresh interpreter: each
    module's own import time (``-X importtime``'s self column) summed over the package it belongs to."""
    code = "; ".join(f"import {m}" for m in STARTUP_MODULES)
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          check=True)
    packages: dict[str, float] = {}
    for line in done.stderr.splitlines():
        found = _IMPORT_LINE.search(line)
        if found is None:
            continue
        self_us, name = int(found.group(1)), found.group(4)
        top = name.split(".")[0]
        packages[top] = packages.get(top, 0.0) + self_us / 1e6
    return packages, sum(packages.values())


def startup_group(ctx: PerfContext) -> list[PhaseTiming]:
    from ctxbench.bench.ui import first_paint

    ctx.progress("import times of the start-up path")
    runs = [import_times() for _ in range(max(ctx.repeat, 3))]
    totals = [total for _p, total in runs]
    packages = {name: statistics.median(r[0].get(name, 0.0) for r in runs) for name in runs[-1][0]}
    listed = sorted(packages.items(), key=lambda kv: -kv[1])
    engine = sorted(name for name in packages if name in ENGINE_PACKAGES)
    out = [PhaseTiming("start-up imports (all packages)", tuple(totals), None,
                       (("engine packages imported", ", ".join(engine) or "none"),))]
    out += [PhaseTiming(f"  import {name}", (sec,)) for name, sec in listed[:IMPORT_LISTED]]
    ctx.progress("first paint of ctxbench demo")
    paint = first_paint(int(ctx.shared.get("paint_runs", max(ctx.repeat, 3))))
    out.append(PhaseTiming("first paint (ctxbench demo, p95)", (paint.p95,), PAINT_TARGET_S,
                           (("p50_s", round(paint.p50, 3)), ("runs", paint.runs))))
    return out


class _MemoryCache:
    """A vector cache in memory (the plan timing never touches a database file)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Any] = {}

    def load(self, hashes, key):
        return {h: self.rows[(key, h)] for h in hashes if (key, h) in self.rows}

    def save(self, rows, key):
        for h, v in rows:
            self.rows[(key, h)] = v


def plan_group(ctx: PerfContext) -> list[PhaseTiming]:
    from ctxbench.bench import plan_latency
    from ctxbench.bench.perf_retrieval import _load_embedder
    from ctxbench.tokens import get_tokenizer

    turns = int(ctx.shared.get("plan_turns", plan_latency.DEFAULT_TURNS))
    repeat = int(ctx.shared.get("plan_repeat", plan_latency.DEFAULT_REPEAT))
    config = ctx.config
    tokenizer = get_tokenizer(config.tokenizer.name, config.tokenizer.cache_size)
    ctx.progress(f"plan latency of every strategy ({turns} turns)")
    report = plan_latency.run(tokenizer, config.planner, turns=turns, repeat=repeat, budgets=PLAN_BUDGETS)
    out = [PhaseTiming(f"plan {t.name} @ {t.budget // 1000}k (p95, inputs given)", (t.frozen_p95_ms / 1000,),
                       None, (("p50_ms", round(t.frozen_p50_ms or 0.0, 2)),))
           for t in report.plans]
    embedder = _load_embedder(ctx)
    passes = max(1, ctx.repeat)
    ctx.progress(f"plan latency of the default ({config.planner.default_strategy}), query encode included, "
                 f"{passes} passes")
    times = default_plan_times(config, tokenizer, embedder, turns, repeat, PLAN_BUDGETS, passes)
    for budget in PLAN_BUDGETS:
        runs = times[budget]
        p95s = [plan_latency.percentile(sorted(run), 95) for run in runs]
        everything = sorted(t for run in runs for t in run)
        out.append(PhaseTiming(f"plan default @ {budget // 1000}k (p95, query encode + keyword search included)",
                               tuple(p95s), PLAN_TARGET_S,
                               (("p50_ms", round(statistics.median(everything) * 1000, 2)),
                                ("p95_of_each_pass_ms", [round(v * 1000, 2) for v in p95s]),
                                ("p95_all_plans_ms", round(plan_latency.percentile(everything, 95) * 1000, 2)),
                                ("strategy", config.planner.default_strategy), ("turns", turns),
                                ("plans_per_pass", repeat), ("query_precision", config.embedding.query_precision))))
    return out


def default_plan_times(config, tokenizer, embedder, turns: int, repeat: int, budgets, passes: int = 1
                       ) -> dict[int, list[list[float]]]:
    """Seconds per plan of the default strategy on the synthetic session, as the workbench makes one: the message
    similarity (query encoded by the real model, message vectors warm), the keyword scores of single messages
    (``HistoryKeywords``, the history ranker's ``keyword_scores``), and the plan; with the heap settled after loading,
    as the workbench does (``ctxbench.heap.settle``). ``passes`` passes of ``repeat`` plans per budget, the budgets
    taking turns within each pass (a slow spell of the machine falls on both, and on one pass, not on every
    sample of one budget); after one pass over the queries at each budget that warms up and is not counted.
    Returns the samples of each pass, by budget."""
    import dataclasses
    import gc

    from ctxbench.bench import plan_latency
    from ctxbench.config import BM25_B, BM25_K1
    from ctxbench.heap import settle as settle_heap
    from ctxbench.planner import build_plan
    from ctxbench.records.plans import PlanInputs
    from ctxbench.retrieval.history_keywords import HistoryKeywords
    from ctxbench.retrieval.history_vectors import MessageVectors

    history = plan_latency.synthetic_session(turns)
    vectors, cache = MessageVectors(), _MemoryCache()
    vectors.warm(history, embedder, cache, config.planner.semantic, speaker_share=config.planner.fused.speaker_share)
    keywords = HistoryKeywords()
    queries = plan_latency.queries()
    strategy = config.planner.default_strategy
    fused = config.planner.fused
    out: dict[int, list[list[float]]] = {budget: [[] for _ in range(passes)] for budget in budgets}

    def plan_seconds(i: int, budget: int) -> float:
        query = queries[i % len(queries)]
        current = (dataclasses.replace(history[-1], id=len(history) + 1, group_id=turns, role="user",
                                       content=query, tool_calls=(), tool_call_id=None, tool_name=None,
                                       flags=()),)
        t0 = time.perf_counter()
        similarity, _ = vectors.similarity(history, query, embedder, cache, config.planner.semantic,
                                           embed_limit=fused.embed_per_plan, speaker_share=fused.speaker_share)
        keyword = keywords.message_scores(history, query, fused.keyword_candidates, k1=BM25_K1, b=BM25_B)
        inputs = PlanInputs(session_id="bench", query=query, history=history, current_turn=current,
                            budget=budget, mode="off", strategy=strategy, system_prompt=config.planner.system_prompt,
                            message_similarity=similarity, message_keyword=keyword, tokenizer=tokenizer.name)
        build_plan(inputs, config.planner, tokenizer)
        return time.perf_counter() - t0

    settle_heap()
    try:
        for budget in budgets:
            for i in range(len(queries)):
                plan_seconds(i, budget)
        for run in range(passes):
            for budget in budgets:
                out[budget][run] = [plan_seconds(len(queries) + i, budget) for i in range(repeat)]
    finally:
        gc.unfreeze()
    return out


def ui_group(ctx: PerfContext) -> list[PhaseTiming]:
    import dataclasses

    from ctxbench.bench.ui import run_mode_latency

    ctx.progress("mode hotkey -> replanned meter")
    config = dataclasses.replace(ctx.config, ui=dataclasses.replace(ctx.config.ui, live_preview=False))
    report = run_mode_latency(ctx.repo, int(ctx.shared.get("mode_presses", 20)), False, config)
    return [PhaseTiming("mode toggle -> replanned meter (p95)", (report.meter_ms.p95 / 1000,), MODE_TARGET_S,
                        (("p50_ms", round(report.meter_ms.p50, 2)), ("presses", report.meter_ms.runs)))]


def memory_group(ctx: PerfContext) -> list[PhaseTiming]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return [PhaseTiming("peak memory (MiB)", (round(max(own, children), 1),), None,
                        (("this process_mib", round(own, 1)), ("largest child process_mib", round(children, 1))))]


def _seconds(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1.0 else f"{value:.2f} s"


def display_rows(phases) -> list[dict[str, Any]]:
    """Each phase as ``{name, value, target, meets}`` with units, for the table, the results file and /bench."""
    rows = []
    for p in phases:
        detail = dict(p.detail)
        if "(MiB)" in p.name:
            value, target = f"{p.median_s:.0f} MiB", ""
        elif "cards_per_s" in detail:
            value = f"{detail['cards_per_s']} cards/s"
            target = f">= {detail['target_cards_per_s']} cards/s" if "target_cards_per_s" in detail else ""
        else:
            value = _seconds(p.median_s)
            target = f"<= {_seconds(p.target_s)}" if p.target_s is not None else ""
        rows.append({"name": p.name.strip(), "value": value, "target": target, "meets": p.meets,
                     "detail": {k: v for k, v in detail.items()}})
    return rows
