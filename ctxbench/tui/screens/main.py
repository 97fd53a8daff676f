"""The main screen: chat pane, budget meter, Context Mode indicator and the input — layout and wiring.

The engine is reached through a SessionLink (thread workers posting messages back), slash commands through a
SlashController, a turn's events through a TurnFeed. The screen holds the settings it shows as one SessionSettings
value: a key changes the indicator at once and asks for a plan under the new value; the plan catches up."""
from __future__ import annotations

import dataclasses
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input

from ctxbench.config import Config
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.views import PlanView
from ctxbench.service.options import LaunchOptions
from ctxbench.tui import messages as msg, present
from ctxbench.tui.keymap import MAIN_KEYS, bindings, describe_key
from ctxbench.tui.meter import meter_state, with_budget
from ctxbench.tui.screens.on_top import ScreensOnTop
from ctxbench.tui.session_link import SessionLink
from ctxbench.tui.slash import SlashController
from ctxbench.tui.turn_feed import TurnFeed
from ctxbench.tui.widgets.budget_meter import BudgetMeter
from ctxbench.tui.widgets.chat import ChatPane
from ctxbench.tui.widgets.mode_indicator import ModeIndicator
from ctxbench.tui.widgets.prompt import PromptInput
from ctxbench.tui.widgets.stable_footer import StableFooter
from ctxbench.tui.widgets.status_line import StatusLine


