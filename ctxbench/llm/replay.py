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

from operator import attrgetter, countOf
from typing import Iterator

from ctxbench.llm.ports import UnitOfWork
from ctxbench.planner.cache import payload_units, shared_prefix_tokens
from ctxbench.records.messages import Message
from ctxbench.records.plan_request import PlanRequest, SentMessage
from ctxbench.records.views import ReplayStep


_STATUS = attrgetter("status")


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
    """Yield one :class:`ReplayStep` per user turn, oldest first (only turn ``only_turn`` when given), as each is
    planned: a long session's first steps come at once. Each plan is the one the turn's user message got when it
    was sent (a ``PlanRequest`` for the ``SentMessage``): the history before it, its keyword and similarity rankings
    those of that history. Each step says how many tokens its plan shares as a prefix with the previous turn's plan
    (``planner.cache``)."""
    previous = None
    for turn, user in enumerate(workbench.turn_starts(session_id), start=1):
        if only_turn is not None and turn != only_turn:
            continue
        settings = workbench.settings(session_id).with_choices(mode=mode, budget=budget, strategy=strategy,
                                                               window_groups=window_groups)
        request = PlanRequest(session_id, None, settings, SentMessage(user.id), tools_tokens)
        inputs = workbench.planning.inputs(request)
        plan = workbench.planning.build(inputs, store=store)
        units = payload_units(plan)
        yield ReplayStep(turn, user.group_id, user, plan, countOf(map(_STATUS, inputs.history), "active"),
                         shared_prefix_tokens(previous, units))
        previous = units
