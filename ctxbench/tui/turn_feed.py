"""Turns on screen: starting one (or ``/context rebuild``), each event the service yields applied to the chat
pane and the status line, and its end.

:class:`TurnFeed` keeps what a turn has shown so far (its reply, its error, whether it was cancelled)
and, for the whole app run, the usage checks of every model call and the last ``### STATE`` stored.
The main screen hands it every :class:`~ctxbench.tui.messages.TurnProgress`.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from ctxbench.records.messages import Message
from ctxbench.records.turns import (
    AssistantStored,
    ReplyDelta,
    Retrying,
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
from ctxbench.records.views import Progress
from ctxbench.tui.host import TurnHost
from ctxbench.tui.present import CANCELLED_EARLY, model_label


@dataclass
class TurnState:
    """What one turn has shown so far."""

    rebuild: bool = False  # a /context rebuild, not a turn of the history
    text: str = ""  # what the user sent
    reply: Message | None = None  # the last stored assistant message
    error: str = ""
    cancelled: bool = False


class TurnFeed:
    def __init__(self, host: TurnHost) -> None:
        self.host = host
        self._local = itertools.count(1)
        self._turns: dict[int, TurnState] = {}
        self.usage_checks: list[UsageCheck] = []  # every model call's estimated vs reported prompt tokens
        self.state_block = ""  # the last ### STATE stored while the app ran

    # -- starting -----------------------------------------------------------------------------------------
    def _busy(self) -> bool:
        if not self.host.link.open:
            self.host.notify("the session is still opening", severity="warning")
            return True
        if self.host.link.turn_running:
            self.host.notify("a reply is still arriving; esc cancels it", severity="warning")
            return True
        if self.host.link.options.watch:
            self.host.notify("a proxied conversation: type in your assistant; here you watch and steer it",
                             severity="warning")
            return True
        return False

    async def send(self, text: str) -> None:
        """The user's turn: shown at once, run in a worker."""
        if self._busy():
            return
        local = next(self._local)
        self._turns[local] = TurnState(text=text)
        await self.host.chat.add_pending_turn(local, text)
        self.host.link.run_turn(local, text)

    async def rebuild_state(self) -> None:
        """``/context rebuild``: the model rewrites the ``### STATE`` from the current window, streamed into the
        chat like a reply; the plan and the meter pick the new state up."""
        if self._busy():
            return
        local = next(self._local)
        self._turns[local] = TurnState(rebuild=True)
        label = model_label(self.host.config.llm)
        model = "the " + label if label == "offline model" else label
        await self.host.chat.add_pending_rebuild(
            local, f"↻ /context rebuild: asking {model} for a fresh ### STATE from the current window (esc cancels)")
        self._turn_status("rebuilding the state…")
        self.host.link.run_turn(local, "", rebuild=True)

    def _turn_status(self, text: str) -> None:
        self.host.status.set_slot(Progress("turn", text))

    async def apply(self, local_id: int, event: TurnEvent | TurnPlanned) -> None:
        turn = self._turns.setdefault(local_id, TurnState())
        chat = self.host.chat
        match event:
            case TurnStarted():
                chat.confirm_turn(local_id, event.user_message.group_id)
                self._turn_status("thinking…")
            case TurnPlanned():
                await self.host.show_plan(event.view)
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
                if event.kind == "over_budget":  # refused before anything was sent: the text is the user's again
                    self.host.give_back(turn.text)
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
        """The turn is over: finish its reply (partial when cut off), say how it ended, replan."""
        turn = self._turns.pop(local_id, TurnState())
        host = self.host
        host.link.turn_ended()
        host.status.set_slot(Progress("turn", "", "idle"))
        await host.chat.finish_reply(
            local_id, partial=turn.cancelled or bool(turn.error), error=turn.error, cancelled=turn.cancelled,
            cancel_note="⊘ rebuild cancelled; the state is unchanged" if turn.rebuild else CANCELLED_EARLY,
            rebuild=turn.rebuild)
        if turn.cancelled:
            stored = turn.reply is not None and turn.reply.partial
            host.notify("reply cancelled; the partial reply is stored" if stored else
                        ("rebuild cancelled" if turn.rebuild else "reply cancelled"), severity="warning")
        elif turn.rebuild and not turn.error:
            host.notify("state rebuilt from the current window", timeout=2)
        host.request_plan()  # new state, activation, leases
