"""The context overlay (ctrl+o): every candidate of the current plan, its reason, and what to do with it.

Included items first (payload order), then the excluded ones dimmed with their reason, then a ``suggested pins``
delimiter and the suggestions dimmed below it. Typing filters; Enter previews the highlighted item; the footer shows
the actions (pin, lease, unpin, drop, accept, reject). An action shows on its row at once (the badge it gives, or what
it does, marked with "…") and the title says the plan is being remade; the replanned list replaces it when it arrives.
"""
from __future__ import annotations

from typing import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static
from textual.widgets.data_table import CellDoesNotExist

from ctxbench.records.views import PlanView
from ctxbench.records.vocab import PIN_TARGET_PREFIXES
from ctxbench.tui.keymap import OVERLAY_KEYS, bindings
from ctxbench.tui.meter import figure
from ctxbench.tui.present import cluster_label, mode_label, tok
from ctxbench.tui.screens.overlay_cells import detail_line, divider_cells, pin_shown, row_cells
from ctxbench.tui.screens.overlay_rows import MANDATORY_IDS, OverlayRow, build_rows, column_widths, filter_rows
from ctxbench.tui.widgets.filter_input import FilterInput
from ctxbench.tui.widgets.row_table import RowTable
from ctxbench.tui.widgets.stable_footer import StableFooter

OverlayAction = Callable[..., None]  # (action, row, **kwargs): pin, lease, unpin, drop, accept, reject
Preview = Callable[[OverlayRow], None]

FILTER_DEBOUNCE_ROWS = 200  # long plans: refilter once typing pauses, not on every key
FILTER_DEBOUNCE_S = 0.15
COLUMNS = ("pin", "section", "kind", "label", "tokens", "reason", "score")
MARKED_COLUMNS = ("pin", "tokens", "reason")  # the cells an action's mark changes


