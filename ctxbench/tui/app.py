"""The ctxbench workbench: a Textual app around one session of the engine."""
from __future__ import annotations

import os
import time
from pathlib import Path

from textual.app import App

from ctxbench.config import Config
from ctxbench.tui.bridge import LaunchOptions
from ctxbench.tui.commands import WorkbenchCommands
from ctxbench.tui.keymap import keymap_from_config
from ctxbench.tui.screens.main import MainScreen
from ctxbench.tui.theme_files import VARIABLE_DEFAULTS, load_themes

FALLBACK_THEME = "ctxbench-dark"


class CtxbenchApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "ctxbench"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, options: LaunchOptions | None = None, config: Config | None = None, *,
                 first_paint_hook=None) -> None:
        super().__init__()
        self.options = options or LaunchOptions()
        self.llm_errors: list[str] = []
        self.config_ = with_model(config or Config(), self.options, self.llm_errors)
        self._first_paint_hook = first_paint_hook
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

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(VARIABLE_DEFAULTS)

    @property
    def main_screen(self) -> MainScreen:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        raise LookupError("no main screen")

    def on_mount(self) -> None:
        self.push_screen(MainScreen(self.options, self.config_, first_paint_hook=self._first_paint_hook))
        for problem in (*self.theme_errors, *self.keymap_errors, *self.llm_errors):
            self.notify(problem, severity="warning", timeout=8)


def with_model(config: Config, options: LaunchOptions, errors: list[str]) -> Config:
    """``config`` with its ``llm`` section resolved once: the config file, then CTXBENCH_LLM_* (unless
    ``options.llm_from_env`` is off), then the flags. A bad combination keeps the config's model
    and says why in ``errors``."""
    import dataclasses

    from ctxbench.llm.providers import ProviderError, resolve_llm_config

    try:
        llm = resolve_llm_config(config.llm, **options.llm_flags(), environ=None if options.llm_from_env else {})
    except ProviderError as exc:
        errors.append(f"model: {exc}")
        return config
    return dataclasses.replace(config, llm=llm)


FIRST_PAINT_ENV = "CTXBENCH_BENCH_FIRST_PAINT"  # file to write the first-paint time to (ctxbench bench ui)
START_ENV = "CTXBENCH_BENCH_T0"  # wall-clock time the benchmark started the process


def first_paint_hook_from_env():
    """When ``ctxbench bench ui`` runs the app: a hook that records the first paint and quits."""
    target = os.environ.get(FIRST_PAINT_ENV)
    if not target:
        return None

    def hook(app: CtxbenchApp) -> None:
        start = float(os.environ.get(START_ENV, "0") or 0)
        Path(target).write_text(f"{time.time() - start:.6f}\n")
        app.exit()

    return hook
