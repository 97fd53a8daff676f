"""``ctxbench bench ui``: how fast the workbench paints and answers the mode hotkey.

1. First paint: ``ctxbench demo`` is started in a fresh process on a pseudo-terminal, several
   times; the time from just before the process starts to the first refresh of the main
   screen is reported (interpreter start-up and imports included — what the user waits for).
2. Mode hotkey → meter: the app runs headless on a repository (default: textual's own source),
   its index built and retrieval warm before timing; ctrl+t is pressed again and again and
   the time from the key's action to the meter holding the new plan (and to the next paint)
   is reported.
"""
from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from ctxbench.cli.common import config_option, emit_json, get_config

FIRST_PAINT_TARGET_S = 0.8
MODE_TARGET_MS = 50.0
TERMINAL_SIZE = (120, 36)


@dataclass(frozen=True)
class Stats:
    runs: int
    p50: float
    p95: float
    max: float
    mean: float

    @staticmethod
    def of(values: list[float]) -> "Stats":
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, max(0, int(round(0.95 * len(ordered))) - 1))]
        return Stats(len(values), statistics.median(ordered), p95, ordered[-1], statistics.fmean(ordered))


def _default_repo() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("textual")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


# -- first paint -----------------------------------------------------------------------------------

def first_paint_once(timeout_s: float = 60.0) -> float:
    """Seconds from starting ``ctxbench demo`` to its first paint, on a pseudo-terminal."""
    import fcntl
    import pty
    import struct
    import termios

    from ctxbench.tui.app import FIRST_PAINT_ENV, START_ENV

    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-ui-") as tmp:
        marker = Path(tmp) / "first_paint"
        env = dict(os.environ, TERM=os.environ.get("TERM", "xterm-256color"), HF_HUB_OFFLINE="1",
                   CTXBENCH_DB=str(Path(tmp) / "demo.db"))
        env[FIRST_PAINT_ENV] = str(marker)
        master, slave = pty.openpty()
        cols, rows = TERMINAL_SIZE
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        drained = threading.Event()

        def drain() -> None:
            while True:
                try:
                    if not os.read(master, 65536):
                        break
                except OSError:
                    break
            drained.set()

        reader = threading.Thread(target=drain, daemon=True)
        env[START_ENV] = f"{time.time():.6f}"
        proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "demo", "--no-index"], stdin=slave,
                                stdout=slave, stderr=slave, env=env, close_fds=True, start_new_session=True)
        reader.start()
        os.close(slave)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise click.ClickException("the demo did not paint within the time limit")
        finally:
            os.close(master)
        if not marker.exists():
            raise click.ClickException(f"the demo exited ({proc.returncode}) without reporting its first paint")
        return float(marker.read_text().strip())


# -- mode hotkey -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModeReport:
    repo: str
    symbols: int
    semantic: bool
    indicator_ms: Stats
    meter_ms: Stats
    painted_ms: Stats
    warmup_s: float


