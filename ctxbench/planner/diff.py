"""The diff of two ContextPlans (pure): what entered, what left, what moved section or changed tokens.

Items are matched by their candidate id (``group:12``, ``atom:12:40``, ``card:pkg.f``, ``pin:p3``, ``state``…).
The current turn and the items that are there in every plan (system prompt, tool definitions) are compared
like any other: a longer current turn is a change. Counting for the summary: symbol cards and turns
(distinct groups of history atoms); everything else is an item.
"""
from __future__ import annotations

from ctxbench.records.diffs import DiffItem, ItemSide, PlanDiff
from ctxbench.records.plans import ContextPlan, PlanItem
from ctxbench.records.item_refs import ItemRef

_TURN_KINDS = ("history_atom",)


def _side(item: PlanItem | None) -> ItemSide | None:
    return ItemSide(item.section, item.tokens, item.included, item.reason) if item is not None else None


def _turn_of(item_id: str) -> str:
    group = ItemRef.parse(item_id).group_id
    return str(group) if group is not None else item_id


def _counts(items: tuple[DiffItem, ...]) -> tuple[int, int, int]:
    cards = sum(1 for i in items if i.kind == "symbol_card")
    turns = len({_turn_of(i.id) for i in items if i.kind in _TURN_KINDS})
    other = sum(1 for i in items if i.kind not in _TURN_KINDS and i.kind != "symbol_card")
    return cards, turns, other


def _summary(entered: tuple[DiffItem, ...], left: tuple[DiffItem, ...], tokens_delta: int) -> str:
    parts: list[str] = []
    for (plus, minus), noun in zip(zip(_counts(entered), _counts(left)), ("card", "turn", "item")):
        if plus:
            parts.append(f"+{plus} {noun}{'s' if plus != 1 else ''}")
        if minus:
            parts.append(f"−{minus} {noun}{'s' if minus != 1 else ''}")
    parts.append(f"{tokens_delta:+,} tok")
    return ", ".join(parts)


def diff_plans(before: ContextPlan, after: ContextPlan) -> PlanDiff:
    """What changed from ``before`` to ``after``; every item says its section, tokens and reason on both sides."""
    old = {i.id: i for i in before.items}
    new = {i.id: i for i in after.items}
    entered: list[DiffItem] = []
    left: list[DiffItem] = []
    changed: list[DiffItem] = []
    for item_id, item in new.items():
        was = old.get(item_id)
        was_in = was is not None and was.included
        if item.included and not was_in:
            entered.append(DiffItem(item_id, item.kind, item.label, _side(was), _side(item)))
        elif item.included and was is not None and (was.section != item.section or was.tokens != item.tokens):
            changed.append(DiffItem(item_id, item.kind, item.label, _side(was), _side(item)))
    entered_tokens = sum(i.after.tokens for i in entered if i.after)
    for item_id, was in old.items():
        item = new.get(item_id)
        if was.included and (item is None or not item.included):
            why = ""
            if item is not None and item.reason == "over_budget" and entered:
                why = (f"{len(entered)} item{'s' if len(entered) != 1 else ''} entered "
                       f"({entered_tokens:,} tok) and took its place")
            left.append(DiffItem(item_id, was.kind, was.label, _side(was), _side(item), why))
    delta = after.used_tokens - before.used_tokens
    return PlanDiff(before.plan_id, after.plan_id, before.used_tokens, after.used_tokens, tuple(entered), tuple(left),
                    tuple(changed), _summary(tuple(entered), tuple(left), delta))
