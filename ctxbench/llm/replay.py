"""Replay: the plan each user turn of a session would get under a given mode, budget and strategy.

For turn *k* the planner sees what existed when the user sent that message: the history before
the turn's group, and the user's message as the current turn (not the replies that followed).
Pins, the state block, the scratchpad and memos are the session's current ones (the store keeps
state versions but not which turn saw which). Plans are built, not stored, unless asked.
"""
from __future__ import annotations

from typing import Iterator

from ctxbench.llm.ports import UnitOfWork
from ctxbench.records.messages import Message
from ctxbench.records.views import ReplayStep


def user_turns(history: tuple[Message, ...]) -> list[Message]:
    """The first user message of each group, in order."""
    seen: set[int] = set()
    out: list[Message] = []
    for m in history:
        if m.role == "user" and m.group_id not in seen:
            seen.add(m.group_id)
            out.append(m)
    return out


def replay(
    workbench: UnitOfWork,
    session_id: str,
    *,
    mode: str | None = None,
    budget: int | None = None,
    strategy: str | None = None,
    window_groups: int | None = None,
    store: bool = False,
    only_turn: int | None = None,
) -> Iterator[ReplayStep]:
    """Yield one :class:`ReplayStep` per user turn, oldest first (only turn ``only_turn`` when given), as each is
    planned: a long session's first steps come at once. Each plan's keyword and similarity rankings are those of
    the history the turn had (``plan_inputs(before_message=...)``)."""
    visible = workbench.visible_messages(session_id)
    for turn, user in enumerate(user_turns(tuple(m for m in visible if m.status == "active")), start=1):
        if only_turn is not None and turn != only_turn:
            continue
        inputs = workbench.plan_inputs(session_id, None, before_message=user.id, mode=mode, budget=budget,
                                       strategy=strategy, window_groups=window_groups)
        plan = workbench.build_plan(inputs, store=store)
        yield ReplayStep(turn, user.group_id, user, plan, sum(1 for m in inputs.history if m.status == "active"))
