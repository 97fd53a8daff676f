"""Messages the engine workers post to the screens. Workers never touch widgets: they post these.

Every payload is a record of ``ctxbench.records`` (or a plain string): a turn's events arrive one by one
in :class:`TurnProgress`, each carrying the very event the service yielded.
"""
from __future__ import annotations

from textual.message import Message

from ctxbench.records.turns import TurnEvent, TurnPlanned
from ctxbench.records.views import PlanView, Progress, ReplayPage, SessionSnapshot


class SessionLoaded(Message):
    """The session is open: its id, title, settings and history."""

    def __init__(self, snapshot: SessionSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class HistoryChanged(Message):
    """Messages were dropped, removed or restored: the chat pane re-reads the history."""

    def __init__(self, snapshot: SessionSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class PlanReady(Message):
    """A plan was built (a replan after a setting or an action, or a plan of a running turn); ``request`` numbers
    the replan it answers (``SessionLink.plan``; 0: the session's first plan)."""

    def __init__(self, view: PlanView, request: int = 0) -> None:
        super().__init__()
        self.view = view
        self.request = request


class PlanFailed(Message):
    def __init__(self, error: str, request: int = 0) -> None:
        super().__init__()
        self.error = error
        self.request = request


class StatusChanged(Message):
    """One slot of the status line (``index``, ``embedder``, ``turn``) changed."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress


class RetrievalReady(Message):
    """The code index (``semantic=False``) or the embedder too (``semantic=True``) is ready: replan."""

    def __init__(self, semantic: bool) -> None:
        super().__init__()
        self.semantic = semantic


class ActionDone(Message):
    """An engine action (pin, drop, undo, …) finished: its note for the user, and the new history when it
    changed the session's messages."""

    def __init__(self, note: str | None, history: SessionSnapshot | None = None) -> None:
        super().__init__()
        self.note = note
        self.history = history


class Notice(Message):
    """Text for the user (command output, errors from the engine)."""

    def __init__(self, text: str, severity: str = "information") -> None:
        super().__init__()
        self.text = text
        self.severity = severity


class ShowText(Message):
    """Text read in a worker, to show in a viewer (a listing, a turn's messages, an item's preview)."""

    def __init__(self, title: str, body: str, language: str = "text", subtitle: str = "", wrap: bool = True) -> None:
        super().__init__()
        self.title = title
        self.body = body
        self.language = language
        self.subtitle = subtitle
        self.wrap = wrap


class TurnProgress(Message):
    """One event of a running turn (or ``/context rebuild``), as the service yielded it."""

    def __init__(self, local_id: int, event: TurnEvent | TurnPlanned) -> None:
        super().__init__()
        self.local_id = local_id
        self.event = event


class TurnCrashed(Message):
    """The turn's worker raised: the turn ends with this error (the service ends every turn it runs)."""

    def __init__(self, local_id: int, error: str) -> None:
        super().__init__()
        self.local_id = local_id
        self.error = error


class ReplayReady(Message):
    """A replayed turn's plan is built, for the settings key it was asked for."""

    def __init__(self, key: tuple, page: ReplayPage) -> None:
        super().__init__()
        self.key = key  # (turn, mode, budget, strategy, window_groups)
        self.page = page