class MainScreen(Screen[None]):
    BINDINGS = bindings(MAIN_KEYS)

    def __init__(self, options: LaunchOptions, config: Config) -> None:
        super().__init__(id="main")
        self.options = options
        self.config = config
        self.link = SessionLink(self, options, config)
        self.slash = SlashController(self)
        self.feed = TurnFeed(self)
        self.watcher = None  # following a proxied conversation (not `watch`: Textual's DOMNode.watch)
        if options.watch:  # its module loads only then
            from ctxbench.tui.watch import WatchController

            self.watcher = WatchController(self)
        self.view: PlanView | None = None  # the plan the meter and the overlay show
        self.settings: SessionSettings | None = None  # what the indicator shows and the next plan uses
        self.session_title = ""
        self.ready = False  # the session is open and its history shown
        self.history_shown: Any = None  # the worker showing the opened session's history
        self.screens = ScreensOnTop(self)
        self.branch = ""  # the active branch's name
        self.task_name = ""  # the open task's name
        self._warned = False  # the auto-compact warning was announced (again once it clears and comes back)
        self._over = False  # the plan's mandatory items exceed the budget (announced when it starts)
        self._preview_timer: Timer | None = None
        self._draft = ""
        self.model_label = present.status_model(config, bool(options.watch))  # the model the status line names

    # -- layout -------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        yield ChatPane(max_groups=self.config.ui.chat_groups, truncation=self.config.planner.truncation, id="chat")
        yield BudgetMeter(id="meter")
        with Horizontal(id="input-row"):
            yield ModeIndicator(self.options.mode or self.config.planner.default_mode, id="mode")
            yield PromptInput(id="prompt")
        yield StableFooter()

    chat = property(lambda self: self.query_one(ChatPane))
    meter = property(lambda self: self.query_one(BudgetMeter))
    status = property(lambda self: self.query_one(StatusLine))
    prompt = property(lambda self: self.query_one(PromptInput))
    session = property(lambda self: self.link.session)  # the open WorkbenchSession (None while it opens)
    turn_running = property(lambda self: self.link.turn_running)

    def on_mount(self) -> None:
        self.status.title = "ctxbench"
        self.status.detail = f"opening session… · {self.model_label}"
        self.prompt.focus()
        self.call_after_refresh(self.link.start)  # after the first frame: the engine's imports would delay it

    def on_unmount(self) -> None:
        self.link.close()

    # -- the session --------------------------------------------------------------------------------------
    @on(msg.SessionLoaded)
    def _session_loaded(self, message: msg.SessionLoaded) -> None:
        snap = message.snapshot
        self.session_title = snap.title or snap.session_id
        self._take(snap)
        if self.watcher is not None:
            self.chat.follow_proxy()
        # mounting a long history keeps the UI thread a while: a task of its own, so the screen shows the first plan
        # and the warm-up's progress (and takes keys) meanwhile instead of after it
        self.history_shown = self.run_worker(self._show_opened(snap), group="history", name="show history")

    async def _show_opened(self, snap) -> None:
        await self.chat.show_history(snap.history, snap.dropped)
        if not snap.history and self.watcher is None:
            await self.chat.add_note(present.new_session_note(dict(self.config.ui.keymap)))
        if snap.notice:
            await self.chat.add_note(snap.notice)
        self.ready = True
        if self.watcher is not None:
            self.watcher.start()

    def _take(self, snap) -> None:  # the session's (or a branch's) own settings, branch and task: indicator, status
        self.settings, self.branch, self.task_name = snap.settings, snap.branch, snap.task
        self.query_one(ModeIndicator).mode = snap.settings.mode
        self._status_detail()

    def _status_detail(self) -> None:
        repo = self.session.wb.repo if self.session is not None else None
        self.status.title = self.session_title
        self.status.detail = present.status_detail(self.settings, repo.name if repo else "", self.session_title,
                                                   self.model_label, self.branch, self.task_name)

    def show_status(self, *, model: str | None = None, task: str | None = None) -> None:  # named at once
        self.model_label, self.task_name = model or self.model_label, task or self.task_name
        self._status_detail()

    @on(msg.HistoryChanged)
    async def _history_changed(self, message: msg.HistoryChanged) -> None:
        await self.chat.show_history(message.snapshot.history, message.snapshot.dropped)

    @on(msg.StatusChanged)
    def _status_changed(self, message: msg.StatusChanged) -> None:
        self.status.set_slot(message.progress)

    @on(msg.RetrievalReady)
    def _retrieval_ready(self, message: msg.RetrievalReady) -> None:
        self.request_plan()

    @on(msg.Notice)
    def _notice(self, message: msg.Notice) -> None:
        self.notify(message.text, severity=message.severity)  # type: ignore[arg-type]

    @on(msg.ShowText)
    def _show_text(self, message: msg.ShowText) -> None:
        self.screens.viewer(message.title, message.body, message.language, message.subtitle, message.wrap)

    # -- plans --------------------------------------------------------------------------------------------
    def request_plan(self) -> None:
        """Plan under the settings shown, for the draft being typed or the latest turn."""
        if self.settings is None or not self.link.open:
            return
        self.meter.pending = True
        self.link.plan(self.settings, self._draft)

    @on(msg.PlanReady)
    async def _plan_ready(self, message: msg.PlanReady) -> None:
        settled = self.link.latest(message.request) and self.link.settled
        self.meter.pending = not settled  # an older replan's plan: shown, its figures still marked pending
        await self.show_plan(message.view, settled=settled)

    async def show_plan(self, view: PlanView, *, settled: bool = True) -> None:
        self.view = view
        self.meter.state = meter_state(view.plan, view.compact_warning, view.counts)
        if settled and view.task != self.task_name:  # a task started or ended (a STATE goal opens one in a turn)
            self.task_name = view.task
            self._status_detail()
        if bool(view.compact_warning) != self._warned:
            self._warned = bool(view.compact_warning)
            if self._warned:
                self.notify(view.compact_warning, title="auto-compact", severity="warning")
        if view.plan.over_budget != self._over:
            self._over = view.plan.over_budget
            if self._over:  # a message would be refused: say so now, not only when it is sent
                self.notify(present.over_budget_notice(view.plan), title="over budget", severity="warning")
        if view.group_id is not None:
            await self.chat.set_attachment(view.group_id, self.attachment_text(view))
        self.screens.show_view(view, settled=settled)

    @on(msg.PlanFailed)
    def _plan_failed(self, message: msg.PlanFailed) -> None:
        if self.link.latest(message.request):
            self.meter.pending = False
        self.notify(message.error, title="planning failed", severity="error")

    def attachment_text(self, view: PlanView) -> str:
        line = present.attachment_for(view.plan).text(describe_key("ctxbench.overlay", dict(self.config.ui.keymap)))
        return line + present.diff_line(view.diff, view.group_id)

    def action_open_diff(self, group_id: int) -> None:  # the diff line under a turn was clicked
        self.screens.turn_diff(group_id)

    @on(msg.ActionDone)
    async def _action_done(self, message: msg.ActionDone) -> None:
        self.link.done_acting()
        if message.note:
            self.notify(message.note)
        if message.history is not None:
            self._take(message.history)  # a fork or a switch brings the branch's own settings
            await self.chat.show_history(message.history.history, message.history.dropped)
        self.request_plan()

    # -- settings -----------------------------------------------------------------------------------------
    def change_settings(self, **changes: Any) -> None:
        """Show new settings at once (indicator, status line) and plan under them."""
        if "mode" in changes:
            self.query_one(ModeIndicator).mode = changes["mode"]
        if self.settings is None:
            return  # still opening: the session's own settings arrive with it
        self.settings = dataclasses.replace(self.settings, **changes)
        if "budget" in changes:
            # the new budget at once, against the tokens the shown plan uses (pending until the replan arrives)
            self.meter.state = with_budget(self.meter.state, self.settings.budget)
            self.notify(f"budget {present.tok(self.settings.budget)} tokens", timeout=1.5)
        self._status_detail()
        self.request_plan()

    def action_cycle_mode(self) -> None:
        current = self.settings.mode if self.settings is not None else self.query_one(ModeIndicator).mode
        self.change_settings(mode=present.next_mode(current, self.config.planner.mode_names))

    def action_budget_step(self, direction: int) -> None:
        step = self.config.ui.budget_step
        current = self.settings.budget if self.settings is not None else self.config.default_budget_tokens()
        self.change_settings(budget=max(step, current + direction * step))

    # -- screens on top -----------------------------------------------------------------------------------
    @property
    def draft(self) -> str:
        return self._draft

    def action_show_payload(self) -> None:
        self.run_slash("/context show")

    def action_open_overlay(self) -> None:
        self.screens.open_overlay()

    def action_focus_input(self) -> None:
        self.prompt.focus()

    def action_toggle_steer(self) -> None:
        from ctxbench.tui.watch import toggle_steer

        toggle_steer(self)

    # -- input --------------------------------------------------------------------------------------------
    def run_slash(self, line: str) -> None:
        self.slash.run(line)

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
        if not self.config.ui.live_preview or not self.link.open:
            return
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_timer = self.set_timer(self.config.ui.preview_delay_s, self.request_plan)

    # -- turns --------------------------------------------------------------------------------------------
    async def send(self, text: str) -> None:
        if self.history_shown is not None:  # a turn goes below the history: wait for it to be on the screen
            await self.history_shown.wait()
        await self.feed.send(text)

    def request_rebuild(self) -> None:
        """``/context rebuild`` from a command: start it once the current message is handled."""
        self.call_later(self.feed.rebuild_state)

    def give_back(self, text: str) -> None:
        """A message that was not sent goes back into the input (unless something was typed since)."""
        if not self.prompt.value:
            self.prompt.value = text

    @on(msg.TurnProgress)
    async def _turn_progress(self, message: msg.TurnProgress) -> None:
        await self.feed.apply(message.local_id, message.event)

    @on(msg.TurnCrashed)
    async def _turn_crashed(self, message: msg.TurnCrashed) -> None:
        await self.feed.crashed(message.local_id, message.error)

    def action_cancel_turn(self) -> None:
        self.link.cancel_turn()
