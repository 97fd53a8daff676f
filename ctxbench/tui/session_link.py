"""The screens' link to the engine: every call to the session service runs in a thread worker.

A :class:`SessionLink` belongs to one screen (its ``host``): it runs the service's calls in that
screen's thread workers and the results come back as typed messages (``tui.messages``) posted to
the host. Nothing here touches a widget.

- planning runs in an exclusive worker group: a newer request cancels the older one, and a cancelled
  worker's plan is dropped, so the meter only ever shows the newest request's plan;
- actions (pin, drop, undo, …) run in their own group and then replan, so a plan never misses an action that
  was asked for before it; the screen shows an action at once and counts it (``acting``) until its replan
  is asked for, so its figures stay marked pending until a plan that includes it arrives;
- a turn (or ``/context rebuild``) streams the service's events, one message per event.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from textual.dom import DOMNode
from textual.message import Message
from textual.worker import get_current_worker

from ctxbench.config import Config
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.views import Progress
from ctxbench.service import phase_log
from ctxbench.service.options import LaunchOptions
from ctxbench.tui import messages as msg

if TYPE_CHECKING:  # the engine loads in the first worker, never before the first paint
    from ctxbench.service.session import CancelToken, WorkbenchSession



Action = Callable[["WorkbenchSession"], "str | None"]  # what the action says to the user


def problem(exc: BaseException) -> str:
    """An engine error in the user's words: what the refusal says (a bad argument, something that is not
    there), the file and the reason for a file that cannot be used; only an unexpected error (a bug) keeps its
    type name."""
    if isinstance(exc, (ValueError, LookupError)):
        return str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot use {exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return f"{type(exc).__name__}: {exc}"


class SessionLink:
    """The open session of one screen, reached only through workers."""

    def __init__(self, host: DOMNode, options: LaunchOptions, config: Config) -> None:
        self.host = host
        self.options = options
        self.config = config
        self.session: "WorkbenchSession | None" = None  # set once the session is open
        self.turn_cancel: "CancelToken | None" = None  # the running turn's cancel token (None: no turn runs)
        self.requested = 0  # the number of the newest replan asked for (its PlanReady carries it)
        self.acting = 0  # actions asked for whose ActionDone the host has not handled yet

    @property
    def open(self) -> bool:
        return self.session is not None

    def _post(self, message: Message) -> None:
        self.host.post_message(message)

    # -- opening ------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Open the session, plan its latest turn, then index the repository and warm the model (called once the
        first frame is on the screen)."""
        phase_log.mark("first paint")
        self.host.run_worker(self._open, thread=True, group="engine", name="open session", exit_on_error=False)

    def _open(self) -> None:
        from ctxbench.service.proxy.session import open_session_class

        session = open_session_class(self.options.watch)(self.options, self.config)
        try:
            session.start_embedder()  # the model loads beside the opening, the first plan and the indexing
        except Exception:  # noqa: BLE001 - a model that cannot be made: the warm-up says why, in its slot
            pass
        try:
            snapshot = session.open()
        except Exception as exc:  # noqa: BLE001 - shown in the status line; nothing else can run
            self._post(msg.StatusChanged(Progress("index", f"cannot open the session: {problem(exc)}", "error")))
            return
        self.session = session
        phase_log.mark("session open")
        self._post(msg.SessionLoaded(snapshot))
        try:
            self._post(msg.PlanReady(session.plan()))
            phase_log.mark("first plan")
        except Exception as exc:  # noqa: BLE001 - engine errors are shown, the app stays up
            self._post(msg.PlanFailed(problem(exc)))
        else:  # while the user reads it: what it shares with the stored plans, so the next turn's is stored at once
            try:  # (a first plan that failed would only fail again here)
                session.recall_stored()
            except Exception:  # noqa: BLE001 - the next store then writes what it needs itself
                pass
        session.settle()  # the history and the planner's caches now live as long as the app
        try:
            session.attach_repository(lambda progress: self._post(msg.StatusChanged(progress)),
                                      on_keyword_ready=lambda: self._post(msg.RetrievalReady(False)),
                                      on_semantic_ready=lambda: self._post(msg.RetrievalReady(True)))
            session.settle()  # the code index and vectors are long-lived too
        except Exception as exc:  # noqa: BLE001 - shown in the status line; plans go on without cards
            self._post(msg.StatusChanged(Progress("index", f"indexing failed: {problem(exc)}",
                                                  "error")))

    def close(self) -> None:
        """Leaving: stop a running reply, then close the session's store."""
        if self.turn_cancel is not None:
            self.turn_cancel.cancel()
        if self.session is not None:
            self.session.close()

    # -- plans --------------------------------------------------------------------------------------------
    def plan(self, settings: SessionSettings, draft: str) -> None:
        """Replan under ``settings`` (stored when they changed) for ``draft`` or the latest turn."""
        if self.session is None:
            return
        session = self.session
        self.requested += 1
        request = self.requested

        def work() -> None:
            worker = get_current_worker()
            try:
                view = session.plan(draft, settings)
            except Exception as exc:  # noqa: BLE001 - engine errors are shown, the app stays up
                if not worker.is_cancelled:
                    self._post(msg.PlanFailed(problem(exc), request))
                return
            if not worker.is_cancelled:  # a newer request is planning: this plan is stale
                self._post(msg.PlanReady(view, request))

        self.host.run_worker(work, thread=True, group="plan", name="plan", exclusive=True, exit_on_error=False)

    def latest(self, request: int) -> bool:
        """``request`` answers the newest replan asked for (an older one's plan is shown, but stays pending)."""
        return request >= self.requested

    @property
    def settled(self) -> bool:
        """No action is running: once the newest replan is shown, the screen shows the engine's own figures."""
        return self.acting == 0

    # -- actions ------------------------------------------------------------------------------------------
    def _ready(self) -> "WorkbenchSession | None":
        """The open session, or None (and a notice saying so) while it opens."""
        if self.session is None:
            self._post(msg.Notice("the session is still opening", "warning"))
        return self.session

    def act(self, action: Action, *, history: bool = False) -> None:
        """Run ``action`` on the session, then post what it says (and the new history when it changed it)."""
        session = self._ready()
        if session is None:
            return
        self.acting += 1  # back down when the host handles its ActionDone (``done_acting``)

        def work() -> None:
            try:
                said = action(session)
                snapshot = session.snapshot() if history else None
            except Exception as exc:  # noqa: BLE001 - engine errors are shown, the app stays up
                self._post(msg.Notice(problem(exc), "error"))
                self._post(msg.ActionDone(None))
                return
            self._post(msg.ActionDone(said, snapshot))

        self.host.run_worker(work, thread=True, group="action", name="action", exit_on_error=False)

    def done_acting(self) -> None:
        """The host handled an action's ActionDone (and asked for the replan that shows it)."""
        self.acting = max(0, self.acting - 1)

    def read(self, reader: Callable[["WorkbenchSession"], msg.ShowText]) -> None:
        """Read something for a viewer in a worker (a listing, a turn's messages, an item in full)."""
        session = self._ready()
        if session is None:
            return

        def work() -> None:
            try:
                self._post(reader(session))
            except Exception as exc:  # noqa: BLE001 - shown to the user
                self._post(msg.Notice(problem(exc), "error"))

        self.host.run_worker(work, thread=True, group="view", name="read", exit_on_error=False)

    # -- turns --------------------------------------------------------------------------------------------
    @property
    def turn_running(self) -> bool:
        return self.turn_cancel is not None

    def run_turn(self, local_id: int, text: str, *, rebuild: bool = False) -> None:
        """Run the user's turn (or ``/context rebuild``) and stream its events to the host."""
        from ctxbench.service.session import CancelToken

        assert self.session is not None
        session = self.session
        cancel = CancelToken()
        self.turn_cancel = cancel

        def work() -> None:
            try:
                events = session.rebuild_state(cancel) if rebuild else session.run_turn(text, cancel)
                for event in events:
                    self._post(msg.TurnProgress(local_id, event))
            except Exception as exc:  # noqa: BLE001 - the turn's failure is shown in the chat
                self._post(msg.TurnCrashed(local_id, f"{type(exc).__name__}: {exc}"))

        self.host.run_worker(work, thread=True, group="turn", name="rebuild state" if rebuild else "turn",
                             exit_on_error=False)

    def turn_ended(self) -> None:
        self.turn_cancel = None

    def cancel_turn(self) -> None:
        if self.turn_cancel is not None:
            self.turn_cancel.cancel()
