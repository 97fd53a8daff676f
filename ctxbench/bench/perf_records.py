"""What the phase groups of ``ctxbench bench perf`` share: the context they run in and the timing of a phase."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ctxbench.config import Config


@dataclass(frozen=True)
class PhaseTiming:
    name: str
    runs: tuple[float, ...]  # wall-clock seconds of each run
    target_s: float | None = None
    detail: tuple[tuple[str, Any], ...] = ()
    cpu_runs: tuple[float, ...] = ()  # process CPU seconds of each run (steadier on a shared machine)

    @property
    def median_s(self) -> float:
        return statistics.median(self.runs) if self.runs else 0.0

    @property
    def best_s(self) -> float:
        return min(self.runs) if self.runs else 0.0

    @property
    def cpu_median_s(self) -> float | None:
        return statistics.median(self.cpu_runs) if self.cpu_runs else None

    @property
    def meets(self) -> bool | None:
        return None if self.target_s is None else self.median_s <= self.target_s

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "median_s": round(self.median_s, 4),
            "best_s": round(self.best_s, 4),
            "runs_s": [round(r, 4) for r in self.runs],
            **({"cpu_median_s": round(self.cpu_median_s, 4)} if self.cpu_runs else {}),
            "target_s": self.target_s,
            "meets": self.meets,
            **({"detail": dict(self.detail)} if self.detail else {}),
        }


@dataclass
class PerfContext:
    source: Path  # the repository measured (never written to)
    repo: Path  # its scratch copy
    workdir: Path
    config: Config
    repeat: int
    progress: Callable[[str], None]
    shared: dict[str, Any] = field(default_factory=dict)
