"""The planner: builds a ContextPlan — a deterministic, budgeted selection of context candidates,
each included or excluded with a reason — from PlanInputs.

Public API: ``build_plan(inputs, config, tokenizer)`` and ``plan_id(inputs, config, tokenizer_name)``;
pin lifecycle in ``ctxbench.planner.pins``; activation scores in ``ctxbench.planner.activation``.
Engine module: never imports textual or rich.
"""
from __future__ import annotations

from ctxbench.planner.plan import build_plan, plan_id

__all__ = ["build_plan", "plan_id"]
