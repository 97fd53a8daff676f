"""The main screen: chat pane, budget meter, Context Mode indicator and the input — layout and wiring.

The engine is reached through the screen's :class:`~ctxbench.tui.session_link.SessionLink` (thread
workers that post messages back), slash commands through the
:class:`~ctxbench.tui.slash.SlashController`, a running turn's events through the
:class:`~ctxbench.tui.turn_feed.TurnFeed`. The screen holds the settings it shows as one
:class:`~ctxbench.records.sessions.SessionSettings` value: a key changes the indicator at once and asks
for a plan under the new value; the plan catches up.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input

from ctxbench.config import Config
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.views import PlanView, Progress
from ctxbench.service.options import LaunchOptions
from ctxbench.service.text import render_messages
from ctxbench.tui import messages as msg
from ctxbench.tui.keymap import MAIN_KEYS, bindings, describe_key
from ctxbench.tui.present import attachment_for, meter_state, mode_label, model_label, next_mode, tok
from ctxbench.tui.screens.overlay import ContextOverlay
from ctxbench.tui.screens.overlay_rows import OverlayRow
from ctxbench.tui.screens.replay import ReplayScreen
from ctxbench.tui.screens.viewer import ViewerScreen
from ctxbench.tui.session_link import SessionLink
from ctxbench.tui.slash import SlashController
from ctxbench.tui.turn_feed import TurnFeed, TurnOutcome
from ctxbench.tui.widgets.budget_meter import BudgetMeter
from ctxbench.tui.widgets.bubbles import CANCELLED_EARLY
from ctxbench.tui.widgets.chat import ChatPane
from ctxbench.tui.widgets.mode_indicator import ModeIndicator
from ctxbench.tui.widgets.prompt import PromptInput
from ctxbench.tui.widgets.status_line import StatusLine


class MainScreen(Screen[None]):
    BINDINGS = bindings(MAIN_KEYS)

    def __init__(self, options: LaunchOptions, config: Config) -> None:
        super().__init__(id="main")
        self.options = options
        self.config = config
        self.link = SessionLink(self, options, config)
        self.slash = SlashController(self)
        self.feed = TurnFeed(lambda: self.chat, lambda: self.status, self._show_plan, self._turn_finished)
        self.view: PlanView | None = None  # the plan the meter and the overlay show
        self.settings: SessionSettings | None = None  # what the indicator shows and the next plan uses
        self.session_title = ""
        self.ready = False  # the session is open and its history shown
        self.overlay: ContextOverlay | None = None
        self._local = itertools.count(1)
        self._preview_timer: Timer | None = None
        self._draft = ""

    # -- layout -------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        yield ChatPane(max_groups=self.config.ui.chat_groups, truncation=self.config.planner.truncation, id="chat")
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

    @property
    def session(self):  # the open WorkbenchSession (None while it opens)
        return self.link.session

    @property
    def turn_running(self) -> bool:
        return self.link.turn_running

    @property
    def last_command_error(self) -> str:
        return self.slash.last_error

    @property
    def usage_checks(self) -> list:
        return self.feed.usage_checks

    @property
    def state_block(self) -> str:
        return self.feed.state_block

    def on_mount(self) -> None:
        self.status.title = "ctxbench"
        self.status.detail = f"opening session… · {model_label(self.config.llm)}"
        self.prompt.focus()
        self.link.start()

    def on_unmount(self) -> None:
        self.link.close()

    # -- the session --------------------------------------------------------------------------------------
    @on(msg.SessionLoaded)
    async def _session_loaded(self, message: msg.SessionLoaded) -> None:
        snap = message.snapshot
        self.session_title = snap.title or snap.session_id
        self.settings = snap.settings
        self.query_one(ModeIndicator).mode = snap.settings.mode
        self._status_detail()
        await self.chat.show_history(snap.history, snap.dropped)
        if not snap.history:
            keymap = dict(self.config.ui.keymap)
            await self.chat.add_note(
                f"A new session. Type a message and press Enter. "
                f"{describe_key('ctxbench.mode_cycle', keymap)} cycles the Context Mode (Off → Light → Heavy), "
                f"{describe_key('ctxbench.overlay', keymap)} shows every candidate and why, "
                f"/help lists the commands.")
        self.ready = True

    def _status_detail(self) -> None:
        s = self.settings
        parts = []
        repo = self.session.wb.repo if self.session is not None else None
        if repo is not None and repo.name not in self.session_title:
            parts.append(repo.name)
        if s is not None:
            parts.append(s.strategy)
            parts.append("all turns" if not s.window_groups else f"last {s.window_groups} turns")
        parts.append(model_label(self.config.llm))
        self.status.title = self.session_title
        self.status.detail = " · ".join(parts)

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
        self.show_viewer(message.title, message.body, message.language, message.subtitle, message.wrap)

    # -- plans --------------------------------------------------------------------------------------------
    def request_plan(self) -> None:
        """Plan under the settings shown, for the draft being typed or the latest turn."""
        if self.settings is None or not self.link.open:
            return
        self.meter.pending = True
        self.link.plan(self.settings, self._draft)

    @on(msg.PlanReady)
    async def _plan_ready(self, message: msg.PlanReady) -> None:
        self.meter.pending = False
        await self._show_plan(message.view)

    async def _show_plan(self, view: PlanView) -> None:
        self.view = view
        self.meter.state = meter_state(view.plan)
        if view.group_id is not None:
            await self.chat.set_attachment(view.group_id, self.attachment_text(view))
        if self.overlay is not None:
            self.overlay.show_view(view)

    @on(msg.PlanFailed)
    def _plan_failed(self, message: msg.PlanFailed) -> None:
        self.meter.pending = False
        self.notify(message.error, title="planning failed", severity="error")

    def attachment_text(self, view: PlanView) -> str:
        return attachment_for(view.plan).text(describe_key("ctxbench.overlay", dict(self.config.ui.keymap)))

    @on(msg.ActionDone)
    async def _action_done(self, message: msg.ActionDone) -> None:
        if message.note:
            self.notify(message.note)
        if message.history is not None:
            await self.chat.show_history(message.history.history, message.history.dropped)
        self.request_plan()
        if message.rebuild_state:
            await self.rebuild_state()

    # -- settings -----------------------------------------------------------------------------------------
    def change_settings(self, **changes: Any) -> None:
        """Show new settings at once (indicator, status line) and plan under them."""
        if "mode" in changes:
            self.query_one(ModeIndicator).mode = changes["mode"]
        if self.settings is None:
            return  # still opening: the session's own settings arrive with it
        self.settings = dataclasses.replace(self.settings, **changes)
        if "budget" in changes:
            self.notify(f"budget {tok(self.settings.budget)} tokens", timeout=1.5)
        self._status_detail()
        self.request_plan()

    def action_cycle_mode(self) -> None:
        current = self.settings.mode if self.settings is not None else self.query_one(ModeIndicator).mode
        self.change_settings(mode=next_mode(current, self.config.planner.mode_names))

    def action_budget_step(self, direction: int) -> None:
        step = self.config.ui.budget_step
        current = self.settings.budget if self.settings is not None else self.config.planner.default_budget
        self.change_settings(budget=max(step, current + direction * step))

    # -- screens on top -----------------------------------------------------------------------------------
    def show_viewer(self, title: str, body: str, language: str = "text", subtitle: str = "", wrap: bool = True) -> None:
        self.app.push_screen(ViewerScreen(title, body, language=language, subtitle=subtitle, wrap=wrap))

    def show_payload(self, as_json: bool = False) -> None:
        if self.view is None:
            return
        plan = self.view.plan
        payload = plan.messages()
        subtitle = (f"{len(payload)} messages · {tok(plan.used_tokens)} / {tok(plan.budget)} tok · "
                    f"{mode_label(plan.mode)} · {plan.strategy} · esc closes")
        if as_json:
            self.show_viewer(f"Payload of {plan.plan_id} (JSON)", json.dumps(payload, indent=2, ensure_ascii=False),
                             "json", subtitle)
        else:
            self.show_viewer(f"Payload of {plan.plan_id}", render_messages(payload), "text", subtitle)

    def action_show_payload(self) -> None:
        self.run_slash("/context show")

    def action_open_overlay(self) -> None:
        self.open_overlay()

    def open_overlay(self) -> None:
        if self.overlay is not None:
            return
        self.overlay = ContextOverlay(self.view, self.overlay_action, self.preview_item)
        self.app.push_screen(self.overlay, callback=self._overlay_closed)

    def _overlay_closed(self, _result: None) -> None:
        self.overlay = None

    def open_replay(self, start: int) -> None:
        if self.session is not None and self.settings is not None:
            self.app.push_screen(ReplayScreen(self.session, self.settings, start=start))

    def action_focus_input(self) -> None:
        self.prompt.focus()

    # -- the overlay's actions ----------------------------------------------------------------------------
    def preview_item(self, row: OverlayRow) -> None:
        """Enter in the overlay: the candidate in full (read in a worker, shown in a viewer)."""
        view = self.view
        if view is None:
            return

        def read(session) -> msg.ShowText:
            if row.item is not None:
                body, language = session.item_content(row.item, view.plan)
                item = row.item
                return msg.ShowText(f"{item.id} · {item.kind} · {tok(item.tokens)} tok · {item.reason}", body, language)
            assert row.suggestion is not None
            body, language = session.suggestion_content(row.suggestion, view.plan)
            return msg.ShowText(f"suggested pin {row.suggestion.target} · {row.suggestion.why}", body, language)

        self.link.read(read)

    def overlay_action(self, action: str, row: OverlayRow, **kwargs: Any) -> None:
        """An overlay key: change pins or drops in a worker, then replan (the overlay shows the new plan)."""
        plan = self.view.plan if self.view is not None else None
        target = row.target
        label = row.item.label if row.item is not None else (row.suggestion.label if row.suggestion else target)
        suggestion = row.suggestion

        def run(session) -> str | None:
            if action == "pin_sticky":
                return f"pinned {target} sticky ({session.pin_item(target, 'sticky', label=label, plan=plan).id})"
            if action == "lease":
                scope = kwargs.get("scope", "turn")
                pin = session.pin_item(target, "leased", scope=scope, label=label, plan=plan)
                return f"leased {target} for this {scope} ({pin.ttl} turns)"
            if action == "unpin":
                return f"unpinned {target}" if session.unpin(target) else f"{target} was not pinned"
            if action == "drop":
                return session.drop(target)
            if action == "accept" and suggestion is not None:
                return f"accepted suggestion: {target} pinned sticky ({session.accept(suggestion, plan).id})"
            if action == "reject" and suggestion is not None:
                session.reject(suggestion)
                return f"rejected suggestion {target}"
            return None

        self.link.act(run, history=action == "drop")

    # -- input --------------------------------------------------------------------------------------------
    def run_slash(self, line: str) -> None:
        self.slash.run(line)

    def run_command(self, command: str) -> None:
        """A palette entry: a slash command line, or the mode hotkey."""
        from ctxbench.tui.palette import CYCLE_MODE

        if command == CYCLE_MODE:
            self.action_cycle_mode()
        else:
            self.run_slash(command)

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
    def _busy(self) -> bool:
        if not self.link.open:
            self.notify("the session is still opening", severity="warning")
            return True
        if self.turn_running:
            self.notify("a reply is still arriving; esc cancels it", severity="warning")
            return True
        return False

    async def send(self, text: str) -> None:
        if self._busy():
            return
        local = next(self._local)
        self.feed.begin(local)
        await self.chat.add_pending_turn(local, text)
        self.link.run_turn(local, text)

    def request_rebuild(self) -> None:
        """``/context rebuild`` from a command: start it once the current message is handled."""
        self.call_later(self.rebuild_state)

    async def rebuild_state(self) -> None:
        """``/context rebuild``: the model rewrites the ``### STATE`` from the current window, streamed into the
        chat like a reply; the plan and the meter pick the new state up."""
        if self._busy():
            return
        local = next(self._local)
        self.feed.begin(local, rebuild=True)
        label = model_label(self.config.llm)
        model = "the " + label if label == "offline model" else label
        await self.chat.add_pending_rebuild(
            local, f"↻ /context rebuild: asking {model} for a fresh ### STATE from the current window (esc cancels)")
        self.status.set_slot(Progress("turn", "rebuilding the state…"))
        self.link.run_turn(local, "", rebuild=True)

    @on(msg.TurnProgress)
    async def _turn_progress(self, message: msg.TurnProgress) -> None:
        await self.feed.apply(message.local_id, message.event)

    @on(msg.TurnCrashed)
    async def _turn_crashed(self, message: msg.TurnCrashed) -> None:
        await self.feed.crashed(message.local_id, message.error)

    async def _turn_finished(self, outcome: TurnOutcome) -> None:
        self.link.turn_ended()
        rebuild = outcome.rebuild
        await self.chat.finish_reply(
            outcome.local_id, partial=outcome.cancelled or bool(outcome.error), error=outcome.error,
            cancelled=outcome.cancelled,
            cancel_note="⊘ rebuild cancelled; the state is unchanged" if rebuild else CANCELLED_EARLY, rebuild=rebuild)
        if outcome.cancelled:
            stored = outcome.reply is not None and outcome.reply.partial
            self.notify("reply cancelled; the partial reply is stored" if stored else
                        ("rebuild cancelled" if rebuild else "reply cancelled"), severity="warning")
        elif rebuild and not outcome.error:
            self.notify("state rebuilt from the current window", timeout=2)
        self.request_plan()  # new state, activation, leases

    def action_cancel_turn(self) -> None:
        self.link.cancel_turn()
