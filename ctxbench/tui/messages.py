"""Messages the engine workers post to the UI. Workers never touch widgets: they post these."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


class SessionLoaded(Message):
    """The session is open: its id, title, settings and history."""

    def __init__(self, snapshot: Any) -> None:  # bridge.SessionSnapshot
        super().__init__()
        self.snapshot = snapshot


class HistoryChanged(Message):
    """Messages were dropped, removed or restored: the chat pane re-reads the history."""

    def __init__(self, snapshot: Any) -> None:
        super().__init__()
        self.snapshot = snapshot


class PlanReady(Message):
    """A plan was built (a replan after a setting changed, or the plan of a new turn)."""

    def __init__(self, view: Any, generation: int, requested_at: float = 0.0) -> None:  # bridge.PlanView
        super().__init__()
        self.view = view
        self.generation = generation
        self.requested_at = requested_at


class PlanFailed(Message):
    def __init__(self, error: str, generation: int) -> None:
        super().__init__()
        self.error = error
        self.generation = generation


@dataclass(frozen=True)
class StatusUpdate:
    """One slot of the status line (``index``, ``embedder``, ``turn``): replaced on each update."""

    slot: str
    text: str
    state: str = "busy"  # busy | ready | error | idle
    progress: float | None = None  # 0..1 when known


class Status(Message):
    def __init__(self, update: StatusUpdate) -> None:
        super().__init__()
        self.update = update


class TurnStarted(Message):
    """The user's message is stored; its group id is known."""

    def __init__(self, user_message: Any, local_id: int) -> None:
        super().__init__()
        self.user_message = user_message
        self.local_id = local_id


class ReplyChunk(Message):
    def __init__(self, local_id: int, text: str) -> None:
        super().__init__()
        self.local_id = local_id
        self.text = text


class ToolEvent(Message):
    """A tool call or a tool result inside a running turn (the tool loop arrives with the model loop)."""

    def __init__(self, local_id: int, message: Any) -> None:
        super().__init__()
        self.local_id = local_id
        self.message = message


class TurnFinished(Message):
    def __init__(self, local_id: int, reply: Any = None, error: str = "", cancelled: bool = False) -> None:
        super().__init__()
        self.local_id = local_id
        self.reply = reply
        self.error = error
        self.cancelled = cancelled


class Notice(Message):
    """Text for the user (command output, errors from the engine)."""

    def __init__(self, text: str, severity: str = "information") -> None:
        super().__init__()
        self.text = text
        self.severity = severity


class RetrievalReady(Message):
    """The code index (and later the embedder) is ready: plans may now carry cards."""

    def __init__(self, semantic: bool) -> None:
        super().__init__()
        self.semantic = semantic


class UsageReported(Message):
    """A model call of a running turn came back: estimated vs reported prompt tokens (llm.events.UsageCheck)."""

    def __init__(self, local_id: int, check: Any) -> None:
        super().__init__()
        self.local_id = local_id
        self.check = check


class StateStored(Message):
    """A new ``### STATE`` block is the session's state (from a reply or ``/context rebuild``)."""

    def __init__(self, block: str) -> None:
        super().__init__()
        self.block = block


class ReplayReady(Message):
    """A replayed turn's plan is built (``llm.replay.ReplayStep``, or an error line)."""

    def __init__(self, key: tuple, total: int, step: Any = None, error: str = "") -> None:
        super().__init__()
        self.key = key  # (turn, mode, budget, strategy, window_groups)
        self.total = total  # user turns in the session
        self.step = step
        self.error = error
