"""What the main screen offers the controllers it wires up (slash commands, turns), as protocols, so the
controllers never import the screen."""
from __future__ import annotations

from typing import Any, Protocol

from textual.app import App
from textual.timer import Timer

from ctxbench.config import Config
from ctxbench.records.diffs import PlanDiff
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.views import PlanView
from ctxbench.tui.session_link import SessionLink
from ctxbench.tui.widgets.chat import ChatPane
from ctxbench.tui.widgets.status_line import StatusLine


class MainHost(Protocol):
    """What the controllers of the main screen need of it."""

    app: App
    config: Config
    link: SessionLink
    view: PlanView | None
    settings: SessionSettings | None

    @property
    def draft(self) -> str: ...

    def change_settings(self, **changes: object) -> None: ...

    def notify(self, message: str, *, title: str = "", severity: str = "information",
               timeout: float | None = None) -> None: ...


class OnTop(Protocol):
    """The screens the main screen pushes over itself (``tui.screens.on_top.ScreensOnTop``)."""

    def viewer(self, title: str, body: str, language: str = "text", subtitle: str = "", wrap: bool = True,
               *, copy_text: str = "", save_as: str = "") -> None: ...

    def payload(self, as_json: bool = False) -> None: ...

    def open_overlay(self) -> None: ...

    def replay(self, start: int) -> None: ...

    def diff(self, diff: PlanDiff) -> None: ...

    def whatif(self) -> None: ...


class SlashHost(MainHost, Protocol):
    """What the slash command controller needs of the main screen."""

    @property
    def turn_running(self) -> bool: ...

    @property
    def screens(self) -> OnTop: ...

    def request_rebuild(self) -> None: ...

    def show_status(self, *, model: str | None = None, task: str | None = None) -> None: ...


class TurnHost(Protocol):
    """What the feed needs of the main screen."""

    config: Config
    link: SessionLink

    @property
    def chat(self) -> ChatPane: ...

    @property
    def status(self) -> StatusLine: ...

    def notify(self, message: str, *, severity: str = "information", timeout: float | None = None) -> None: ...

    async def show_plan(self, view: PlanView) -> None: ...

    def give_back(self, text: str) -> None: ...  # a message that was not sent, back into the input

    def request_plan(self) -> None: ...


class WatchHost(TurnHost, Protocol):
    """What ``open --watch`` needs of the main screen: a turn host that runs timers and workers."""

    app: App

    def set_interval(self, interval: float, callback: Any) -> Timer: ...

    def show_status(self, *, model: str | None = None, task: str | None = None) -> None: ...

    def run_worker(self, work: Any, **kwargs: Any) -> Any: ...