async def _mode_latency(repo: Path, presses: int, semantic: bool, config) -> ModeReport:
    from ctxbench.tui.app import CtxbenchApp
    from ctxbench.tui.bridge import LaunchOptions

    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-ui-") as tmp:
        options = LaunchOptions(db_path=Path(tmp) / "bench.db", repo=repo, new_session=True, title="bench ui",
                                mode="light", warm_embedder=semantic)
        app = CtxbenchApp(options, config)
        app._disable_notifications = True
        started = time.perf_counter()
        async with app.run_test(size=TERMINAL_SIZE) as pilot:
            main = app.main_screen
            while True:  # the index is built and retrieval plugged in (and the embedder warm, if asked)
                bridge = main.bridge
                warm = bridge is not None and bridge.retrieval_ready and (bridge.semantic_ready or not semantic)
                if warm and not any(w.is_running for w in app.workers) and not main.meter.pending:
                    break
                await asyncio.sleep(0.05)
            warmup = time.perf_counter() - started
            main.prompt.value = "How does the compositor decide which widgets to repaint after a style change?"
            main._draft = main.prompt.value
            main.request_plan(reason="bench draft")
            await app.workers.wait_for_complete()
            await pilot.pause()
            indicator: list[float] = []
            meter: list[float] = []
            painted: list[float] = []
            for _ in range(presses):
                before = main.meter_painted_generation
                await pilot.press("ctrl+t")
                while main.meter.pending or main.meter_painted_generation == before or \
                        main.meter_painted_generation < main._requested:
                    await asyncio.sleep(0.001)
                pressed = main.mode_pressed_at
                indicator.append((main.indicator_updated_at - pressed) * 1000)
                meter.append((main.meter_updated_at - pressed) * 1000)
                painted.append((main.meter_painted_at - pressed) * 1000)
            symbols = 0
            retriever = getattr(main.bridge.wb.retriever, "retriever", None)
            view = getattr(retriever, "index", None)
            if view is not None:
                symbols = len(view.cards)
        return ModeReport(str(repo), symbols, semantic, Stats.of(indicator), Stats.of(meter), Stats.of(painted),
                          warmup)


@click.command(help="UI speed: first paint of `ctxbench demo` and the mode hotkey → meter latency.")
@click.option("--runs", type=click.IntRange(min=1), default=5, show_default=True, help="Demo starts to time.")
@click.option("--presses", type=click.IntRange(min=3), default=30, show_default=True, help="Mode hotkey presses.")
@click.option("--repo", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Repository for the hotkey timing (default: textual's source).")
@click.option("--semantic/--no-semantic", default=False, show_default=True,
              help="Warm the embedding model and vector index before timing the hotkey.")
@click.option("--skip-paint", is_flag=True, help="Only time the hotkey.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@config_option
def command(runs: int, presses: int, repo: Path | None, semantic: bool, skip_paint: bool, as_json: bool,
            config_path) -> None:
    import dataclasses

    config = get_config(config_path)
    config = dataclasses.replace(config, ui=dataclasses.replace(config.ui, live_preview=False))
    report: dict = {}
    if not skip_paint:
        first_paint_once()  # warm the OS file cache; not counted
        times = [first_paint_once() for _ in range(runs)]
        paint = Stats.of(times)
        report["first_paint_s"] = asdict(paint)
        report["first_paint_target_s"] = FIRST_PAINT_TARGET_S
        if not as_json:
            click.echo(f"first paint of `ctxbench demo` ({runs} runs, pty {TERMINAL_SIZE[0]}x{TERMINAL_SIZE[1]}): "
                       f"p50 {paint.p50:.3f} s · p95 {paint.p95:.3f} s · max {paint.max:.3f} s "
                       f"({'meets' if paint.p95 <= FIRST_PAINT_TARGET_S else 'MISSES'} ≤ {FIRST_PAINT_TARGET_S} s)")
    target = repo or _default_repo()
    mode = asyncio.run(_mode_latency(target, presses, semantic, config))
    report["mode_hotkey"] = asdict(mode)
    report["mode_target_ms"] = MODE_TARGET_MS
    if as_json:
        emit_json(report)
        return
    click.echo(f"mode hotkey on {mode.repo} ({mode.symbols} symbols, semantic {'on' if mode.semantic else 'off'}, "
               f"warm-up {mode.warmup_s:.1f} s, {mode.meter_ms.runs} presses):")
    for name, s in (("indicator", mode.indicator_ms), ("meter updated", mode.meter_ms),
                    ("meter painted", mode.painted_ms)):
        click.echo(f"  {name:<14} p50 {s.p50:7.2f} ms · p95 {s.p95:7.2f} ms · max {s.max:7.2f} ms")
    verdict = "meets" if mode.meter_ms.p95 <= MODE_TARGET_MS else "MISSES"
    click.echo(f"  meter p95 {verdict} the target of {MODE_TARGET_MS:.0f} ms")
