"""Replay (``/replay``): step through the session's turns and see the plan each would get now.

For turn *k* the planner sees what existed when the user sent that message (see
``ctxbench.llm.replay``), under the workbench's current mode, budget, strategy and window — or
a mode / strategy picked here with ``m`` / ``s``. Each turn shows the budget meter, the token
figures per section, the included and excluded counts (excluded by reason) and the items.
Plans are built in a worker, one turn at a time, and kept while the screen is open; nothing is
stored. Closing the screen dismisses it with no result: what was tried here changes nothing.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from ctxbench.records.plans import ContextPlan
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.views import ReplayPage, ReplayStep
from ctxbench.records.vocab import STRATEGIES
from ctxbench.service.text import render_messages
from ctxbench.tui import messages as msg
from ctxbench.tui.keymap import REPLAY_KEYS, bindings
from ctxbench.tui.meter import METER_SECTIONS, meter_state
from ctxbench.tui.present import (
    cluster_label,
    mode_label,
    next_mode,
    one_line,
    tok,
)
from ctxbench.tui.screens.overlay_rows import KIND_SHORT, SECTION_SHORT
from ctxbench.tui.widgets.budget_meter import BudgetMeter
from ctxbench.tui.widgets.stable_footer import StableFooter

if TYPE_CHECKING:  # the engine loads in a worker, never before the first paint
    from ctxbench.service.session import WorkbenchSession

USER_LINES = 3  # lines of the turn's user message shown above the meter
COLUMNS = ("section", "kind", "label", "tok", "reason")
WIDE_TABLE = 100  # narrower tables use the overlay's short section and kind names


def column_widths(width: int) -> dict[str, int]:
    wide = width >= WIDE_TABLE
    widths = {"section": 9 if wide else 4, "kind": 14 if wide else 9, "tok": 7, "reason": 18 if wide else 15}
    widths["label"] = max(10, width - sum(widths.values()) - 2 * len(COLUMNS) - 2)
    return widths


def replay_summary(step: ReplayStep) -> str:
    """``plan_… · 7,950 / 8,000 tok · 45 included · 120 excluded (100 over_budget, 20 …) · …``"""
    plan = step.plan
    reasons = Counter(i.reason for i in plan.excluded)
    why = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    over = " · OVER BUDGET" if plan.over_budget else ""
    return (f"{plan.plan_id} · {tok(plan.used_tokens)} / {tok(plan.budget)} tok{over} · "
            f"{len(plan.included)} included · {len(plan.excluded)} excluded" + (f" ({why})" if why else "") +
            f" · {step.history_messages} earlier messages to choose from{cluster_label(plan.query_cluster)}")


def section_figures(plan: ContextPlan) -> str:
    """Tokens per section, in the meter's order: ``system 455 · pins 0 · history 6,623 · …``."""
    by_name = dict(plan.sections)
    return " · ".join(f"{name} {tok(int(by_name.get(name, 0)))}" for name in METER_SECTIONS)


