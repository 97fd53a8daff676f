"""Plans asked of a workbench through its one door (``wb.planning``), for tests that name a few settings.

``plan_of(wb, sid, query, strategy="hybrid", budget=1500)`` is ``wb.planning.plan(PlanRequest(...))`` with the
session's stored settings, each named choice in place of its own, stored unless ``store=False``.
"""
from __future__ import annotations

from ctxbench.records.plan_request import NEXT_TURN, PlanRequest, SentMessage, StoredTurn, Turn
from ctxbench.records.plans import ContextPlan, PlanInputs
from ctxbench.records.retrieval import RetrievalSet
from ctxbench.records.sessions import SessionSettings
from ctxbench.service.workbench import Workbench


def request(wb: Workbench, session_id: str, query: str | None, settings: SessionSettings | None = None, *,
            mode: str | None = None, budget: int | None = None, strategy: str | None = None,
            window_groups: int | None = None, current_group: int | None = None, dropped_current: bool = False,
            before_message: int | None = None, retrieval: RetrievalSet | None = None, tools_tokens: int = 0,
            store: bool = True) -> PlanRequest:
    base = settings if settings is not None else wb.settings(session_id)
    chosen = base.with_choices(mode=mode, budget=budget, strategy=strategy, window_groups=window_groups)
    turn: Turn = NEXT_TURN
    if before_message is not None:
        turn = SentMessage(before_message)
    elif current_group is not None:
        turn = StoredTurn(current_group, dropped_current)
    return PlanRequest(session_id, query, chosen, turn, tools_tokens, retrieval, store)


def plan_of(wb: Workbench, session_id: str, query: str | None, settings: SessionSettings | None = None, *,
         mode: str | None = None, budget: int | None = None, strategy: str | None = None,
         window_groups: int | None = None, current_group: int | None = None, retrieval: RetrievalSet | None = None,
         tools_tokens: int = 0, store: bool = True) -> ContextPlan:
    return wb.planning.plan(request(wb, session_id, query, settings, mode=mode, budget=budget, strategy=strategy,
                                    window_groups=window_groups, current_group=current_group, retrieval=retrieval,
                                    tools_tokens=tools_tokens, store=store))


def inputs_of(wb: Workbench, session_id: str, query: str | None, settings: SessionSettings | None = None, *,
                mode: str | None = None, budget: int | None = None, strategy: str | None = None,
                window_groups: int | None = None, current_group: int | None = None, dropped_current: bool = False,
                before_message: int | None = None, retrieval: RetrievalSet | None = None,
                tools_tokens: int = 0) -> PlanInputs:
    return wb.planning.inputs(request(wb, session_id, query, settings, mode=mode, budget=budget, strategy=strategy,
                                      window_groups=window_groups, current_group=current_group,
                                      dropped_current=dropped_current, before_message=before_message,
                                      retrieval=retrieval, tools_tokens=tools_tokens))
