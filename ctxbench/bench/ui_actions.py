"""Key to visible effect for every action key of the workbench (``ctxbench bench ui --actions``).

The app runs headless on a repository (default: textual's own source) with a question typed, as the mode hotkey's
timing does (``bench.ui``), and one round presses each action key once: the budget up and down (the meter shows the
new budget), the overlay's key (the overlay's table is on the screen), then, in the overlay, pin, lease, unpin, drop,
accept and reject, each on a row it applies to (the row shows the action's mark). Each press is timed from the key
arriving (a message hook) to the first screen refresh after the effect is there (``call_after_refresh`` on the
widget that shows it): what the user sees, not when the engine has replanned (the figures stay marked pending until
then). The probes live here; the app knows nothing of them.

``phase="idle"`` presses after the warm-up, each once the app has settled from the press before; ``warmup`` presses
from the first plan on while the index (and the model, with ``semantic``) warms, without waiting for replans, and
stops at the end of the warm-up; ``loaded`` runs a CPU-bound process beside the app.
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ctxbench.bench.ui import (PRESS_POLL_S, QUESTION, TERMINAL_SIZE, WARM_POLL_S, BenchError, Stats, beside,
                               is_warm, warm_up_seconds)

ACTION_TARGET_MS = {"warmup": 100.0, "idle": 50.0, "loaded": 250.0}  # key to visible effect, p95
OVERLAY_OPEN_TARGET_MS = 150.0
EFFECT_TIMEOUT_S = 30.0  # a press whose effect never shows fails the bench
SETTLE_TIMEOUT_S = 120.0
WARMUP_ROUND_GAP_S = 2.0  # between two rounds during the warm-up
CURSOR_GAP_S = 0.15  # between moving to a row and pressing its key, as a user's hand does

# (action, its key) for the overlay's row actions
ROW_ACTIONS: tuple[tuple[str, str], ...] = (
    ("pin", "ctrl+s"), ("lease", "ctrl+e"), ("unpin", "ctrl+u"), ("drop", "ctrl+d"), ("accept", "ctrl+y"),
    ("reject", "ctrl+n"),
)
ACTIONS = ("budget up", "budget down", "overlay open", *(a for a, _ in ROW_ACTIONS))


@dataclass(frozen=True)
class ActionsReport:
    """One phase's timings: each action's key-to-visible-effect ms (``presses``: how many of each were timed)."""

    repo: str
    semantic: bool
    phase: str  # idle (after the warm-up) | warmup (during it)
    loaded: bool  # a CPU-bound process ran beside the app
    timings: tuple[tuple[str, Stats], ...]
    warmup_s: float
    moved: int = 0  # row actions not timed: a new plan moved the selection off their row before the key arrived

    @property
    def target_ms(self) -> float:
        return ACTION_TARGET_MS["loaded" if self.loaded else self.phase]


class _KeyClock:
    """When the key being timed arrived at the app, and the overlay row it found selected (set by the message hook)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.key = ""
        self.arrived = 0.0
        self.row = ""  # the target of the overlay row selected as the key arrived ("": none)

    def expect(self, key: str) -> None:
        self.key, self.arrived, self.row = key, 0.0, ""

    def hook(self, message: Any) -> None:
        from textual.events import Key

        if self.key and not self.arrived and isinstance(message, Key) and message.key == self.key:
            self.arrived = time.perf_counter()
            row = getattr(self.app.screen, "selected_row", None)
            self.row = row.target if row is not None else ""


class _Painted:
    """When the screen first refreshed after an effect was made: a probe calls :meth:`shown` on the widget showing it
    the moment the app makes the effect (a poll after the press would come after the pilot's wait for the app to be
    idle, and could miss a mark the engine's own plan replaced)."""

    def __init__(self) -> None:
        self.at: list[float] = []
        self.armed = False

    def shown(self, widget: Any) -> None:
        if self.armed:
            self.armed = False
            widget.call_after_refresh(lambda: self.at.append(time.perf_counter()))


def _press(app: Any, key: str) -> None:
    """The key, as the terminal driver posts it: ``Pilot.press`` also waits for the app to be idle, which during the
    warm-up (progress messages all the time) took seconds per key, and after it came after the effect anyway."""
    from textual import events

    app.post_message(events.Key(key, None))


