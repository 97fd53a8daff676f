"""Replay: the plan each user turn of a session would get under a given mode, budget and strategy.

For turn *k* the planner sees what existed when the user sent that message: the history before
the turn's group, and the user's message as the current turn (not the replies that followed).
Pins, the state block, the scratchpad and memos are the session's current ones (the store keeps
state versions but not which turn saw which). Plans are built, not stored, unless asked.

Turns are numbered as the session's user turns, dropped ones included (a turn dropped later was
still sent: it is replayed, and the later turns see it dropped), so "turn 5 / 211" means the same
turn whatever the user dropped since. ``tools_tokens`` are the tool definitions a live call sends
beside its messages (the workbench offers them on every turn): with them a replayed plan budgets
the same prompt the live one does.
"""
from __future__ import annotations

import dataclasses
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
    tools_tokens: int = 0,
) -> Iterator[ReplayStep]:
    """Yield one :class:`ReplayStep` per user turn, oldest first (only turn ``only_turn`` when given)."""
    from ctxbench.planner import build_plan

    for turn, user in enumerate(user_turns(workbench.messages.all(session_id)), start=1):
        if only_turn is not None and turn != only_turn:
            continue
        inputs = workbench.plan_inputs(session_id, None, current_group=user.group_id, mode=mode, budget=budget,
                                       strategy=strategy, window_groups=window_groups, tools_tokens=tools_tokens,
                                       dropped_current=True)
        before = tuple(m for m in inputs.history if m.id < user.id)
        earlier_groups = {m.group_id for m in before}
        earlier = {m.id for m in before}
        # the user's message as it was sent (masked like every plan input), whatever became of it since
        sent = next((m for m in inputs.current_turn if m.id == user.id), user)
        inputs = dataclasses.replace(
            inputs,
            query=sent.content,
            history=before,
            current_turn=(dataclasses.replace(sent, status="active"),),
            keyword_ranking=tuple(g for g in inputs.keyword_ranking if g in earlier_groups),
            dropped_groups=tuple(g for g in inputs.dropped_groups if g in earlier_groups),
            message_keyword=tuple(p for p in inputs.message_keyword if p[0] in earlier),
            message_similarity=tuple(p for p in inputs.message_similarity if p[0] in earlier),
        )
        plan = build_plan(inputs, workbench.config.planner, workbench.tokenizer)
        if store:
            workbench.plans.save(inputs, plan)
        yield ReplayStep(turn, user.group_id, user, plan, sum(1 for m in before if m.status == "active"))
