"""What every history strategy is given: the plan's inputs and config, the whole plan's budget, a place for notes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ctxbench.config import PlannerConfig
from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.records.plans import PlanInputs


@dataclass
class StrategyContext:
    inputs: PlanInputs
    config: PlannerConfig
    plan_budget: int  # the whole plan's budget (levels scale their shares by it)
    notes: list[str] = field(default_factory=list)
    # summary candidates and the protected turns each brings along; a strategy that places them itself
    # (``places_summaries``) gets them undecided, every other strategy after the planner placed them
    summaries: list[Any] = field(default_factory=list)
    summary_kept: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # the previous plan's history atoms the strategy kept, in that plan's order (the cache-keeping selection): the
    # payload sends them first within their tier
    kept: tuple[str, ...] = ()


Strategy = Callable[[HistorySelection, Budget, StrategyContext], None]


def recalls_summarised(strategy: Strategy) -> bool:
    """True for a retrieval strategy (``fused``, ``semantic``, ``hybrid``): the turns a summary stands in for stay
    its candidates, recalled verbatim when the query needs them (never as recent turns)."""
    return bool(getattr(strategy, "recalls_summarised", False))


def places_summaries(strategy: Strategy) -> bool:
    """True for a strategy that puts the summaries in its own levels (``levels``)."""
    return bool(getattr(strategy, "places_summaries", False))
