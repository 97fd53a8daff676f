"""The ctxbench workbench: a Textual app around one session of the engine."""
from __future__ import annotations

from textual import events, on
from textual.app import App, ScreenStackError
from textual.screen import Screen

from ctxbench.config import Config
from ctxbench.records.errors import ProviderError
from ctxbench.service.model import resolve_model
from ctxbench.service.options import LaunchOptions
from ctxbench.service.store_users import UI_HOLD_S
from ctxbench.tui.keymap import keymap_from_config
from ctxbench.tui.palette import RunCommand, WorkbenchCommands, run_line
from ctxbench.tui.screens.main import MainScreen
from ctxbench.tui.theme_files import VARIABLE_DEFAULTS, load_themes

FALLBACK_THEME = "ctxbench-dark"


class CtxbenchApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "ctxbench"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, options: LaunchOptions | None = None, config: Config | None = None) -> None:
        super().__init__()
        self.options = options or LaunchOptions()
        self.llm_errors: list[str] = []
        self.config_ = with_model(config or Config(), self.options, self.llm_errors)
        self.theme_errors: list[str] = []
        self.keymap_errors: list[str] = []
        themes, self.theme_errors = load_themes()
        for theme in themes:
            self.register_theme(theme)
        wanted = self.options.theme or self.config_.ui.theme
        self.theme = wanted if wanted in self.available_themes else FALLBACK_THEME
        if wanted not in self.available_themes:
            self.theme_errors.append(f"unknown theme {wanted!r}; using {FALLBACK_THEME}")
        keymap, unknown = keymap_from_config(self.config_.ui.keymap)
        self.keymap_errors = [f"ui.keymap: unknown binding id {b!r}" for b in unknown]
        if keymap:
            self.set_keymap(keymap)
        self.main_screen = MainScreen(self.options, self.config_)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(VARIABLE_DEFAULTS)

    def on_mount(self) -> None:
        self.push_screen(self.main_screen)
        for problem in (*self.theme_errors, *self.keymap_errors, *self.llm_errors):
            self.notify(problem, severity="warning", timeout=8)

    @property
    def _background_screens(self) -> list[Screen]:
        """The screens seen under the top one. Textual counts the one under it whatever covers it: each change on the
        main screen under the context overlay was painted through the overlay, and every second such change repainted
        all of it (in the frame of the key that came next: ~10-30 ms). Nothing is seen under an opaque screen (the
        overlay's and the other views'): none is counted, and the main screen is painted whole when shown again.
        Overrides a private property of Textual (``textual==8.2.8`` is pinned; ``test_tui_usage.py`` fails if it
        changes)."""
        try:
            top = self.screen
        except ScreenStackError:
            return []
        return [] if top.styles.background.a == 1 else super()._background_screens

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):  # the warm-up gives the interpreter to the screen answering the key
            session = self.main_screen.link.session
            if session is not None:
                session.store_users.hold(UI_HOLD_S)
        await super().on_event(event)

    @on(RunCommand)
    def _run_command(self, message: RunCommand) -> None:
        """A palette entry: run it on the main screen, whichever screen the palette was opened over."""
        run_line(self.main_screen, message.command)


def with_model(config: Config, options: LaunchOptions, errors: list[str]) -> Config:
    """``config`` with its ``llm`` section resolved once: the config file, then CTXBENCH_LLM_* (unless
    ``options.llm_from_env`` is off), then the flags. A bad combination keeps the config's model
    and says why in ``errors``."""
    try:
        return resolve_model(config, from_env=options.llm_from_env, **options.llm_flags())
    except ProviderError as exc:
        errors.append(f"model: {exc}")
        return config
