"""The budget meter: one bar split by section (system, pins, history, retrieval, scaffold, free)."""
from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ctxbench.tui.meter import EXTRA_METER_SECTIONS, METER_SECTIONS, MeterState, figure, meter_cells
from ctxbench.tui.present import tok

SHORT = {"system": "sys", "pins": "pins", "history": "hist", "retrieval": "retr", "scaffold": "scaf", "free": "free",
         "tools": "tools", "tool_results": "results", "files": "files"}


class BudgetMeter(Widget):
    """Tokens used by section against the budget; over budget turns the whole meter red."""

    COMPONENT_CLASSES = {f"budget-meter--{name}"
                         for name in (*METER_SECTIONS, *EXTRA_METER_SECTIONS, "free", "over", "label", "warn")}

    DEFAULT_CSS = """
    BudgetMeter { height: 2; }
    """

    state: reactive[MeterState] = reactive(MeterState, layout=False)
    pending: reactive[bool] = reactive(False)

    def watch_state(self, state: MeterState) -> None:
        self.set_class(state.over_budget, "-over")
        self.tooltip = self._describe(state)

    def _describe(self, state: MeterState) -> str:
        lines = [state.counts] if state.counts else []
        lines += [f"{name}: {figure(tokens, state.calibrated)} tok" for name, tokens in state.sections]
        lines.append(f"free: {figure(state.free, state.calibrated)} tok")
        if state.warning:
            lines.append(state.warning)
        return "\n".join(lines)

    def _style(self, name: str):
        return self.get_component_rich_style(f"budget-meter--{name}", partial=True)

    def render(self) -> Text:
        state = self.state
        width = max(10, self.size.width)
        if state.budget <= 0:
            return Text("budget meter: waiting for the first plan…", style=self._style("label"))
        used = figure(state.used, state.calibrated)
        if state.over_budget:
            label = f" {used} / {tok(state.budget)} tok OVER "
        else:
            label = f" {used} / {tok(state.budget)} tok"
        if self.pending:
            label += " …"
        bar_width = max(4, width - len(label))
        bar = Text(no_wrap=True, overflow="crop")
        for name, cells in meter_cells(state, bar_width):
            glyph = "░" if name == "free" else "█"
            bar.append(glyph * cells, style=self._style("over" if state.over_budget and name != "free" else name))
        bar.append(label, style=self._style("over" if state.over_budget else "label"))
        bar.append("\n")
        bar.append_text(self._legend(state, width))
        return bar

    def _legend(self, state: MeterState, width: int) -> Text:
        if state.over_budget:
            why = state.over_reason or "the plan does not fit"
            return Text(f"⚠ OVER BUDGET by {tok(state.overflow)} tok — {why}", style=self._style("over"),
                        no_wrap=True, overflow="ellipsis")
        if state.warning:
            return Text(f"⚠ {state.warning}", style=self._style("warn"), no_wrap=True, overflow="ellipsis")
        entries = [*state.sections, ("free", state.free)]
        for names in (None, SHORT):
            legend = Text(no_wrap=True, overflow="ellipsis")
            if state.mark:  # how a proxied plan's figures are counted, before them (in full in the tooltip)
                legend.append(f"{state.mark}:  ", style=self._style("label"))
            for name, tokens in entries:
                label = names[name] if names else name
                legend.append("░ " if name == "free" else "■ ", style=self._style(name))
                legend.append(f"{label} {figure(tokens, state.calibrated)}  ", style=self._style("label"))
            if legend.cell_len <= width:
                break
        return legend
