"""How fast time travel is (``ctxbench bench timeline``): the diff of two plans of a long session, and one
what-if step (a replan at another budget) on the demo session.

1. Plan diff: two plans of a synthetic 1,000-turn session (the plan-latency bench's), for two consecutive
   turns, at 32k; ``planner.diff.diff_plans`` is timed on them. Target ≤ 20 ms.
2. What-if: the demo session (the recorded long session over the demo repository, keyword and graph
   retrieval, no model), opened as the workbench opens it; the what-if screen's replan
   (``WhatIf.plan``) is timed while the budget slider walks around 32k one step at a time. Target
   ≤ 50 ms per step.
"""
from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ctxbench.bench.plan_latency import percentile, synthetic_session
from ctxbench.config import Config

DIFF_TARGET_MS = 20.0
WHATIF_TARGET_MS = 50.0
WHATIF_BUDGET = 32_000
DEFAULT_TURNS = 1000
DEFAULT_STEPS = 40


@dataclass(frozen=True)
class Figure:
    name: str
    runs: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    target_ms: float
    detail: tuple[tuple[str, Any], ...] = ()

    @property
    def meets(self) -> bool:
        return self.p95_ms <= self.target_ms

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "detail": dict(self.detail), "meets": self.meets}


def _figure(name: str, samples: list[float], target: float, **detail: Any) -> Figure:
    ms = [s * 1000 for s in samples]
    return Figure(name, len(ms), statistics.median(ms), percentile(ms, 95), max(ms), target,
                  tuple(detail.items()))


def time_diff(config: Config, tokenizer: Any, turns: int = DEFAULT_TURNS, repeat: int = 50) -> Figure:
    from ctxbench.planner import build_plan
    from ctxbench.planner.diff import diff_plans
    from ctxbench.records.plans import PlanInputs

    history = synthetic_session(turns)
    groups = sorted({m.group_id for m in history})

    def plan_at(last: int):
        before = tuple(m for m in history if m.group_id < last)
        current = tuple(m for m in history if m.group_id == last)
        inputs = PlanInputs(session_id="bench", query=current[0].content, history=before, current_turn=current,
                            budget=WHATIF_BUDGET, strategy="window", tokenizer=tokenizer.name)
        return build_plan(inputs, config.planner, tokenizer)

    a, b = plan_at(groups[-2]), plan_at(groups[-1])
    diff_plans(a, b)  # warm
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        diff = diff_plans(a, b)
        samples.append(time.perf_counter() - t0)
    return _figure("diff of two plans", samples, DIFF_TARGET_MS, turns=turns, items=len(a.items) + len(b.items),
                   entered=len(diff.entered), left=len(diff.left), changed=len(diff.changed))


def time_whatif(config: Config, steps: int = DEFAULT_STEPS,
                progress: Callable[[str], None] | None = None) -> Figure:
    from ctxbench.service.demo import demo_files, offline
    from ctxbench.service.options import LaunchOptions
    from ctxbench.service.session import WorkbenchSession

    files = demo_files()
    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-timeline-") as tmp:
        options = LaunchOptions(db_path=Path(tmp) / "demo.db", repo=files.repo, import_file=files.session_file,
                                warm_embedder=False)
        session = WorkbenchSession(options, offline(config))
        try:
            session.open()
            if progress is not None:
                progress("indexing the demo repository")
            session.attach_repository(lambda p: None)
            session.settle()
            settings = dataclasses.replace(session.stored_settings(), budget=WHATIF_BUDGET)
            what_if = session.timeline.what_if("", session.last_user_group(), session.tools_tokens())
            step = config.ui.budget_step
            budgets = [WHATIF_BUDGET + step * ((i % 8) - 4) for i in range(steps)]  # the slider walks around 32k
            what_if.plan(settings)  # what the screen does when it opens
            samples, used = [], []
            for budget in budgets:
                t0 = time.perf_counter()
                plan = what_if.plan(dataclasses.replace(settings, budget=budget))
                samples.append(time.perf_counter() - t0)
                used.append(plan.used_tokens)
            turns = len(session.wb.messages.group_ids(session.session_id))
        finally:
            session.close()
    return _figure("what-if step at 32k (demo session)", samples, WHATIF_TARGET_MS, turns=turns,
                   mean_used_tokens=round(statistics.fmean(used)))
