"""The last benchmark results as the workbench shows them (``/bench``): recall per strategy and budget, speed."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecallRow:
    strategy: str  # a history strategy, "default", or a plain baseline
    kind: str  # ctxbench | default | baseline
    roles: str
    recalls: tuple[tuple[int, float], ...]  # (budget, evidence recall)
    plan_p95_ms: float | None  # the slowest budget's p95 plan time (ctxbench rows)
    is_strategy: str = ""  # for the default row: the strategy it is


@dataclass(frozen=True)
class PerfRow:
    name: str
    value: str  # measured, with its unit
    target: str  # the target, with its unit ("" when there is none)
    meets: bool | None


@dataclass(frozen=True)
class BenchResults:
    folder: str
    recall: tuple[RecallRow, ...] = ()
    budgets: tuple[int, ...] = ()
    recall_source: str = ""  # conversations, questions, when
    perf: tuple[PerfRow, ...] = ()
    perf_source: str = ""  # machine, load average, when
    problems: tuple[str, ...] = ()  # files that could not be read

    @property
    def empty(self) -> bool:
        return not self.recall and not self.perf
