"""What if (``/whatif``): try a budget, a mode and a strategy on the next call and see what it would include.

←/→ move the budget by the configured step, ↑/↓ double or halve it, ``m`` / ``s`` cycle the mode and the
strategy. Each change replans in a worker (a newer change cancels the older plan) and shows the meter,
the tokens per section, and the items that would join or leave compared with the plan shown now. Below,
the chart of what the next call includes at budgets from 1k up to the model's context limit shows where
more budget stops buying anything. Nothing is stored: enter keeps the settings (the screen dismisses with
them and the workbench applies them), esc leaves everything as it was.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import get_current_worker

from ctxbench.records.plans import ContextPlan
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.vocab import STRATEGIES
from ctxbench.service.text import diff_lines
from ctxbench.service.timeline import compare
from ctxbench.tui import present
from ctxbench.tui.keymap import WHATIF_KEYS, bindings
from ctxbench.tui.meter import meter_state
from ctxbench.tui.widgets.budget_meter import BudgetMeter
from ctxbench.tui.widgets.stable_footer import StableFooter

if TYPE_CHECKING:
    from ctxbench.service.session import WorkbenchSession
    from ctxbench.service.timeline import CurvePoint

MIN_BUDGET = 100  # tokens: the slider's floor
CURVE_BAR = 40  # cells of one bar of the chart
DIFF_LINES = 12  # items listed as joining or leaving


class Planned(Message):
    def __init__(self, settings: SessionSettings, plan: ContextPlan | None, error: str = "") -> None:
        super().__init__()
        self.settings, self.plan, self.error = settings, plan, error


class Curve(Message):
    def __init__(self, points: "tuple[CurvePoint, ...]") -> None:
        super().__init__()
        self.points = points


class WhatIfScreen(ModalScreen[SessionSettings | None]):
    BINDINGS = bindings(WHATIF_KEYS)

    def __init__(self, session: "WorkbenchSession", settings: SessionSettings, draft: str, group_id: int | None,
                 context_limit: int, now: ContextPlan | None = None) -> None:
        super().__init__()
        self.session = session
        self.start = settings  # what the workbench uses now
        self.settings = settings  # what is being tried
        self.draft = draft
        self.group_id = group_id
        self.limit = context_limit
        self.now = now  # the plan the workbench shows now (what the tried settings are compared with)
        self.plan: ContextPlan | None = None
        self.points: tuple = ()
        self._planner = None  # made in the first worker: it reads the store, which the UI thread never waits on
        self._planner_lock = threading.Lock()

    @property
    def planner(self):
        with self._planner_lock:
            if self._planner is None:
                self._planner = self.session.timeline.what_if(self.draft, self.group_id, self.session.tools_tokens())
            return self._planner

    def compose(self) -> ComposeResult:
        with Vertical(id="whatif-box"):
            yield Static("", id="whatif-title")
            yield BudgetMeter(id="whatif-meter")
            yield Static("", id="whatif-sections")
            with VerticalScroll(id="whatif-body"):
                yield Static("", id="whatif-diff")
                yield Static("", id="whatif-curve")
            yield StableFooter()

    def on_mount(self) -> None:
        self._title()
        self._replan()
        self._curve()

    # -- workers ------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="whatif-plan")
    def _replan(self) -> None:
        worker, settings = get_current_worker(), self.settings
        try:
            plan = self.planner.plan(settings)
        except Exception as exc:  # noqa: BLE001 - shown on the screen
            if not worker.is_cancelled:
                self.post_message(Planned(settings, None, f"{type(exc).__name__}: {exc}"))
            return
        if not worker.is_cancelled:
            self.post_message(Planned(settings, plan))

    @work(thread=True, exclusive=True, group="whatif-curve")
    def _curve(self) -> None:
        worker, settings = get_current_worker(), self.settings
        points = self.planner.curve(settings, self.limit)
        if not worker.is_cancelled:
            self.post_message(Curve(points))

    @on(Planned)
    def _planned(self, message: Planned) -> None:
        if message.settings != self.settings:
            return  # the user has moved on; the newer plan is on its way
        meter = self.query_one(BudgetMeter)
        meter.pending = False
        if message.plan is None:
            self.query_one("#whatif-diff", Static).update(Text(f"✗ {message.error}"))
            return
        self.plan = message.plan
        if self.now is None and message.settings == self.start:
            self.now = message.plan  # opened before the first plan arrived
        meter.state = meter_state(message.plan)
        self.query_one("#whatif-sections", Static).update(Text(" · ".join(
            f"{name} {present.tok(tokens)}" for name, tokens in message.plan.sections)))
        self._show_diff()
        self._show_curve()

    @on(Curve)
    def _curved(self, message: Curve) -> None:
        self.points = message.points
        self._show_curve()

    # -- what it shows ------------------------------------------------------------------------------------
    def _title(self) -> None:
        s = self.settings
        what = "your draft" if self.draft.strip() else (f"turn {self.group_id}" if self.group_id else "the next turn")
        self.query_one("#whatif-title", Static).update(Text(
            f"What if · {what} · budget {present.tok(s.budget)} tok · {present.mode_label(s.mode)} · {s.strategy}"
            + ("" if s != self.start else " (as now)"), style="bold"))

    def _show_diff(self) -> None:
        if self.plan is None or self.now is None:
            return
        if self.plan.plan_id == self.now.plan_id:
            text = "the same plan as now"
        else:
            lines = diff_lines(compare(self.now, self.plan))
            shown = [lines[0].split(": ", 1)[-1]] + lines[1:DIFF_LINES + 1]
            more = len(lines) - 1 - DIFF_LINES
            text = "vs now: " + "\n".join(shown) + (f"\n  … {more} more" if more > 0 else "")
        self.query_one("#whatif-diff", Static).update(Text(text))

    def _show_curve(self) -> None:
        if not self.points:
            self.query_one("#whatif-curve", Static).update(Text("what is in at each budget: planning…", style="dim"))
            return
        top = max(p.budget for p in self.points)
        out = Text("what the next call includes at each budget (tokens used · items):\n", style="bold")
        for p in self.points:
            cells = max(1, round(CURVE_BAR * p.used / top))
            mark = " ◀" if p.budget == self.settings.budget else ""
            out.append(f"{present.tok(p.budget):>9} ")
            out.append("█" * cells, style="bold red" if p.over_budget else "bold")
            out.append("░" * (CURVE_BAR - cells), style="dim")
            out.append(f" {present.tok(p.used)} · {p.items}")
            if p.over_budget:  # what must be sent does not fit this budget: a message would be refused
                out.append(" OVER BUDGET", style="bold red")
            out.append(f"{mark}\n")
        self.query_one("#whatif-curve", Static).update(out)

    # -- keys ---------------------------------------------------------------------------------------------
    def _try(self, **changes: object) -> None:
        self.settings = dataclasses.replace(self.settings, **changes)
        self.query_one(BudgetMeter).pending = True
        self._title()
        self._replan()
        if "mode" in changes or "strategy" in changes:
            self.points = ()
            self._show_curve()
            self._curve()

    def action_budget(self, direction: int) -> None:
        step = self.session.config.ui.budget_step
        self._try(budget=min(self.limit, max(MIN_BUDGET, self.settings.budget + direction * step)))

    def action_scale(self, factor: float) -> None:
        self._try(budget=min(self.limit, max(MIN_BUDGET, int(self.settings.budget * factor))))

    def action_cycle_mode(self) -> None:
        self._try(mode=present.next_mode(self.settings.mode, self.session.config.planner.mode_names))

    def action_cycle_strategy(self) -> None:
        at = STRATEGIES.index(self.settings.strategy) if self.settings.strategy in STRATEGIES else -1
        self._try(strategy=STRATEGIES[(at + 1) % len(STRATEGIES)])

    def action_keep(self) -> None:
        self.dismiss(self.settings)

    def action_close(self) -> None:
        self.dismiss(None)
