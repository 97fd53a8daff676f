"""A scrollable read-only view: the exact payload, a candidate in full, a turn, a listing."""
from __future__ import annotations

from pathlib import Path

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ctxbench.tui.keymap import VIEWER_KEYS, bindings
from ctxbench.tui.widgets.stable_footer import StableFooter

SYNTAX_THEMES = {True: "monokai", False: "default"}  # dark theme -> pygments style


class ViewerScreen(ModalScreen[None]):
    """Shows one renderable, scrollable; Esc closes. ``wrap=False`` keeps each line of a listing on
    one row (cut with "…") so its columns stay aligned."""

    BINDINGS = bindings(VIEWER_KEYS)

    def __init__(self, title: str, body: str, *, language: str = "text", subtitle: str = "",
                 wrap: bool = True, copy_text: str = "", save_as: str = "", name: str | None = None,
                 id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.copy_text = copy_text  # what ``c`` copies to the clipboard ("" : no copy)
        self.save_as = save_as  # the file ``s`` writes copy_text to, in the current folder ("": no save)
        self.title_text = title
        self.subtitle_text = subtitle
        self.body = body
        self.language = language
        self.wrap = wrap

    def renderable(self) -> RenderableType:
        if self.language in ("text", "", None):
            return Text(self.body)
        dark = self.app.current_theme.dark if self.app else True
        return Syntax(self.body, self.language, theme=SYNTAX_THEMES[dark], word_wrap=True,
                      line_numbers=self.language not in ("markdown", "json"), background_color="default")

    def compose(self) -> ComposeResult:
        with Vertical(id="viewer-box"):
            yield Static(Text(self.title_text), id="viewer-title")
            if self.subtitle_text:
                yield Static(Text(self.subtitle_text), id="viewer-subtitle")
            with VerticalScroll(id="viewer-body"):
                content = Static(self.renderable(), id="viewer-content")
                if not self.wrap:
                    content.styles.text_wrap = "nowrap"
                    content.styles.text_overflow = "ellipsis"
                yield content
            yield StableFooter()

    def on_mount(self) -> None:
        self.query_one("#viewer-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "copy":
            return bool(self.copy_text)
        if action == "save":
            return bool(self.copy_text and self.save_as)
        return True

    def action_copy(self) -> None:
        """Copy to the terminal's clipboard (OSC 52: most terminals and tmux with set-clipboard on)."""
        self.app.copy_to_clipboard(self.copy_text)
        self.notify(f"copied {len(self.copy_text):,} characters to the clipboard")

    def action_save(self) -> None:
        target = Path(self.save_as)
        try:
            target.write_text(self.copy_text, encoding="utf-8")
        except OSError as exc:
            self.notify(f"cannot write {target}: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"saved to {target.resolve()}")
