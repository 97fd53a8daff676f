"""The top line: session, repository, strategy, and one slot per background job (index, embedder, turn)."""
from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ctxbench.records.views import Progress

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class StatusLine(Widget):
    COMPONENT_CLASSES = {"status-line--title", "status-line--busy", "status-line--ready", "status-line--error",
                         "status-line--dim"}
    DEFAULT_CSS = "StatusLine { height: 1; }"

    title: reactive[str] = reactive("ctxbench")
    detail: reactive[str] = reactive("")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._slots: dict[str, Progress] = {}

    def set_slot(self, update: Progress) -> None:
        if update.state == "idle":
            self._slots.pop(update.slot, None)
        else:
            self._slots[update.slot] = update
        self.refresh()

    def slot(self, name: str) -> Progress | None:
        return self._slots.get(name)

    def render(self) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f" {self.title} ", style=self.get_component_rich_style("status-line--title"))
        if self.detail:
            line.append(f" {self.detail}", style=self.get_component_rich_style("status-line--dim"))
        for update in self._slots.values():
            mark = {"busy": "◌", "ready": "●", "error": "✗"}.get(update.state, "·")
            text = update.text
            if update.fraction is not None and update.state == "busy":
                text += f" {int(update.fraction * 100)}%"
            style = self.get_component_rich_style(f"status-line--{update.state}")
            line.append("  ")
            line.append(f"{mark} {text}", style=style)
        return line
