"""The suggested pins a plan view lists: the model's own and activation's (``llm.suggestions``), else the best-scored
symbol cards the plan left out although they are above the relevance floor."""
from __future__ import annotations

from typing import Collection

from ctxbench.llm.ports import UnitOfWork
from ctxbench.records.plans import ContextPlan, Pin, PlanItem
from ctxbench.records.views import Suggestion

CARD_LEFT_OUT = ("over_budget", "card_limit")  # reasons a relevant card can miss a plan (budget, the mode's cards)


def plan_suggestions(workbench: UnitOfWork, session_id: str, plan: ContextPlan, pins: tuple[Pin, ...],
                     rejected: Collection[str]) -> tuple[Suggestion, ...]:
    """Items worth pinning: the model's own (``suggest_pins``, open until the user decides) first,
    then high activation; with neither, the best-scored symbol cards the plan left out although they are
    above the relevance floor (cut by the budget or the mode's card limit). The best few
    (``activation.max_suggestions``) are chosen before ``rejected`` ones are taken out, so rejecting a suggestion
    never pulls up a weaker one."""
    from ctxbench.llm.suggestions import open_suggestions

    pinned = {p.target for p in pins}
    items = {i.id: i for i in plan.items}
    found: list[Suggestion] = []
    for s in open_suggestions(workbench, session_id):
        why = f"{s.source}: {s.reason}" if s.reason and s.source == "model" else (s.reason or s.source)
        item = items.get(s.target)
        label = item.label if item is not None else s.target.replace(":", " ", 1)  # card:x -> "card x"
        found.append(Suggestion(s.target, label, float(s.score), why, tokens=item.tokens if item else 0))
    if not found:
        cards = sorted((i for i in plan.items if _left_out_but_relevant(i) and i.id not in pinned),
                       key=lambda i: (-i.score, i.id))
        found = [Suggestion(i.id, i.label, i.score, _card_suggestion_why(i), tokens=i.tokens) for i in cards]
    found = [s for s in found if s.target not in pinned][: workbench.config.planner.activation.max_suggestions]
    return tuple(s for s in found if s.target not in rejected)


def _left_out_but_relevant(item: PlanItem) -> bool:
    """A symbol card the plan excluded for room (its share, ``over_budget``, or the mode's number of cards,
    ``card_limit``), never one under the relevance floor (``below_threshold``): a suggestion says it is above it."""
    return item.kind == "symbol_card" and not item.included and item.reason in CARD_LEFT_OUT


def _card_suggestion_why(item: PlanItem) -> str:
    """Why a left-out card is suggested: what retrieval found, and why the plan had no room for it."""
    room = item.detail or item.reason.replace("_", " ")
    return f"retrieved above the relevance floor (score {item.score:.3f}), left out: {room}"
