"""A session's timelines: branches, the diff of a turn's plan against the previous turn's, what a budget
would buy, and the export of a branch as OpenAI JSONL.

Branch-scoped state (pins, leases, activation, ``### STATE``, scratchpad, settings) is described in
:mod:`ctxbench.store.branches`. What-if plans are built, never stored: a user keeps a setting by applying it.
"""
from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ctxbench.records.diffs import PlanDiff
from ctxbench.records.errors import UnknownBranch
from ctxbench.records.messages import Message
from ctxbench.records.plan_request import NEXT_TURN, PlanRequest, StoredTurn
from ctxbench.records.plans import ContextPlan, PlanInputs
from ctxbench.records.sessions import BranchSummary, SessionSettings
from ctxbench.service.workbench import Workbench

PLAN_CACHE = 16  # stored plans kept in memory for diffs (the previous turn's is asked for on every replan)
CURVE_START = 1000  # the what-if chart starts at this budget and doubles up to the model's context limit


@dataclass(frozen=True)
class CurvePoint:
    """What a plan includes at one budget: tokens per section and how many items."""

    budget: int
    used: int
    sections: tuple[tuple[str, int], ...]
    items: int
    over_budget: bool


class Timeline:
    """Branches, diffs, what-if and export for one session of a workbench."""

    def __init__(self, workbench: Workbench, session_id: str) -> None:
        self.wb = workbench
        self.session_id = session_id
        self._plans: OrderedDict[str, ContextPlan] = OrderedDict()

    # -- branches -----------------------------------------------------------------------------------------
    def branches(self) -> list[BranchSummary]:
        return self.wb.branches.summaries(self.session_id)

    def active(self) -> BranchSummary:
        return next(b for b in self.branches() if b.active)

    def fork(self, name: str | None = None, at_turn: int | None = None) -> BranchSummary:
        """Fork the active branch (at the end of turn ``at_turn``, default: now) and switch to the fork."""
        self.wb.branches.fork(self.session_id, name or self.wb.branches.next_name(self.session_id), at_turn=at_turn)
        return self.active()

    def switch(self, name: str) -> BranchSummary:
        try:
            self.wb.branches.switch(self.session_id, name)
        except UnknownBranch:
            known = ", ".join(b.name for b in self.branches())
            raise UnknownBranch(f"no branch {name!r}; branches: {known}") from None
        return self.active()

    # -- diffs --------------------------------------------------------------------------------------------
    def stored_plan(self, plan_id: str) -> ContextPlan:
        plan = self._plans.get(plan_id)
        if plan is None:
            plan = self.wb.plans.get(plan_id)
            self._plans[plan_id] = plan
            while len(self._plans) > PLAN_CACHE:
                self._plans.popitem(last=False)
        return plan

    def previous_turn_diff(self, plan: ContextPlan, group_id: int | None) -> PlanDiff | None:
        """``plan`` against the last stored plan of the turn before ``group_id`` (the latest turn for a draft) on
        the active branch's timeline; None when there is none."""
        visible = set(self.wb.messages.group_ids(self.session_id))
        before = self.wb.plans.turn_plan_before(self.wb.branches.lineage_ids(self.session_id), visible, group_id)
        if before is None or before == plan.plan_id:
            return None
        return compare(self.stored_plan(before), plan)

    # -- what-if ------------------------------------------------------------------------------------------
    def what_if(self, draft: str, group_id: int | None, tools_tokens: int) -> "WhatIf":
        """Plans of the next call under other settings, for one what-if screen (what it reads is read once)."""
        return WhatIf(self.wb, self.session_id, draft, group_id, tools_tokens)

    # -- export -------------------------------------------------------------------------------------------
    def export_lines(self, branch: str | None = None, *, include_dropped: bool = False) -> list[str]:
        """A branch (default: the active one) as OpenAI JSONL lines: what ``ctxbench import`` reads back as the
        same messages, turns and tool calls."""
        found = self.wb.branches.find(self.session_id, branch) if branch else self.wb.branches.active(self.session_id)
        messages = self.wb.messages.of_branch(self.session_id, found.id, include_dropped=include_dropped)
        return [json.dumps(export_message(m), ensure_ascii=False) for m in messages]


def export_message(m: Message) -> dict[str, Any]:
    """One message as the OpenAI importer reads it: the chat message, plus its parsing strategy and flags."""
    out = m.to_openai()
    if m.role == "tool" and m.tool_name:
        out["name"] = m.tool_name
    out["parsing_strategy"] = m.parsing_strategy
    if m.flags:
        out["flags"] = list(m.flags)
    return out


def compare(before: ContextPlan, after: ContextPlan) -> PlanDiff:
    """What changed from one plan to another (``planner.diff.diff_plans``), for front ends."""
    from ctxbench.planner.diff import diff_plans  # the planner loads with the first plan, not with the app

    return diff_plans(before, after)


def diff_stored(workbench: Workbench, before_id: str, after_id: str) -> PlanDiff:
    """The diff of any two stored plans (of any sessions and branches)."""
    return compare(workbench.plans.get(before_id), workbench.plans.get(after_id))


class WhatIf:
    """The plans the next call would get under other settings, never stored.

    The session does not change while a what-if screen is open, so what a plan reads from the store (history,
    pins, state, rankings) is read once per mode / strategy / window and reused for every budget; only the
    RetrievalSet's folded scaffold and the selection depend on the budget.
    """

    def __init__(self, workbench: Workbench, session_id: str, draft: str, group_id: int | None, tools_tokens: int) -> None:
        self.wb = workbench
        self.session_id = session_id
        self.draft = draft
        self.group_id = None if draft.strip() else group_id
        self.tools_tokens = tools_tokens
        self._inputs: dict[SessionSettings, PlanInputs] = {}

    def plan(self, settings: SessionSettings) -> ContextPlan:
        """The plan under ``settings`` (not stored), built by the planning door as the next call's would be."""
        key = dataclasses.replace(settings, budget=0)
        inputs = self._inputs.get(key)
        if inputs is None:
            query = self.draft if self.draft.strip() else (None if self.group_id is not None else "")
            turn = StoredTurn(self.group_id) if self.group_id is not None else NEXT_TURN
            inputs = self.wb.planning.inputs(PlanRequest(self.session_id, query, settings, turn, self.tools_tokens))
            self._inputs[key] = inputs
        checked = self.wb.rules.check(settings)
        retrieval = self.wb.planning.retrieval(PlanRequest(self.session_id, settings=checked), inputs)
        inputs = dataclasses.replace(inputs, budget=checked.budget, retrieval=retrieval)
        return self.wb.planning.build(inputs, store=False)

    def curve(self, settings: SessionSettings, limit: int) -> tuple[CurvePoint, ...]:
        """What the next call would include at budgets from ``CURVE_START`` doubling up to ``limit`` (and at
        ``limit``): tokens per section and items, so a user sees where more budget stops buying anything."""
        budgets: list[int] = []
        b = CURVE_START
        while b < limit:
            budgets.append(b)
            b *= 2
        budgets.append(limit)
        points = []
        for budget in budgets:
            plan = self.plan(dataclasses.replace(settings, budget=budget))
            points.append(CurvePoint(budget, plan.used_tokens, tuple(plan.sections), len(plan.included),
                                     plan.over_budget))
        return tuple(points)