class ContextOverlay(ModalScreen[None]):
    """Shows a PlanView; ``on_action`` runs an action on the selected row (the main screen replans and calls
    :meth:`show_view` with the new plan), ``on_preview`` shows the selected item in full."""

    BINDINGS = bindings(OVERLAY_KEYS)

    def __init__(self, view: PlanView | None, on_action: OverlayAction, on_preview: Preview) -> None:
        super().__init__()
        self.view = view
        self.on_action = on_action
        self.on_preview = on_preview
        self.rows: list[OverlayRow] = []
        self.shown_rows: list[OverlayRow] = []
        self._widths: dict[str, int] = {}
        self._filter_timer = None
        # target -> what an action asked for shows until the plan that includes it arrives: a pin kind ("sticky",
        # "leased"), "" (unpinned), or a word for the reason column ("dropping", "rejected")
        self.pending: dict[str, str] = {}
        self._made = False  # its widgets are there (mounted)

    def compose(self) -> ComposeResult:
        with Vertical(id="overlay-box"):
            yield Static("", id="overlay-title")
            yield FilterInput(placeholder="type to filter (label, kind, reason, section…)", id="overlay-filter")
            table = RowTable(id="overlay-table", cursor_type="row", zebra_stripes=False)
            table.can_focus = False
            yield table
            yield Static("", id="overlay-detail")
            yield StableFooter()

    def on_mount(self) -> None:
        self._made = True
        self.query_one("#overlay-filter", Input).focus()
        self.show_view(self.view)  # its title now; its rows once the table has its width

    def on_screen_resume(self) -> None:
        if not self._widths:  # shown the first time (made then, or before: ``ScreensOnTop.prepare_overlay``)
            self.call_after_refresh(self._first_fill)

    def _first_fill(self) -> None:
        """The columns and rows, once the first layout gave the table its width (made from a guess, they were made
        again on the first resize)."""
        if not self._widths:
            self._build_columns()
            self.show_view(self.view, settled=False)

    def on_resize(self) -> None:
        if self._widths and self._widths != column_widths(self._table_width()):
            self._build_columns()
            self._fill()
        self._title()  # its height at the new width

    def _table_width(self) -> int:
        table = self.query_one(DataTable)
        return table.size.width or max(40, self.size.width - 6)

    def _build_columns(self) -> None:
        table = self.query_one(DataTable)
        self._widths = column_widths(self._table_width())
        table.clear(columns=True)
        for name in COLUMNS:
            label = {"tokens": "tok", "pin": "" if self._widths["pin"] < 3 else "pin"}.get(name, name)
            table.add_column(label, key=name, width=self._widths[name])

    # -- content ------------------------------------------------------------------------------------
    def reopen(self, view: PlanView | None) -> None:
        """Opened again (kept between openings): as a new one would show ``view``, no filter, the cursor on top."""
        if not self._made:  # made before its first opening, still composing: on_mount shows ``view``
            self.view = view
            return
        search = self.query_one("#overlay-filter", Input)
        with search.prevent(Input.Changed):
            search.value = ""
        self.shown_rows = []  # no selection to keep: the fill puts the cursor on the first row
        self.show_view(view)
        search.focus()

    def show_view(self, view: PlanView | None, *, settled: bool = True) -> None:
        if settled:
            self.pending.clear()
        self.view = view
        if not self._made:  # pushed, not composed yet (a plan arriving as it opens): on_mount shows it
            return
        self.rows = build_rows(view) if view is not None else []
        self._title()
        self._fill()

    def _title(self) -> None:
        title = self.query_one("#overlay-title", Static)
        if self.view is None:
            title.update("Context plan: waiting for the first plan…")
            return
        plan, counts = self.view.plan, self.view.counts
        over = " · OVER BUDGET" if plan.over_budget else ""
        used = figure(counts.used, counts.calibrated) if counts is not None else tok(plan.used_tokens)
        how = f" · {counts.label()}" if counts is not None else ""
        text = Text()
        text.append("Context plan ", style="bold")
        text.append(f"{plan.plan_id} · {mode_label(plan.mode)} · {plan.strategy} · "
                    f"{used} / {tok(plan.budget)} tok{how}{over} · "
                    f"{len(plan.included)} included · {len(plan.excluded)} excluded · "
                    f"{len(self.view.suggestions)} suggested{cluster_label(plan.query_cluster)}")
        redacted = sum(i.redacted for i in plan.items)
        if redacted:
            text.append(f" · redacted: {redacted} secrets masked", style="bold")
        if self.view.draft:
            text.append(" · for your draft", style="italic")
        marked = text.copy()
        marked.append(" · replanning…", style="italic")
        # as high as with "replanning…" (a mark adds it): a mark never asks for a layout pass (a full update, ~30 ms)
        width = title.size.width
        high = len(marked.wrap(self.app.console, width)) if width > 0 else 0
        if high and high != title.size.height:
            title.styles.height = high
        title.update(marked if self.pending else text, layout=not high)

    def _cells(self, row: OverlayRow) -> list[Text]:
        return row_cells(row, self._widths, self.pending)

    def _fill(self) -> None:
        table = self.query_one(RowTable)
        if not self._widths:
            return
        selected = self.selected_row
        keep = selected.key if selected is not None else None
        text = self.query_one("#overlay-filter", Input).value
        self.shown_rows = filter_rows(self.rows, text)
        table.replace_rows([(row.key, divider_cells(row, self._widths) if row.kind == "divider" else self._cells(row))
                            for row in self.shown_rows])
        index = next((n for n, r in enumerate(self.shown_rows) if r.key == keep), None)
        if index is None:
            index = next((n for n, r in enumerate(self.shown_rows) if r.kind != "divider"), 0)
        if self.shown_rows:
            table.move_cursor(row=index, animate=False)
        self._detail()
        self.refresh_bindings()  # the footer (StableFooter) is made again only when its keys change

    @property
    def selected_row(self) -> OverlayRow | None:
        if not self.shown_rows:
            return None
        table = self.query_one(DataTable)
        n = table.cursor_row
        if 0 <= n < len(self.shown_rows):
            return self.shown_rows[n]
        return None

    def _detail(self) -> None:
        counts = self.view.counts if self.view is not None else None
        # one line high (app.tcss): never a layout pass
        self.query_one("#overlay-detail", Static).update(detail_line(self.selected_row, counts), layout=False)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if len(self.rows) < FILTER_DEBOUNCE_ROWS:
            self._fill()
            return
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter_timer = self.set_timer(FILTER_DEBOUNCE_S, self._fill)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail()
        self.refresh_bindings()

    def pin_shown(self, row: OverlayRow) -> str:
        """The pin kind ``row`` shows: one an action asked for (not yet planned), else the plan's."""
        return pin_shown(row, self.pending)

    def mark(self, action: str, row: OverlayRow) -> None:
        """Show what ``action`` does to ``row`` at once, marked pending until the plan that includes it arrives."""
        shown = {"pin_sticky": "sticky", "lease": "leased", "unpin": "", "accept": "sticky", "reject": "rejected",
                 "drop": "" if row.pin and not row.target.startswith(("group:", "atom:")) else "dropping"}
        if action not in shown:
            return
        self.pending[row.target] = shown[action]
        cells = dict(zip(COLUMNS, self._cells(row)))
        try:
            self.query_one(RowTable).update_row(row.key, {name: cells[name] for name in MARKED_COLUMNS})
        except CellDoesNotExist:  # the row is not listed (filtered out): the title still says it
            pass
        self._title()
        self.refresh_bindings()

    # -- actions ------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """True when ``action`` applies to the selected row: the footer lists only those (all do not fit 80 columns)"""
        row = self.selected_row
        target = row.target if row is not None else ""
        if action in ("pin_sticky", "lease"):
            ok = row is not None and row.item is not None and (
                target.startswith(PIN_TARGET_PREFIXES) or target.startswith("pin:"))
            if ok and action == "pin_sticky" and self.pin_shown(row) == "sticky":
                ok = False
            return ok
        if action == "unpin":
            return row is not None and bool(self.pin_shown(row))
        if action == "drop":
            return row is not None and row.item is not None and row.item.id not in MANDATORY_IDS and (
                target.startswith(("group:", "atom:", "card:", "pin:")) or bool(row.pin))
        if action in ("accept", "reject"):
            return row is not None and row.kind == "suggestion"
        return True

    def action_close(self) -> None:
        self.dismiss(None)

    def action_cursor(self, step: int) -> None:
        table = self.query_one(DataTable)
        if not self.shown_rows:
            return
        last = len(self.shown_rows) - 1
        n = max(0, min(last, table.cursor_row + step))
        # skip delimiters in the direction of travel; at either end turn back, so the cursor never
        # rests on a delimiter (where Enter and the action keys do nothing)
        direction = 1 if step > 0 else -1
        ahead = range(n, last + 1) if direction > 0 else range(n, -1, -1)
        behind = range(n, -1, -1) if direction > 0 else range(n, last + 1)
        n = next((k for k in (*ahead, *behind) if self.shown_rows[k].kind != "divider"), n)
        table.move_cursor(row=n, animate=False)

    def action_preview(self) -> None:
        row = self.selected_row
        if row is None or row.kind == "divider":
            return
        self.on_preview(row)

    def _act(self, action: str, **kwargs) -> None:
        row = self.selected_row
        if row is None or row.kind == "divider":
            return
        self.mark(action, row)
        self.call_after_refresh(self.on_action, action, row, **kwargs)  # the mark on the screen before the work

    def action_pin_sticky(self) -> None:
        self._act("pin_sticky")

    def action_lease(self, scope: str) -> None:
        self._act("lease", scope=scope)

    def action_unpin(self) -> None:
        self._act("unpin")

    def action_drop(self) -> None:
        self._act("drop")

    def action_accept(self) -> None:
        self._act("accept")

    def action_reject(self) -> None:
        self._act("reject")
