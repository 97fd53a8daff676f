"""A running turn on screen: each event the service yields, applied to the chat pane and the status line.

:class:`TurnFeed` keeps what a turn has shown so far (its reply, its error, whether it was cancelled)
and, for the whole app run, the usage checks of every model call and the last ``### STATE`` stored.
The main screen hands it every :class:`~ctxbench.tui.messages.TurnProgress`; plans of the turn go to
``show_plan``, and the end of a turn to ``finished``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable

from ctxbench.records.messages import Message
from ctxbench.records.turns import (
    AssistantStored,
    Retrying,
    ReplyDelta,
    StateUpdated,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnEvent,
    TurnFailed,
    TurnFinished,
    TurnPlanned,
    TurnStarted,
    UsageCheck,
    UsageRecorded,
)
from ctxbench.records.views import PlanView, Progress
from ctxbench.tui.widgets.chat import ChatPane
from ctxbench.tui.widgets.status_line import StatusLine


@dataclass
class TurnState:
    """What one turn has shown so far."""

    rebuild: bool = False  # a /context rebuild, not a turn of the history
    reply: Message | None = None  # the last stored assistant message
    error: str = ""
    cancelled: bool = False
    usage: list[UsageCheck] = field(default_factory=list)


@dataclass(frozen=True)
class TurnOutcome:
    local_id: int
    rebuild: bool
    reply: Message | None
    error: str
    cancelled: bool


class TurnFeed:
    def __init__(self, chat: Callable[[], ChatPane], status: Callable[[], StatusLine],
                 show_plan: Callable[[PlanView], Awaitable[None]],
                 finished: Callable[[TurnOutcome], Awaitable[None]]) -> None:
        self._chat = chat
        self._status = status
        self._show_plan = show_plan
        self._finished = finished
        self._turns: dict[int, TurnState] = {}
        self.usage_checks: list[UsageCheck] = []  # every model call's estimated vs reported prompt tokens
        self.state_block = ""  # the last ### STATE stored while the app ran

    def begin(self, local_id: int, *, rebuild: bool = False) -> None:
        self._turns[local_id] = TurnState(rebuild=rebuild)

    def _turn_status(self, text: str) -> None:
        self._status().set_slot(Progress("turn", text))

    async def apply(self, local_id: int, event: TurnEvent | TurnPlanned) -> None:
        turn = self._turns.setdefault(local_id, TurnState())
        chat = self._chat()
        match event:
            case TurnStarted():
                chat.confirm_turn(local_id, event.user_message.group_id)
                self._turn_status("thinking…")
            case TurnPlanned():
                await self._show_plan(event.view)
            case ReplyDelta():
                self._turn_status("replying… (esc cancels)")
                await chat.append_reply(local_id, event.text)
            case AssistantStored():
                turn.reply = event.message
                if event.message.tool_calls:
                    await chat.add_tool_message(local_id, event.message)
            case ToolStarted():
                self._turn_status(f"running {event.call.name}…")
            case ToolFinished():
                await chat.add_tool_message(local_id, event.message)
            case Retrying():
                self._turn_status(f"retrying in {event.wait_s:.0f}s: {event.reason}")
            case UsageRecorded():
                chat.add_usage(local_id, event.usage)
                self.usage_checks.append(event.usage)
            case StateUpdated():
                self.state_block = event.state_block
            case TurnFailed():
                turn.error = event.reason
            case TurnCancelled():
                turn.cancelled = True
            case TurnFinished():
                turn.error = turn.error or (event.error if event.status == "failed" else "")
                turn.cancelled = turn.cancelled or event.status == "cancelled"
                await self.end(local_id)

    async def crashed(self, local_id: int, error: str) -> None:
        """The turn's worker raised: end the turn with ``error``."""
        self._turns.setdefault(local_id, TurnState()).error = error
        await self.end(local_id)

    async def end(self, local_id: int) -> None:
        turn = self._turns.pop(local_id, TurnState())
        self._status().set_slot(Progress("turn", "", "idle"))
        await self._finished(TurnOutcome(local_id, turn.rebuild, turn.reply, turn.error, turn.cancelled))
