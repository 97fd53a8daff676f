"""The main screen: chat pane, budget meter, Context Mode indicator and the input.

Engine work (opening the session, planning, indexing, the model) runs in thread workers
that post messages back (``ctxbench.tui.messages``); this screen never waits on the engine.
Setting changes show at once (indicator, pending meter) and the plan catches up.
"""
from __future__ import annotations

import itertools
import time
from functools import partial
from typing import Any, Callable

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input

from ctxbench.heap import settle as settle_heap
from ctxbench.tui import messages as msg
from ctxbench.tui.bridge import Bridge, LaunchOptions, PlanView, TurnSink
from ctxbench.tui.commands import CommandError, help_text, parse
from ctxbench.tui.keymap import MAIN_KEYS, bindings, describe_key
from ctxbench.tui.present import attachment_for, meter_state, mode_label, model_label, next_mode, tok
from ctxbench.tui.widgets.budget_meter import BudgetMeter
from ctxbench.tui.widgets.chat import CANCELLED_EARLY, ChatPane
from ctxbench.tui.widgets.mode_indicator import ModeIndicator
from ctxbench.tui.widgets.prompt import PromptInput
from ctxbench.tui.widgets.status_line import StatusLine

SETTING_KEYS = ("mode", "budget", "strategy", "window_groups")


