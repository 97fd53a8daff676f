"""``/bench``: the last benchmark results — what each history strategy recalls and costs, and the speed figures.

The results are handed in (read by ``service.bench_results`` in the slash command's worker); the screen
only lays them out: a table of evidence recall per strategy and budget with each strategy's plan time, a
bar chart of recall per budget, and the performance rows beside their targets. Esc closes.
"""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ctxbench.records.bench import BenchResults, RecallRow
from ctxbench.tui.keymap import VIEWER_KEYS, bindings
from ctxbench.tui.widgets.stable_footer import StableFooter

BAR_WIDTH = 32
NO_RESULTS = ("No results yet in {folder}.\n\nRun `ctxbench bench locomo --data DIR` (evidence recall of every "
              "history strategy) and `ctxbench bench perf` (speed), then /bench again.")


def _name(row: RecallRow) -> str:
    name = f"default ({row.is_strategy})" if row.kind == "default" and row.is_strategy else row.strategy
    return f"{name} [{row.roles}]" if row.roles and row.roles != "ab" else name


def recall_table(results: BenchResults) -> Table:
    table = Table(title="Evidence recall per budget (tokens)", title_justify="left", expand=False)
    table.add_column("strategy")
    for budget in results.budgets:
        table.add_column(f"{budget:,}", justify="right")
    table.add_column("plan p95 ms", justify="right")
    best = {b: max((dict(r.recalls).get(b, 0.0) for r in results.recall), default=0.0) for b in results.budgets}
    for row in results.recall:
        cells = []
        for budget, recall in row.recalls:
            style = "bold" if recall >= best[budget] - 1e-9 else ("dim" if row.kind == "baseline" else "")
            cells.append(Text(f"{recall:.3f}", style=style))
        p95 = f"{row.plan_p95_ms:.1f}" if row.plan_p95_ms is not None else "-"
        table.add_row(Text(_name(row), style="bold" if row.kind == "default" else ""), *cells, p95)
    return table


def recall_chart(results: BenchResults) -> Text:
    out = Text()
    width = max((len(_name(r)) for r in results.recall), default=10)
    for budget in results.budgets:
        out.append(f"recall at {budget:,} tokens\n", style="bold")
        for row in results.recall:
            recall = dict(row.recalls).get(budget, 0.0)
            bar = "█" * int(round(recall * BAR_WIDTH))
            style = "bold" if row.kind == "default" else ("dim" if row.kind == "baseline" else "")
            out.append(f"  {_name(row):<{width}} ")
            out.append(f"{bar:<{BAR_WIDTH}}", style=style)
            out.append(f" {recall:.3f}\n")
    return out


def perf_table(results: BenchResults) -> Table:
    table = Table(title="Speed (ctxbench bench perf)", title_justify="left", expand=False)
    for column, justify in (("measure", "left"), ("measured", "right"), ("target", "right"), ("", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in results.perf:
        verdict = "" if row.meets is None else ("meets" if row.meets else "MISSES")
        table.add_row(row.name, row.value, row.target or "-", Text(verdict, style="" if row.meets else "bold"))
    return table


class BenchScreen(ModalScreen[None]):
    """The last results of ``ctxbench bench locomo`` and ``ctxbench bench perf``."""

    BINDINGS = bindings(VIEWER_KEYS)

    def __init__(self, results: BenchResults) -> None:
        super().__init__()
        self.results = results

    def body(self) -> Group | Text:
        r = self.results
        if r.empty:
            return Text(NO_RESULTS.format(folder=r.folder) + "".join(f"\n{p}" for p in r.problems))
        parts: list = []
        if r.recall:
            parts += [recall_table(r), Text(r.recall_source + "\n", style="dim"), recall_chart(r)]
        if r.perf:
            parts += [perf_table(r), Text(r.perf_source, style="dim")]
        parts += [Text(p, style="bold") for p in r.problems]
        return Group(*parts)

    def compose(self) -> ComposeResult:
        with Vertical(id="viewer-box"):
            yield Static(Text("Benchmarks: what each history strategy recalls and costs"), id="viewer-title")
            yield Static(Text(f"results from {self.results.folder}"), id="viewer-subtitle")
            with VerticalScroll(id="viewer-body"):
                yield Static(self.body(), id="viewer-content")
            yield StableFooter()

    def on_mount(self) -> None:
        self.query_one("#viewer-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)