async def _timed(pilot, clock: _KeyClock, key: str, painted: _Painted, row: str = "") -> float | None:
    """Press ``key``; ms from its arrival to the refresh after its effect (``painted``, armed here). ``row``: the
    overlay row it acts on; None when a new plan had moved the selection off it before the key arrived (during the
    warm-up plans arrive all the time): the press acted on another row, or on none, and is not timed."""
    clock.expect(key)
    painted.at.clear()
    painted.armed = True
    _press(pilot.app, key)
    deadline = time.perf_counter() + EFFECT_TIMEOUT_S
    while not painted.at:
        if row and clock.arrived and clock.row != row:
            painted.armed = False
            clock.expect("")
            return None
        if time.perf_counter() > deadline:
            raise BenchError(f"{key}: its effect never showed")
        await asyncio.sleep(PRESS_POLL_S)
    arrived = clock.arrived
    clock.expect("")
    if not arrived:
        raise BenchError(f"{key}: the key never reached the app")
    return (painted.at[0] - arrived) * 1000


async def _settled(app, main) -> None:
    """Every action and replan asked for is done and shown (the idle row presses a quiet app)."""
    deadline = time.perf_counter() + SETTLE_TIMEOUT_S
    while main.meter.pending or any(w.is_running and w.group in ("plan", "action") for w in app.workers):
        if time.perf_counter() > deadline:
            raise BenchError("the workbench did not settle between presses")
        await asyncio.sleep(WARM_POLL_S)


def _row_for(overlay, action: str, used: set[str], pinned: str):
    """A row ``action`` applies to (on what the overlay shows now), not one used this round; unpin: the row pinned
    this round (``pinned``)."""
    for index, row in enumerate(overlay.shown_rows):
        if row.kind == "divider":
            continue
        if action == "unpin":
            ok = bool(pinned) and row.target == pinned and bool(overlay.pin_shown(row))
        elif row.target in used:
            ok = False
        elif action in ("accept", "reject"):
            ok = row.kind == "suggestion"
        else:  # pin, lease, drop: an included card, not pinned
            ok = row.kind == "included" and row.target.startswith("card:") and not overlay.pin_shown(row)
        if ok:
            return index, row
    return None


async def _round(pilot, app, main, clock: _KeyClock, painted: "_Painted", times: dict[str, list[float]],
                 quiet: bool) -> int:
    """Each action key once (an overlay row action without a row it applies to is left out of this round); how many
    row actions were not timed (a new plan moved the selection off their row before the key arrived)."""
    from textual.widgets import DataTable

    from ctxbench.tui.screens.overlay import ContextOverlay

    async def between() -> None:
        if quiet:
            await _settled(app, main)

    for action, key in (("budget up", "ctrl+up"), ("budget down", "ctrl+down")):
        times[action].append(await _timed(pilot, clock, key, painted))  # the meter shows the budget: change_settings
        await between()
    times["overlay open"].append(await _timed(pilot, clock, "ctrl+o", painted))  # its table is filled: _fill
    overlay = app.screen
    if not isinstance(overlay, ContextOverlay):
        raise BenchError("ctrl+o did not open the context overlay")
    await between()
    used: set[str] = set()
    pinned = ""
    moved = 0
    for action, key in ROW_ACTIONS:  # the row shows the action's mark: mark
        found = _row_for(overlay, action, used, pinned)
        if found is None:
            continue
        index, row = found
        used.add(row.target)
        overlay.query_one(DataTable).move_cursor(row=index, animate=False)
        await asyncio.sleep(CURSOR_GAP_S)  # what moving there sets off (detail line, footer keys) is not the key's
        took = await _timed(pilot, clock, key, painted, row.target)
        if took is None:
            moved += 1
            continue
        times[action].append(took)
        if action == "pin":
            pinned = row.target
        await between()
    await pilot.press("escape")
    while isinstance(app.screen, ContextOverlay):
        await asyncio.sleep(WARM_POLL_S)
    await between()
    return moved