class MainScreen(Screen[None]):
    BINDINGS = bindings(MAIN_KEYS)

    mode: reactive[str] = reactive("light", init=False)

    def __init__(self, options: LaunchOptions, config, *, first_paint_hook=None) -> None:
        super().__init__(id="main")
        self._first_paint_hook = first_paint_hook
        self.options = options
        self.config = config
        self.bridge: Bridge | None = None
        self.view: PlanView | None = None
        self.desired: dict[str, Any] = {}
        self.session_title = ""
        self._gen = itertools.count(1)
        self._requested = 0
        self._applied = 0
        self._local = itertools.count(1)
        self._turn_cancel: Any = None  # the running turn's cancel token (None: no turn is running)
        self._rebuilds: set[int] = set()  # local ids of running /context rebuild requests
        self.usage_checks: list[Any] = []  # every model call's estimated vs reported prompt tokens
        self.state_block = ""  # the last ### STATE stored while the app ran
        self._preview_timer: Timer | None = None
        self._draft = ""
        self._last_history_len = 0
        # figures for `ctxbench bench ui`
        self.mode_pressed_at = 0.0
        self.indicator_updated_at = 0.0
        self.meter_updated_at = 0.0
        self.meter_painted_at = 0.0
        self.meter_painted_generation = 0
        self.plan_latencies: list[float] = []
        self.ready = False

    # -- layout ---------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        ui = self.config.ui
        yield StatusLine(id="status")
        yield ChatPane(max_groups=ui.chat_groups, truncation=self.config.planner.truncation, id="chat")
        yield BudgetMeter(id="meter")
        with Horizontal(id="input-row"):
            yield ModeIndicator(self.options.mode or self.config.planner.default_mode, id="mode")
            yield PromptInput(id="prompt")
        yield Footer()

    @property
    def chat(self) -> ChatPane:
        return self.query_one(ChatPane)

    @property
    def meter(self) -> BudgetMeter:
        return self.query_one(BudgetMeter)

    @property
    def status(self) -> StatusLine:
        return self.query_one(StatusLine)

    @property
    def prompt(self) -> PromptInput:
        return self.query_one(PromptInput)

    def on_mount(self) -> None:
        self.status.title = "ctxbench"
        self.status.detail = f"opening session… · {model_label(self.config.llm)}"
        self.set_reactive(MainScreen.mode, self.query_one(ModeIndicator).mode)
        self.prompt.focus()
        if self._first_paint_hook is not None:
            self.call_after_refresh(self._first_paint_hook, self.app)
        self.run_worker(self._open_session, thread=True, group="engine", name="open session",
                        exit_on_error=False)

    def on_unmount(self) -> None:
        """Leaving: stop a running reply, then close the session's runner and store."""
        if self._turn_cancel is not None:
            self._turn_cancel.cancel()
        if self.bridge is not None:
            self.bridge.close()

    # -- opening ------------------------------------------------------------------------------------
    def _open_session(self) -> None:
        bridge = Bridge(self.options, self.config)
        with bridge.lock:
            snapshot = bridge.open()
        self.bridge = bridge
        self.post_message(msg.SessionLoaded(snapshot))
        gen = self._next_gen()
        with bridge.lock:
            view = bridge.plan()
        self.post_message(msg.PlanReady(view, gen))
        settle_heap()  # the history and the planner's caches now live as long as the app
        if bridge.wb.repo is not None and self.options.index_repo and self.options.retriever is None:
            self._warm_up(bridge)

    def _warm_up(self, bridge: Bridge) -> None:
        def status(slot: str, text: str, progress: float | None, state: str = "busy") -> None:
            self.post_message(msg.Status(msg.StatusUpdate(slot, text, state, progress)))

        from ctxbench.tui.warmup import prepare_retrieval

        try:
            ready = prepare_retrieval(bridge, status,
                                      on_keyword_ready=lambda: self.post_message(msg.RetrievalReady(False)),
                                      warm_embedder=self.options.warm_embedder)
        except Exception as exc:  # noqa: BLE001 - shown in the status line; plans go on without cards
            status("index", f"indexing failed: {type(exc).__name__}: {exc}", None, "error")
            return
        settle_heap()  # the code index and vectors are long-lived too
        if ready and bridge.semantic_ready:
            self.post_message(msg.RetrievalReady(True))

    @on(msg.SessionLoaded)
    async def _session_loaded(self, message: msg.SessionLoaded) -> None:
        snap = message.snapshot
        self.session_title = snap.title or snap.session_id
        s = snap.settings
        self.desired = {"mode": s.mode, "budget": s.budget, "strategy": s.strategy, "window_groups": s.window_groups}
        self.mode = s.mode
        self._status_detail()
        await self.chat.show_history(snap.history, snap.dropped)
        if not snap.history:
            keymap = dict(self.config.ui.keymap)
            await self.chat.add_note(
                f"A new session. Type a message and press Enter. "
                f"{describe_key('ctxbench.mode_cycle', keymap)} cycles the Context Mode (Off → Light → Heavy), "
                f"{describe_key('ctxbench.overlay', keymap)} shows every candidate and why, "
                f"/help lists the commands.")
        self._last_history_len = len(snap.history)
        self.ready = True

    def _status_detail(self) -> None:
        d = self.desired
        parts = []
        if self.bridge is not None and self.bridge.wb.repo is not None:
            name = self.bridge.wb.repo.name
            if name not in self.session_title:
                parts.append(name)
        parts.append(str(d.get("strategy", "")))
        parts.append("all turns" if not d.get("window_groups") else f"last {d['window_groups']} turns")
        parts.append(model_label(self.config.llm))
        self.status.title = self.session_title
        self.status.detail = " · ".join(parts)

    @on(msg.HistoryChanged)
    async def _history_changed(self, message: msg.HistoryChanged) -> None:
        snap = message.snapshot
        await self.chat.show_history(snap.history, snap.dropped)

    # -- plans --------------------------------------------------------------------------------------
    def _next_gen(self) -> int:
        gen = next(self._gen)
        self._requested = max(self._requested, gen)
        return gen

    def request_plan(self, *, then: Callable[[Bridge], str | None] | None = None, reason: str = "") -> None:
        """Bring the stored settings in line with the screen, run ``then`` (an engine action), replan."""
        if self.bridge is None:
            return
        gen = self._next_gen()
        self.meter.pending = True
        requested_at = time.perf_counter()
        desired = dict(self.desired)
        draft = self._draft
        self.run_worker(partial(self._plan_worker, gen, desired, draft, then, requested_at), thread=True,
                        group="plan", name=f"plan {gen} {reason}", exit_on_error=False)

    def _plan_worker(self, gen: int, desired: dict[str, Any], draft: str,
                     then: Callable[[Bridge], str | None] | None, requested_at: float) -> None:
        bridge = self.bridge
        assert bridge is not None
        note = None
        try:
            with bridge.lock:
                bridge.sync_settings(desired if gen == self._requested else {})
                if then is not None:
                    note = then(bridge)
                if gen != self._requested:
                    return  # a newer request will plan
                view = bridge.plan(draft)
        except Exception as exc:  # noqa: BLE001 - engine errors are shown, the app stays up
            self.post_message(msg.PlanFailed(f"{type(exc).__name__}: {exc}", gen))
            return
        if note:
            self.post_message(msg.Notice(note))
        self.post_message(msg.PlanReady(view, gen, requested_at))

    @on(msg.PlanReady)
    async def _plan_ready(self, message: msg.PlanReady) -> None:
        if message.generation < self._applied:
            return
        self._applied = message.generation
        view = message.view
        self.view = view
        if message.generation >= self._requested:
            self.meter.pending = False
        self.meter.state = meter_state(view.plan)
        self.meter_updated_at = time.perf_counter()
        self.meter.call_after_refresh(self._meter_painted, message.generation)
        if message.requested_at:
            self.plan_latencies.append(self.meter_updated_at - message.requested_at)
        if view.group_id is not None:
            await self.chat.set_attachment(view.group_id, self.attachment_text(view))
        overlay = self._overlay()
        if overlay is not None:
            overlay.show_view(view)

    def _meter_painted(self, generation: int) -> None:
        self.meter_painted_at = time.perf_counter()
        self.meter_painted_generation = generation

    @on(msg.PlanFailed)
    def _plan_failed(self, message: msg.PlanFailed) -> None:
        if message.generation >= self._requested:
            self.meter.pending = False
        self.notify(message.error, title="planning failed", severity="error")

    def attachment_text(self, view: PlanView) -> str:
        keymap = dict(self.config.ui.keymap)
        return attachment_for(view.plan).text(describe_key("ctxbench.overlay", keymap))

    def _overlay(self):
        from ctxbench.tui.screens.overlay import ContextOverlay

        screen = self.app.screen
        return screen if isinstance(screen, ContextOverlay) else None

    # -- status -------------------------------------------------------------------------------------
    @on(msg.Status)
    def _status(self, message: msg.Status) -> None:
        self.status.set_slot(message.update)

    @on(msg.RetrievalReady)
    def _retrieval_ready(self, message: msg.RetrievalReady) -> None:
        self.request_plan(reason="retrieval ready")

    @on(msg.Notice)
    def _notice(self, message: msg.Notice) -> None:
        self.notify(message.text, severity=message.severity)  # type: ignore[arg-type]

    # -- mode and budget ----------------------------------------------------------------------------
    def watch_mode(self, mode: str) -> None:
        self.query_one(ModeIndicator).mode = mode

    def action_cycle_mode(self) -> None:
        self.mode_pressed_at = time.perf_counter()
        self.set_mode(next_mode(self.mode, self.config.planner.mode_names))
        self.indicator_updated_at = time.perf_counter()

    def set_mode(self, mode: str) -> None:
        self.config.planner.mode(mode)  # raises ConfigError for an unknown mode
        self.mode = mode
        self.desired["mode"] = mode
        self.request_plan(reason="mode")

    def action_budget_step(self, direction: int) -> None:
        step = self.config.ui.budget_step
        current = int(self.desired.get("budget") or self.config.planner.default_budget)
        self.set_budget(max(step, current + direction * step))

    def set_budget(self, budget: int) -> None:
        if budget <= 0:
            raise ValueError("the budget is a positive number of tokens")
        self.desired["budget"] = budget
        self.notify(f"budget {tok(budget)} tokens", timeout=1.5)
        self.request_plan(reason="budget")

    # -- overlay and views --------------------------------------------------------------------------
    def action_open_overlay(self) -> None:
        from ctxbench.tui.screens.overlay import ContextOverlay

        if self._overlay() is None:
            self.app.push_screen(ContextOverlay(self.view))

    def action_show_payload(self) -> None:
        self.cmd_context_show(())

    def action_focus_input(self) -> None:
        self.prompt.focus()

    def preview_item(self, row) -> None:
        """Enter in the overlay: the candidate in full (read in a worker, shown in a viewer)."""
        view = self.view
        if view is None or self.bridge is None:
            return
        bridge = self.bridge

        def read() -> None:
            if row.item is not None:
                with bridge.lock:
                    body, language = bridge.item_content(row.item, view.plan)
                title = f"{row.item.id} · {row.item.kind} · {tok(row.item.tokens)} tok · {row.item.reason}"
            else:
                s = row.suggestion
                body, language = s.content or s.label, "text"
                if s.target.startswith("card:"):
                    with bridge.lock:
                        body = bridge.card_text(s.target[5:], view.plan) or body
                    language = "python"
                title = f"suggested pin {s.target} · {s.why}"
            self.app.call_from_thread(self._show_viewer, title, body, language)

        self.run_worker(read, thread=True, group="view", exit_on_error=False)

    def _show_viewer(self, title: str, body: str, language: str, subtitle: str = "", wrap: bool = True) -> None:
        from ctxbench.tui.screens.viewer import ViewerScreen

        self.app.push_screen(ViewerScreen(title, body, language=language, subtitle=subtitle, wrap=wrap))

    def overlay_action(self, action: str, row, **kwargs: Any) -> None:
        """An overlay key: change pins or drops in a worker, then replan (the overlay shows the new plan)."""
        view = self.view
        plan = view.plan if view is not None else None
        target = row.target
        label = row.item.label if row.item is not None else (row.suggestion.label if row.suggestion else target)

        def run(bridge: Bridge) -> str | None:
            if action == "pin_sticky":
                pin = bridge.pin_item(target, "sticky", label=label, plan=plan)
                return f"pinned {target} sticky ({pin.id})"
            if action == "lease":
                scope = kwargs.get("scope", "turn")
                pin = bridge.pin_item(target, "leased", scope=scope, label=label, plan=plan)
                return f"leased {target} for this {scope} ({pin.ttl} turns)"
            if action == "unpin":
                return f"unpinned {target}" if bridge.unpin(target) else f"{target} was not pinned"
            if action == "drop":
                return bridge.drop(target)
            if action == "accept" and row.suggestion is not None:
                pin = bridge.accept(row.suggestion, plan)
                return f"accepted suggestion: {target} pinned sticky ({pin.id})"
            if action == "reject" and row.suggestion is not None:
                bridge.reject(row.suggestion)
                return f"rejected suggestion {target}"
            return None

        self.request_plan(then=self._with_history_refresh(run), reason=action)

    def _with_history_refresh(self, fn: Callable[[Bridge], str | None]) -> Callable[[Bridge], str | None]:
        """Run ``fn`` and, when it changed the session's messages, send the chat pane the new history."""

        def wrapped(bridge: Bridge) -> str | None:
            note = fn(bridge)
            snapshot = bridge.snapshot()
            self.post_message(msg.HistoryChanged(snapshot))
            return note

        return wrapped

    # -- input --------------------------------------------------------------------------------------
    @on(Input.Submitted, "#prompt")
    async def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        event.input.value = ""
        self._draft = ""
        if text.startswith("/"):
            self.run_slash(text)
            return
        await self.send(text)

    @on(Input.Changed, "#prompt")
    def _changed(self, event: Input.Changed) -> None:
        draft = event.value if not event.value.startswith("/") else ""
        if draft.strip() == self._draft.strip():
            return
        self._draft = draft
        if not self.config.ui.live_preview or self.bridge is None:
            return
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_timer = self.set_timer(self.config.ui.preview_delay_s,
                                             lambda: self.request_plan(reason="draft"))

    @property
    def _turn_running(self) -> bool:
        return self._turn_cancel is not None

    def _busy(self) -> bool:
        if self.bridge is None:
            self.notify("the session is still opening", severity="warning")
            return True
        if self._turn_running:
            self.notify("a reply is still arriving; esc cancels it", severity="warning")
            return True
        return False

    def _start_turn(self) -> tuple[int, Any] | None:
        """A turn's local id and cancel token (a turn is running from now on); None (and a notice) when busy."""
        if self._busy():
            return None
        from ctxbench.llm.client import CancelToken

        cancel = CancelToken()
        self._turn_cancel = cancel
        return next(self._local), cancel

    async def send(self, text: str) -> None:
        started = self._start_turn()
        if started is None:
            return
        local, cancel = started
        await self.chat.add_pending_turn(local, text)
        self.run_worker(partial(self._turn_worker, local, text, cancel), thread=True, group="turn",
                        name="turn", exit_on_error=False)

    async def rebuild_state(self) -> None:
        """``/context rebuild``: the model rewrites the ``### STATE`` from the current window, streamed
        into the chat like a reply; the plan and the meter pick the new state up."""
        started = self._start_turn()
        if started is None:
            return
        local, cancel = started
        self._rebuilds.add(local)
        await self.chat.add_pending_rebuild(
            local, f"↻ /context rebuild: asking {self._model_name()} for a fresh ### STATE from the current "
                   f"window (esc cancels)")
        self.status.set_slot(msg.StatusUpdate("turn", "rebuilding the state…"))
        self.run_worker(partial(self._turn_worker, local, "", cancel, rebuild=True), thread=True, group="turn",
                        name="rebuild state", exit_on_error=False)

    def _model_name(self) -> str:
        label = model_label(self.config.llm)
        return "the " + label if label == "offline model" else label

    def _turn_worker(self, local: int, text: str, cancel: Any, rebuild: bool = False) -> None:
        bridge = self.bridge
        assert bridge is not None

        def planned(view: PlanView) -> None:
            self.post_message(msg.PlanReady(view, self._next_gen()))

        sink = TurnSink(
            user_stored=lambda m: self.post_message(msg.TurnStarted(m, local)),
            planned=planned,
            text=lambda s: self.post_message(msg.ReplyChunk(local, s)),
            tool=lambda m: self.post_message(msg.ToolEvent(local, m)),
            status=lambda s: self.post_message(msg.Status(msg.StatusUpdate("turn", s))),
            usage=lambda check: self.post_message(msg.UsageReported(local, check)),
            state=lambda block: self.post_message(msg.StateStored(block)),
        )
        try:
            outcome = bridge.rebuild_state(sink, cancel) if rebuild else bridge.run_turn(text, sink, cancel)
        except Exception as exc:  # noqa: BLE001 - the turn's failure is shown in the chat
            self.post_message(msg.TurnFinished(local, None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(msg.TurnFinished(local, outcome.reply, outcome.error, outcome.cancelled))

    @on(msg.TurnStarted)
    def _turn_started(self, message: msg.TurnStarted) -> None:
        self.chat.confirm_turn(message.local_id, message.user_message.group_id)
        self.status.set_slot(msg.StatusUpdate("turn", "thinking…"))

    @on(msg.ReplyChunk)
    async def _reply_chunk(self, message: msg.ReplyChunk) -> None:
        self.status.set_slot(msg.StatusUpdate("turn", "replying… (esc cancels)"))
        await self.chat.append_reply(message.local_id, message.text)

    @on(msg.ToolEvent)
    async def _tool_event(self, message: msg.ToolEvent) -> None:
        await self.chat.add_tool_message(message.local_id, message.message)

    @on(msg.UsageReported)
    def _usage_reported(self, message: msg.UsageReported) -> None:
        self.chat.add_usage(message.local_id, message.check)
        self.usage_checks.append(message.check)

    @on(msg.StateStored)
    def _state_stored(self, message: msg.StateStored) -> None:
        self.state_block = message.block

    @on(msg.TurnFinished)
    async def _turn_finished(self, message: msg.TurnFinished) -> None:
        self._turn_cancel = None
        rebuild = message.local_id in self._rebuilds
        self._rebuilds.discard(message.local_id)
        self.status.set_slot(msg.StatusUpdate("turn", "", "idle"))
        partial_reply = message.cancelled or bool(message.error)
        await self.chat.finish_reply(
            message.local_id, partial=partial_reply, error=message.error, cancelled=message.cancelled,
            cancel_note="⊘ rebuild cancelled; the state is unchanged" if rebuild else CANCELLED_EARLY,
            rebuild=rebuild)
        if message.cancelled:
            stored = message.reply is not None and getattr(message.reply, "partial", False)
            self.notify("reply cancelled; the partial reply is stored" if stored else
                        ("rebuild cancelled" if rebuild else "reply cancelled"), severity="warning")
        elif rebuild and not message.error:
            self.notify("state rebuilt from the current window", timeout=2)
        self.request_plan(reason="after rebuild" if rebuild else "after turn")  # new state, activation, leases

    def action_cancel_turn(self) -> None:
        if self._turn_cancel is not None:
            self._turn_cancel.cancel()

    # -- slash commands -----------------------------------------------------------------------------
    def run_slash(self, line: str) -> None:
        try:
            parsed = parse(line)
        except CommandError as exc:
            self.notify(str(exc), title="command", severity="error")
            self.last_command_error = str(exc)
            return
        handler = getattr(self, f"cmd_{parsed.command.handler}")
        try:
            handler(parsed.args)
        except (ValueError, LookupError) as exc:
            self.notify(f"{parsed.command.usage}: {exc}", title="command", severity="error")
            self.last_command_error = str(exc)

    last_command_error = ""

    def _need_bridge(self) -> Bridge:
        if self.bridge is None:
            raise LookupError("the session is still opening")
        return self.bridge

    @staticmethod
    def _int(args: tuple[str, ...], what: str) -> int:
        if len(args) != 1:
            raise ValueError(f"expected one {what}")
        try:
            return int(args[0].removeprefix("group:").replace(",", "").replace("_", ""))
        except ValueError:
            raise ValueError(f"{args[0]!r} is not a number") from None

    def cmd_context_window(self, args: tuple[str, ...]) -> None:
        n = self._int(args, "number of turns")
        if n < 0:
            raise ValueError("the window is 0 (all turns) or more")
        self.desired["window_groups"] = n
        self._status_detail()
        self.request_plan(reason="window")

    def cmd_context_show(self, args: tuple[str, ...]) -> None:
        if self.view is None:
            raise LookupError("no plan yet")
        import json

        from ctxbench.tui.bridge import render_messages

        plan = self.view.plan
        payload = plan.messages()
        subtitle = (f"{len(payload)} messages · {tok(plan.used_tokens)} / {tok(plan.budget)} tok · "
                    f"{mode_label(plan.mode)} · {plan.strategy} · esc closes")
        if args and args[0] == "json":
            self._show_viewer(f"Payload of {plan.plan_id} (JSON)", json.dumps(payload, indent=2, ensure_ascii=False),
                              "json", subtitle)
        else:
            self._show_viewer(f"Payload of {plan.plan_id}", render_messages(payload), "text", subtitle)

    def cmd_context_rebuild(self, args: tuple[str, ...]) -> None:
        self._need_bridge()
        self.call_later(self.rebuild_state)

    def cmd_replay(self, args: tuple[str, ...]) -> None:
        from ctxbench.tui.screens.replay import ReplayScreen

        bridge = self._need_bridge()
        start = self._int(args, "turn number") if args else 1
        settings = {k: self.desired.get(k) for k in SETTING_KEYS}
        self.app.push_screen(ReplayScreen(bridge, settings, start=start))

    def cmd_context_overlay(self, args: tuple[str, ...]) -> None:
        self.action_open_overlay()

    def cmd_context_drop(self, args: tuple[str, ...]) -> None:
        gid = self._int(args, "turn id (GID)")
        self._need_bridge()
        self.request_plan(then=self._with_history_refresh(lambda b: b.drop(f"group:{gid}")), reason="drop")

    def cmd_context_restore(self, args: tuple[str, ...]) -> None:
        gid = self._int(args, "turn id (GID)")
        self._need_bridge()

        def restore(bridge: Bridge) -> str:
            bridge.wb.group(bridge.session_id, gid)  # raises for an unknown group
            bridge.wb.restore_group(bridge.session_id, gid)
            return f"restored turn {gid}"

        self.request_plan(then=self._with_history_refresh(restore), reason="restore")

    def _not_while_replying(self) -> None:
        if self._turn_running:
            raise ValueError("a reply is still arriving (esc cancels it); this would change the turn it belongs to")

    def cmd_undo(self, args: tuple[str, ...]) -> None:
        self._need_bridge()
        self._not_while_replying()

        def undo(bridge: Bridge) -> str:
            gid = bridge.wb.undo(bridge.session_id)
            if gid is None:
                return "nothing to undo"
            if bridge.wb.state_block(bridge.session_id).strip():
                # seed 001: the state came from replies that may be gone; the model rewrites it
                self.app.call_from_thread(self.call_later, self.rebuild_state)
                return f"removed the last turn ({gid}); rebuilding the state"
            return f"removed the last turn ({gid})"

        self.request_plan(then=self._with_history_refresh(undo), reason="undo")

    def cmd_message_list(self, args: tuple[str, ...]) -> None:
        bridge = self._need_bridge()
        limit = self._int(args, "number of turns") if args else 0

        def read() -> None:
            with bridge.lock:
                messages = bridge.wb.all_messages(bridge.session_id)
            body = message_listing(messages, limit)
            self.app.call_from_thread(self._show_viewer, "Turns of this session", body, "text",
                                      "GID · status · messages · tokens · first words — /message show GID",
                                      False)

        self.run_worker(read, thread=True, group="view", exit_on_error=False)

    def cmd_message_show(self, args: tuple[str, ...]) -> None:
        bridge = self._need_bridge()
        gid = self._int(args, "turn id (GID)")

        def read() -> None:
            from ctxbench.tui.bridge import render_messages

            try:
                with bridge.lock:
                    group = bridge.wb.group(bridge.session_id, gid)
            except Exception as exc:  # noqa: BLE001
                self.post_message(msg.Notice(f"/message show: {exc}", "error"))
                return
            body = render_messages([m.to_openai() for m in group])
            status = "dropped" if any(m.status == "dropped" for m in group) else "active"
            self.app.call_from_thread(self._show_viewer, f"Turn {gid} ({status})", body, "text")

        self.run_worker(read, thread=True, group="view", exit_on_error=False)

    def cmd_message_remove(self, args: tuple[str, ...]) -> None:
        gid = self._int(args, "turn id (GID)")
        self._need_bridge()
        self._not_while_replying()

        def remove(bridge: Bridge) -> str:
            bridge.wb.group(bridge.session_id, gid)  # raises for an unknown group
            bridge.wb.remove_group(bridge.session_id, gid)
            return f"removed turn {gid}"

        self.request_plan(then=self._with_history_refresh(remove), reason="remove")

    def cmd_pin(self, args: tuple[str, ...]) -> None:
        target = self._target(args)
        self.request_plan(then=lambda b: f"pinned {target} sticky ({b.pin_item(target, 'sticky', plan=self._plan()).id})",
                          reason="pin")

    def cmd_pin_lease(self, args: tuple[str, ...]) -> None:
        if not args:
            raise ValueError("expected a target and optionally turn|task")
        scope = args[1] if len(args) > 1 else "turn"
        if scope not in ("turn", "task"):
            raise ValueError("the lease scope is turn or task")
        target = self._target(args[:1])
        self.request_plan(
            then=lambda b: f"leased {target} for this {scope} ({b.pin_item(target, 'leased', scope=scope, plan=self._plan()).id})",
            reason="lease")

    def cmd_pin_text(self, args: tuple[str, ...]) -> None:
        if not args:
            raise ValueError("expected the text to pin")
        text = " ".join(args)
        label = text if len(text) <= 40 else text[:39] + "…"

        def pin(bridge: Bridge) -> str:
            p = bridge.wb.add_pin(bridge.session_id, f"text:{label}", "sticky", label=label, content=text)
            return f"pinned a note ({p.id})"

        self.request_plan(then=pin, reason="pin text")

    def cmd_pin_remove(self, args: tuple[str, ...]) -> None:
        if len(args) != 1:
            raise ValueError("expected a pin id, e.g. p3")
        pin_id = args[0]

        def remove(bridge: Bridge) -> str:
            if not bridge.unpin(pin_id) and not bridge.unpin(self._target((pin_id,))):
                raise ValueError(f"no pin {pin_id}")
            return f"removed pin {pin_id}"

        self.request_plan(then=remove, reason="unpin")

    def cmd_pin_list(self, args: tuple[str, ...]) -> None:
        bridge = self._need_bridge()

        def read() -> None:
            with bridge.lock:
                pins = bridge.wb.pins(bridge.session_id)
            lines = [f"{p.id:<5} {p.kind:<9} {p.target:<40} {p.scope if p.kind == 'leased' else '':<5} "
                     f"{'ttl ' + str(p.ttl) if p.kind == 'leased' else ''}  {p.label}" for p in pins]
            body = "\n".join(lines) or "no pins yet — pin from the overlay (ctrl+o) or with /pin TARGET"
            self.app.call_from_thread(self._show_viewer, "Pins", body, "text")

        self.run_worker(read, thread=True, group="view", exit_on_error=False)

    def _plan(self):
        return self.view.plan if self.view is not None else None

    @staticmethod
    def _target(args: tuple[str, ...]) -> str:
        if len(args) != 1:
            raise ValueError("expected one target: a turn id (12, group:12), card:SYMBOL or pin:ID")
        raw = args[0]
        if raw.isdigit():
            return f"group:{raw}"
        if raw.startswith(("group:", "atom:", "card:", "memo:", "text:", "pin:")):
            return raw
        raise ValueError(f"cannot pin {raw!r}: give a turn id (12), group:12 or card:SYMBOL")

    def cmd_mode(self, args: tuple[str, ...]) -> None:
        if len(args) != 1:
            raise ValueError("expected off, light or heavy")
        mode = args[0].lower()
        known = [m.name for m in self.config.planner.modes]
        if mode not in known:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(known)}")
        self.set_mode(mode)

    def cmd_budget(self, args: tuple[str, ...]) -> None:
        n = self._int(args, "number of tokens")
        self.set_budget(n)

    def cmd_strategy(self, args: tuple[str, ...]) -> None:
        from ctxbench.records.vocab import STRATEGIES

        if len(args) != 1 or args[0] not in STRATEGIES:
            raise ValueError(f"expected one of {', '.join(STRATEGIES)}")
        self.desired["strategy"] = args[0]
        self._status_detail()
        self.request_plan(reason="strategy")

    def cmd_theme(self, args: tuple[str, ...]) -> None:
        names = sorted(self.app.available_themes)
        if not args:
            self.notify(f"current: {self.app.theme}\nthemes: " + ", ".join(names), title="/theme NAME")
            return
        if args[0] not in names:
            import difflib

            close = difflib.get_close_matches(args[0], names, n=3)
            raise ValueError(f"unknown theme {args[0]!r}" + (f"; did you mean {', '.join(close)}?" if close else ""))
        self.app.theme = args[0]

    def cmd_help(self, args: tuple[str, ...]) -> None:
        self._show_viewer("Slash commands", help_text(), "text", "the same actions are in the palette (ctrl+p)")

    def cmd_quit(self, args: tuple[str, ...]) -> None:
        self.app.exit()


def message_listing(messages, limit: int = 0) -> str:
    """``/message list``: one line per turn with its status, size and first words."""
    groups: dict[int, list] = {}
    for m in messages:
        groups.setdefault(m.group_id, []).append(m)
    items = list(groups.items())
    if limit:
        items = items[-limit:]
    lines = []
    for gid, ms in items:
        status = "dropped" if any(m.status == "dropped" for m in ms) else "active"
        tokens = sum(m.tokens for m in ms)
        first = next((m for m in ms if m.role in ("user", "system")), ms[0])
        words = " ".join(first.content.split())[:70]
        tools = sum(1 for m in ms if m.role == "tool")
        extra = f" +{tools} tool" if tools else ""
        lines.append(f"{gid:>5}  {status:<7} {len(ms):>3} msg{extra:<9} {tokens:>7,} tok  {first.role}: {words}")
    return "\n".join(lines) or "no turns yet"