class ReplayScreen(ModalScreen[None]):
    BINDINGS = bindings(REPLAY_KEYS)

    def __init__(self, session: WorkbenchSession, settings: SessionSettings, *, start: int = 1) -> None:
        super().__init__()
        self.session = session
        self.settings = settings
        self.turn = max(1, start)
        self.total = 0
        self.step: ReplayStep | None = None  # the step shown
        self.error = ""
        self._cache: dict[tuple, ReplayStep] = {}
        self._wanted: tuple = ()
        self._widths: dict[str, int] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="replay-box"):
            yield Static("Replay: reading the session…", id="replay-title")
            yield Static("", id="replay-user")
            yield BudgetMeter(id="replay-meter")
            yield Static("", id="replay-sections")
            yield Static("", id="replay-summary")
            table: DataTable = DataTable(id="replay-table", cursor_type="row", zebra_stripes=False)
            yield table
            yield StableFooter()

    def on_mount(self) -> None:
        self._build_columns()
        self.query_one(DataTable).focus()
        self._request()

    def on_resize(self) -> None:
        if self._widths != column_widths(self._table_width()):
            self._build_columns()
            if self.step is not None:
                self._show(self.step)

    def _table_width(self) -> int:
        return self.query_one(DataTable).size.width or max(40, self.size.width - 6)

    def _build_columns(self) -> None:
        table = self.query_one(DataTable)
        self._widths = column_widths(self._table_width())
        table.clear(columns=True)
        for name in COLUMNS:
            table.add_column(name, key=name, width=self._widths[name])

    # -- plans ----------------------------------------------------------------------------------------
    def key(self) -> tuple:
        s = self.settings
        return (self.turn, s.mode, s.budget, s.strategy, s.window_groups)

    def _request(self) -> None:
        key = self.key()
        self._wanted = key
        if key in self._cache:
            self._show(self._cache[key])
            return
        self.query_one(BudgetMeter).pending = True
        self._title(planning=True)
        self.run_worker(partial(self._plan_worker, key, self.settings), thread=True, group="replay",
                        name=f"replay turn {key[0]}", exit_on_error=False)

    def _plan_worker(self, key: tuple, settings: SessionSettings) -> None:
        try:
            page = self.session.replay(key[0], settings)
        except Exception as exc:  # noqa: BLE001 - shown on the screen
            page = ReplayPage(self.total, None, f"{type(exc).__name__}: {exc}")
        self.post_message(msg.ReplayReady(key, page))

    @on(msg.ReplayReady)
    def _ready(self, message: msg.ReplayReady) -> None:
        page = message.page
        self.total = page.total
        step = page.step
        key = message.key if step is None else (step.turn, *message.key[1:])  # a turn past the end: the last
        if step is not None:
            self._cache[key] = step
        if message.key != self._wanted:
            return  # the user has moved on; the plan is kept for when they come back
        self.turn = key[0]
        self._wanted = key
        self.query_one(BudgetMeter).pending = False
        if page.error or step is None:
            self.error = page.error
            self.step = None
            self._title()
            self.query_one("#replay-summary", Static).update(Text(f"✗ {page.error}"))
            return
        self._show(step)

    def _show(self, step: ReplayStep) -> None:
        self.step = step
        self.error = ""
        plan = step.plan
        self._title()
        lines = step.user_message.content.strip().splitlines() or [""]
        shown = [one_line(line, 400) for line in lines[:USER_LINES]]
        if len(lines) > USER_LINES:
            shown.append(f"… ({len(lines) - USER_LINES} more lines)")
        user = Text("user: ", style="bold")
        user.append("\n".join(shown))
        self.query_one("#replay-user", Static).update(user)
        self.query_one(BudgetMeter).state = meter_state(plan)
        self.query_one("#replay-sections", Static).update(Text(section_figures(plan)))
        self.query_one("#replay-summary", Static).update(Text(replay_summary(step)))
        table = self.query_one(DataTable)
        table.clear()
        short = self._widths.get("kind", 14) < 14
        for item in (*plan.included, *plan.excluded):
            dim = "" if item.included else "dim"
            section = SECTION_SHORT.get(item.section, item.section[:4]) if short else item.section
            kind = KIND_SHORT.get(item.kind, item.kind) if short else item.kind
            table.add_row(Text(section, style=dim, no_wrap=True, overflow="ellipsis"),
                          Text(kind, style=dim, no_wrap=True, overflow="ellipsis"),
                          Text(item.label, style=dim, no_wrap=True, overflow="ellipsis"),
                          Text(tok(item.tokens), style=dim, justify="right"),
                          Text(item.reason, style=dim or "", no_wrap=True, overflow="ellipsis"))

    def _title(self, planning: bool = False) -> None:
        s = self.settings
        where = f"turn {self.turn} / {self.total}" if self.total else f"turn {self.turn}"
        bits = [f"Replay · {where}"]
        if self.step is not None and self.step.turn == self.turn and not planning:
            bits.append(f"group {self.step.group_id}")
            if self.step.user_message.status == "dropped":
                bits.append("dropped since")
            plan = self.step.plan
            bits += [mode_label(plan.mode), plan.strategy]
        else:
            bits += [mode_label(s.mode), s.strategy]
        window = s.window_groups
        bits.append("all turns" if not window else f"last {window} turns")
        if planning:
            bits.append("planning…")
        title = Text(" · ".join(bits), style="bold")
        self.query_one("#replay-title", Static).update(title)

    # -- keys -----------------------------------------------------------------------------------------
    def action_step(self, delta: int) -> None:
        if not self.total:
            return
        turn = max(1, min(self.total, self.turn + delta))
        if turn != self.turn:
            self.turn = turn
            self._request()

    def action_jump(self, where: str) -> None:
        if not self.total:
            return
        turn = 1 if where == "first" else self.total
        if turn != self.turn:
            self.turn = turn
            self._request()

    def action_cycle_mode(self) -> None:
        mode = next_mode(self.settings.mode, self.session.config.planner.mode_names)
        self.settings = dataclasses.replace(self.settings, mode=mode)
        self._request()

    def action_cycle_strategy(self) -> None:
        current = self.settings.strategy
        at = STRATEGIES.index(current) if current in STRATEGIES else -1
        self.settings = dataclasses.replace(self.settings, strategy=STRATEGIES[(at + 1) % len(STRATEGIES)])
        self._request()

    def action_payload(self) -> None:
        if self.step is None:
            return
        from ctxbench.tui.screens.viewer import ViewerScreen

        plan = self.step.plan
        payload = plan.messages()
        self.app.push_screen(ViewerScreen(
            f"Replay turn {self.step.turn}: payload of {plan.plan_id}", render_messages(payload),
            subtitle=f"{len(payload)} messages · {tok(plan.used_tokens)} / {tok(plan.budget)} tok · "
                     f"{mode_label(plan.mode)} · {plan.strategy} · not stored · esc closes"))

    def action_close(self) -> None:
        self.dismiss(None)
