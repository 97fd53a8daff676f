"""What every history strategy is given: the plan's inputs and config, the whole plan's budget, a place for notes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ctxbench.config import PlannerConfig
from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.records.plans import PlanInputs


@dataclass
class StrategyContext:
    inputs: PlanInputs
    config: PlannerConfig
    plan_budget: int  # the whole plan's budget (levels scale their shares by it)
    notes: list[str] = field(default_factory=list)


Strategy = Callable[[HistorySelection, Budget, StrategyContext], None]
