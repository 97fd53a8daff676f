"""Compaction preview (``/compact``): per turn, kept verbatim / summarised / dropped / protected, the summary,
tokens before → after and the compression ratio; nothing changes until the user applies it.

Space switches the highlighted turn between kept and summarised (protected, dropped and already summarised
turns say why they cannot be); every switch builds the preview again in a worker (a newer switch cancels
the older build). ``a`` dismisses the screen with the preview shown, which the workbench then applies;
esc dismisses with None and nothing changes.
"""
from __future__ import annotations

from typing import Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from ctxbench.records.compaction import KEPT, PROTECTED, SUMMARISED, CompactionPreview
from ctxbench.tui import present
from ctxbench.tui.keymap import COMPACT_KEYS, bindings
from ctxbench.tui.widgets.stable_footer import StableFooter

Build = Callable[[dict[int, str]], CompactionPreview]
COLUMNS = ("turn", "what", "tokens", "why", "first words")
STYLES = {KEPT: "", SUMMARISED: "dim", PROTECTED: "bold", "dropped": "dim strike"}


class Built(Message):
    def __init__(self, choices: dict[int, str], preview: CompactionPreview | None, error: str = "") -> None:
        super().__init__()
        self.choices, self.preview, self.error = choices, preview, error


class CompactScreen(ModalScreen[CompactionPreview | None]):
    BINDINGS = bindings(COMPACT_KEYS)

    def __init__(self, build: Build, what: str = "") -> None:
        super().__init__()
        self.build = build
        self.what = what  # "" or e.g. "task fix-rounding"
        self.choices: dict[int, str] = {}
        self.preview: CompactionPreview | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="compact-box"):
            yield Static(Text("Compact · building the preview…", style="bold"), id="compact-title")
            yield Static("", id="compact-totals")
            table: DataTable = DataTable(id="compact-table", cursor_type="row", zebra_stripes=False)
            table.add_columns(*COLUMNS)
            yield table
            with VerticalScroll(id="compact-summary-box"):
                yield Static("", id="compact-summary")
            yield StableFooter()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self._rebuild()

    @work(thread=True, exclusive=True, group="compact-preview")
    def _rebuild(self) -> None:
        worker, choices = get_current_worker(), dict(self.choices)
        try:
            preview = self.build(choices)
        except Exception as exc:  # noqa: BLE001 - shown on the screen
            if not worker.is_cancelled:
                self.post_message(Built(choices, None, str(exc) or type(exc).__name__))
            return
        if not worker.is_cancelled:
            self.post_message(Built(choices, preview))

    @on(Built)
    def _built(self, message: Built) -> None:
        if message.choices != self.choices:
            return  # a newer switch is being built
        if message.preview is None:
            self.query_one("#compact-totals", Static).update(Text(f"✗ {message.error}", style="bold"))
            return
        self.preview = p = message.preview
        what = f" · {self.what}" if self.what else ""
        self.query_one("#compact-title", Static).update(Text(
            f"Compact{what} · target {present.tok(p.target_tokens)} tok · space: kept ↔ summarised · "
            f"a applies · esc cancels", style="bold"))
        totals = (f"{present.tok(p.tokens_before)} → {present.tok(p.tokens_after)} tok · summary "
                  f"{present.tok(p.summary_tokens)} tok of {len(p.summarised_groups)} turns"
                  + (f" ({p.ratio:.1f}×)" if p.summary_tokens else "") + f" · {p.source}"
                  + (f" · {p.cost_note}" if p.cost_note else "")
                  + (f" · protected: {len(p.protected)}" if p.protected else ""))
        notes = "".join(f"\n⚠ {n}" for n in p.notes) + (f"\n⚠ {p.refusal}" if p.refusal and p.changes_anything else "")
        self.query_one("#compact-totals", Static).update(Text(totals + notes))
        self._fill(p)
        self.query_one("#compact-summary", Static).update(
            Text(p.summary_text or "(no summary: no turn is summarised)", style="" if p.summary_text else "dim"))

    def _fill(self, p: CompactionPreview) -> None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear()
        for r in p.rows:
            what = r.disposition + (f" ({r.summary})" if r.summary else "")
            if self.choices.get(r.group_id) and r.toggleable:
                what += " •"  # the user's own choice
            style = STYLES.get(r.disposition, "")
            table.add_row(Text(str(r.group_id), style=style), Text(what, style=style),
                          Text(f"{r.tokens:,}", style=style, justify="right"), Text(r.reason, style=style),
                          Text(r.first_words, style=style), key=str(r.group_id))
        if p.rows:
            table.move_cursor(row=min(max(row, 0), len(p.rows) - 1))

    # -- keys ---------------------------------------------------------------------------------------------
    def action_toggle(self) -> None:
        p = self.preview
        table = self.query_one(DataTable)
        if p is None or not p.rows or table.cursor_row < 0:
            return
        r = p.rows[min(table.cursor_row, len(p.rows) - 1)]
        if not r.toggleable:
            self.notify(f"turn {r.group_id} is {r.disposition}: {r.reason}", severity="warning")
            return
        self.choices[r.group_id] = KEPT if r.disposition == SUMMARISED else SUMMARISED
        self.query_one("#compact-totals", Static).update(Text("building the preview…", style="dim"))
        self._rebuild()

    def action_apply(self) -> None:
        p = self.preview
        if p is None or p.choices != tuple(sorted(self.choices.items())):
            self.notify("the preview is still being built", severity="warning")
        elif p.refusal:
            self.notify(p.refusal, severity="warning")
        else:
            self.dismiss(p)

    def action_close(self) -> None:
        self.dismiss(None)