@contextmanager
def _probes(main, painted: _Painted, hooks: list[Callable[[Any], None]]) -> Iterator[None]:
    """While the bench runs: the screen's settings change (the meter shows a new budget), the overlay's table filled
    with rows or the overlay shown again (``hooks``: the message hook's), a row marked by an action, each arm
    ``painted`` on the widget showing it. Wrappers around the app's own methods, removed after."""
    from textual.events import ScreenResume
    from textual.widgets import DataTable

    from ctxbench.tui.screens.overlay import ContextOverlay

    change_settings = main.change_settings

    def changed(**changes: Any) -> None:
        change_settings(**changes)
        if "budget" in changes:
            painted.shown(main.meter)

    fill, mark = ContextOverlay._fill, ContextOverlay.mark

    def filled(overlay) -> None:  # the first opening fills the table once the screen is up
        fill(overlay)
        if overlay.shown_rows and overlay.is_current:
            painted.shown(overlay.query_one(DataTable))

    def marked(overlay, action: str, row) -> None:
        mark(overlay, action, row)
        painted.shown(overlay.query_one(DataTable))

    def resumed(message: Any) -> None:  # a later opening shows the overlay kept, filled before it is pushed
        screen = main.app.screen
        if isinstance(message, ScreenResume) and isinstance(screen, ContextOverlay) and screen.shown_rows:
            painted.shown(screen.query_one(DataTable))

    main.change_settings = changed
    hooks.append(resumed)
    ContextOverlay._fill, ContextOverlay.mark = filled, marked
    try:
        yield
    finally:
        ContextOverlay._fill, ContextOverlay.mark = fill, mark
        del main.change_settings
        hooks.remove(resumed)


async def action_latency(repo: Path, rounds: int, semantic: bool, config, *, phase: str = "idle",
                         loaded: bool = False, question: str = QUESTION) -> ActionsReport:
    from ctxbench.service.options import LaunchOptions
    from ctxbench.tui.app import CtxbenchApp

    times: dict[str, list[float]] = {a: [] for a in ACTIONS}
    moved = 0
    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-actions-") as tmp:
        options = LaunchOptions(db_path=Path(tmp) / "bench.db", repo=repo, new_session=True, title="bench ui",
                                mode="light", warm_embedder=semantic)
        app = CtxbenchApp(options, config)
        app._disable_notifications = True
        clock = _KeyClock(app)
        hooks: list[Callable[[Any], None]] = [clock.hook]
        started = time.perf_counter()
        with beside(loaded):
            async with app.run_test(size=TERMINAL_SIZE, message_hook=lambda m: [h(m) for h in hooks]) as pilot:
                main = app.main_screen
                if phase == "warmup":
                    while main.view is None:
                        await asyncio.sleep(WARM_POLL_S)
                else:
                    while not (is_warm(main, semantic) and not any(w.is_running for w in app.workers)):
                        await asyncio.sleep(WARM_POLL_S)
                main.prompt.value = question
                await pilot.pause()
                main.request_plan()
                if phase != "warmup":  # during the warm-up the keys are pressed at once, the replan running
                    await _settled(app, main)
                painted = _Painted()
                with _probes(main, painted, hooks):
                    for _ in range(rounds):
                        if phase == "warmup" and is_warm(main, semantic):
                            break  # the warm-up is over: later presses are the idle row's
                        moved += await _round(pilot, app, main, clock, painted, times, quiet=phase != "warmup")
                        if phase == "warmup":  # the rounds spread over the warm-up, not all in its first second
                            await asyncio.sleep(WARMUP_ROUND_GAP_S)
                warmup = await warm_up_seconds(main, semantic, started)
    if not times["budget up"]:
        raise BenchError("the warm-up ended before the first round: nothing to time during it")
    return ActionsReport(str(repo), semantic, phase, loaded,
                         tuple((a, Stats.of(v)) for a, v in times.items() if v), warmup, moved)


def run_action_latency(repo: Path, rounds: int, semantic: bool, config, *, phase: str = "idle",
                       loaded: bool = False) -> ActionsReport:
    return asyncio.run(action_latency(repo, rounds, semantic, config, phase=phase, loaded=loaded))
