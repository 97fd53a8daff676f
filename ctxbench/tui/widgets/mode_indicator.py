"""``CTX: Light`` beside the input: the session's Context Mode."""
from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from ctxbench.tui.present import mode_label


class ModeIndicator(Static):
    mode: reactive[str] = reactive("light")

    def __init__(self, mode: str = "light", **kwargs) -> None:
        super().__init__("", **kwargs)
        self.set_reactive(ModeIndicator.mode, mode)

    def on_mount(self) -> None:
        self.watch_mode(self.mode)

    def watch_mode(self, mode: str) -> None:
        self.update(f"CTX: {mode_label(mode)}")
        self.remove_class(*(c for c in self.classes if c.startswith("-")))
        self.add_class(f"-{mode}")  # styled per mode in app.tcss (-off, -light, -heavy)
        self.tooltip = "Context Mode: ctrl+t cycles Off → Light → Heavy"
