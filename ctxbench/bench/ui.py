"""How fast the workbench paints and answers the mode hotkey (``ctxbench bench ui``).

1. First paint: ``ctxbench demo`` is started in a fresh process on a pseudo-terminal, several times;
   the time from just before the process starts to the terminal receiving the first frame of the main
   screen (its ``CTX:`` indicator) is reported — interpreter start-up and imports included, what the user
   waits for. The app knows nothing of this: the bench reads the terminal.
2. Mode hotkey → meter: the app runs headless on a repository (default: textual's own source), its
   index built and retrieval warm before timing; ctrl+t is pressed again and again. The probes live
   here, not in the app: a message hook sees the key arrive and the plan come back, a watcher sees
   the indicator change, and a callback after the meter's next refresh sees it painted.
   ``phase="warmup"`` presses from the first plan on, while the index is built and the model and the
   history warm (the presses made after the warm-up ended are not counted); ``loaded`` runs a CPU-bound
   process beside the app (``python -c "while 1: pass"``), an ordinary laptop day.
3. First and second start (``--starts``): ``ctxbench demo`` with its index and model, started twice on a fresh user
   data folder (the second finds the first's kept vectors), each timed phase by phase to ``semantic ready`` from the
   app's phase log (``service.phase_log``), with its resident memory (peak, and steady after the warm-up).
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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

FIRST_PAINT_TARGET_S = 0.8
MODE_TARGET_MS = 50.0
TERMINAL_SIZE = (120, 36)
FIRST_FRAME_MARK = b"CTX:"  # the mode indicator: drawn in the main screen's first frame
WARM_POLL_S = 0.05
PRESS_POLL_S = 0.001


class BenchError(RuntimeError):
    """The app under test did not get as far as the bench needs."""


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


def busy_core() -> subprocess.Popen:
    """A CPU-bound process beside the app (``python -c "while 1: pass"``), killed with the bench even when the bench
    dies without cleaning up (a crash left one spinning, and every later figure measured beside it)."""
    def die_with_parent() -> None:  # Linux: PR_SET_PDEATHSIG = 1, SIGKILL = 9
        import ctypes

        try:
            ctypes.CDLL(None).prctl(1, 9)
        except (OSError, AttributeError):
            pass

    return subprocess.Popen([sys.executable, "-c", "while 1: pass"],
                            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None)


@contextmanager
def beside(loaded: bool) -> Iterator[None]:
    """With ``loaded``: a CPU-bound process (``busy_core``) runs beside the app for the length of the block."""
    busy = busy_core() if loaded else None
    try:
        yield
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


async def warm_up_seconds(main, semantic: bool, started: float) -> float:
    """Once the warm-up is over (the presses may have run beside it): its seconds since ``started``."""
    while not is_warm(main, semantic):
        await asyncio.sleep(WARM_POLL_S)
    return time.perf_counter() - started


def default_repo() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("textual")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


# -- first paint -------------------------------------------------------------------------------------------

def _terminal() -> tuple[int, int]:
    """A pseudo-terminal of ``TERMINAL_SIZE``: (master, slave)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    cols, rows = TERMINAL_SIZE
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return master, slave


def _watch(master: int, marks: tuple[bytes, ...], seen: dict[bytes, float],
           all_seen: threading.Event | None = None) -> threading.Thread:
    """A daemon thread (not started) that reads the terminal until it closes and notes in ``seen`` when each of
    ``marks`` first appears (a mark split across reads included); it sets ``all_seen`` once every mark has."""
    keep = max(len(mark) for mark in marks)

    def drain() -> None:
        tail = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            if len(seen) == len(marks):
                continue
            tail = (tail + chunk)[-(len(chunk) + keep):]
            for mark in marks:
                if mark not in seen and mark in tail:
                    seen[mark] = time.perf_counter()
            if all_seen is not None and len(seen) == len(marks):
                all_seen.set()

    return threading.Thread(target=drain, daemon=True)


def first_paint_once(timeout_s: float = 60.0) -> float:
    """Seconds from starting ``ctxbench demo`` to its first frame on a pseudo-terminal."""
    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-ui-") as tmp:
        env = dict(os.environ, TERM=os.environ.get("TERM", "xterm-256color"), HF_HUB_OFFLINE="1",
                   CTXBENCH_DB=str(Path(tmp) / "demo.db"))
        master, slave = _terminal()
        painted = threading.Event()
        seen: dict[bytes, float] = {}
        reader = _watch(master, (FIRST_FRAME_MARK,), seen, painted)
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "demo", "--no-index"], stdin=slave,
                                stdout=slave, stderr=slave, env=env, close_fds=True, start_new_session=True)
        reader.start()
        os.close(slave)
        try:
            if not painted.wait(timeout_s):
                raise BenchError("the demo did not paint within the time limit")
        finally:
            proc.kill()
            proc.wait()
            os.close(master)
        return seen[FIRST_FRAME_MARK] - started


def first_paint(runs: int) -> Stats:
    first_paint_once()  # warm the OS file cache; not counted
    return Stats.of([first_paint_once() for _ in range(runs)])


# -- first and second start ----------------------------------------------------------------------------------

READY_MARK = b"semantic ready"  # the embedder slot's text once semantic search is on
START_PHASES = ("first paint", "session open", "first plan", "code index", "model loaded", "vector index",
                "history vectors", "semantic ready")
RSS_POLL_S = 0.1
STEADY_S = 3.0  # after semantic ready: the RSS reported as steady is the one measured this long after it


@dataclass(frozen=True)
class StartReport:
    """One ``ctxbench demo`` start to semantic ready: each phase's seconds since the process started (from the app's
    phase log, ``service.phase_log``), when the terminal showed the first frame and ``semantic ready``, and the
    process's resident memory (peak, and ``STEADY_S`` after semantic ready)."""

    which: str  # first (nothing kept) | second (the first start's vectors kept)
    phases: dict[str, float]
    painted_s: float  # the first frame on the terminal
    ready_on_screen_s: float  # ``semantic ready`` on the terminal (0.0: not seen)
    rss_peak_mb: float
    rss_steady_mb: float


def demo_start(which: str, data_home: Path, timeout_s: float = 300.0) -> StartReport:
    """Start ``ctxbench demo`` (with its index and model) on a pseudo-terminal with ``data_home`` as the user data
    folder, wait for semantic ready (in its phase log, or on the terminal for a build without one) and ``STEADY_S``
    more, then quit it as a user does (ctrl+q), so it keeps its vectors for the next start."""
    from ctxbench.service import phase_log

    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-start-") as tmp:
        log = Path(tmp) / "phases.log"
        env = dict(os.environ, TERM=os.environ.get("TERM", "xterm-256color"), HF_HUB_OFFLINE="1",
                   XDG_DATA_HOME=str(data_home), **{phase_log.ENV: str(log)})
        master, slave = _terminal()
        seen: dict[bytes, float] = {}
        reader = _watch(master, (FIRST_FRAME_MARK, READY_MARK), seen)
        wall, started = time.time(), time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "demo"], stdin=slave, stdout=slave, stderr=slave,
                                env=env, close_fds=True, start_new_session=True)
        reader.start()
        os.close(slave)
        peak = steady = 0.0
        ready_at = None
        try:
            while True:
                rss = _rss_mb(proc.pid)
                peak = max(peak, rss)
                now = time.perf_counter()
                if ready_at is None and (READY_MARK in seen or "semantic ready" in phase_log.read(log, wall)):
                    ready_at = now
                if ready_at is not None and now - ready_at >= STEADY_S:
                    steady = rss
                    break
                if now - started > timeout_s or proc.poll() is not None:
                    raise BenchError(f"the demo's {which} start did not reach semantic ready")
                time.sleep(RSS_POLL_S)
            os.write(master, b"\x11")  # ctrl+q: quit as a user does, so the demo keeps its vectors
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            os.close(master)
        phases = phase_log.read(log, wall)
        return StartReport(which, {p: round(phases[p], 3) for p in START_PHASES if p in phases},
                           seen.get(FIRST_FRAME_MARK, started) - started,
                           (seen[READY_MARK] - started) if READY_MARK in seen else 0.0, peak, steady)


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def demo_starts() -> tuple[StartReport, StartReport]:
    """The demo's first start (no vectors kept: a fresh user data folder) and its second (the first's kept)."""
    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-data-") as data:
        first = demo_start("first", Path(data))
        return first, demo_start("second", Path(data))


# -- mode hotkey -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModeReport:
    repo: str
    symbols: int
    semantic: bool
    phase: str  # idle (after the warm-up) | warmup (during it)
    loaded: bool  # a CPU-bound process ran beside the app
    indicator_ms: Stats
    meter_ms: Stats
    painted_ms: Stats
    warmup_s: float


class _Probe:
    """Times of one press: the key arriving, the indicator changing, the plan applied, the meter painted."""

    def __init__(self) -> None:
        self.pressed = self.indicator = self.meter = self.painted = 0.0
        self.expecting = False
        self.request = 0  # the replan the press asks for (numbered by the screen's link)

    def reset(self, request: int) -> None:
        self.pressed = self.indicator = self.meter = self.painted = 0.0
        self.expecting = True
        self.request = request


def is_warm(main, semantic: bool) -> bool:
    session = main.session
    return session is not None and session.retrieval_ready and (session.semantic_ready or not semantic)


async def mode_latency(repo: Path, presses: int, semantic: bool, config, *, phase: str = "idle",
                       loaded: bool = False) -> ModeReport:
    from textual.events import Key

    from ctxbench.service.options import LaunchOptions
    from ctxbench.tui import messages as msg
    from ctxbench.tui.app import CtxbenchApp

    probe = _Probe()
    holder: dict[str, object] = {}

    def hook(message) -> None:
        if not probe.expecting:
            return
        if isinstance(message, Key) and message.key == "ctrl+t" and not probe.pressed:
            probe.pressed = time.perf_counter()
        elif isinstance(message, msg.PlanReady) and probe.pressed and not probe.meter \
                and message.request >= probe.request:  # the press's replan, not one asked for before it
            main = holder["main"]

            def applied() -> None:  # runs right after the screen has handled the plan
                probe.meter = time.perf_counter()
                main.meter.call_after_refresh(painted)  # type: ignore[attr-defined]

            def painted() -> None:
                probe.painted = time.perf_counter()

            main.call_next(applied)  # type: ignore[attr-defined]

    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-ui-") as tmp:
        options = LaunchOptions(db_path=Path(tmp) / "bench.db", repo=repo, new_session=True, title="bench ui",
                                mode="light", warm_embedder=semantic)
        app = CtxbenchApp(options, config)
        app._disable_notifications = True
        started = time.perf_counter()
        with beside(loaded):
            async with app.run_test(size=TERMINAL_SIZE, message_hook=hook) as pilot:
                main = app.main_screen
                holder["main"] = main
                if phase == "warmup":  # from the first plan on, while the index and the model warm
                    while main.view is None:
                        await asyncio.sleep(WARM_POLL_S)
                    main.prompt.value = QUESTION
                    await pilot.pause()
                else:
                    while True:  # the index is built and retrieval plugged in (and the embedder warm, if asked)
                        if is_warm(main, semantic) and not any(w.is_running for w in app.workers) \
                                and not main.meter.pending:
                            break
                        await asyncio.sleep(WARM_POLL_S)
                    main.prompt.value = QUESTION
                    await pilot.pause()
                    main.request_plan()
                    while main.meter.pending:
                        await asyncio.sleep(WARM_POLL_S)
                    await pilot.pause()
                report = await _press(pilot, main, probe, presses, semantic, phase)
                warmup = await warm_up_seconds(main, semantic, started)
        indicator, meter, painted = report
        attached = main.session.attached if main.session is not None else None
        symbols = attached.symbols if attached is not None else 0
        return ModeReport(str(repo), symbols, semantic, phase, loaded, Stats.of(indicator), Stats.of(meter),
                          Stats.of(painted), warmup)


QUESTION = "How does the compositor decide which widgets to repaint after a style change?"


async def _press(pilot, main, probe: _Probe, presses: int, semantic: bool, phase: str):
    """Press ctrl+t ``presses`` times (during the warm-up: until it ends, at most ``presses`` times); the
    indicator, meter-updated and meter-painted latencies of each press, in ms."""
    from ctxbench.tui.widgets.mode_indicator import ModeIndicator

    def indicator_changed(_mode: str) -> None:
        if probe.expecting and not probe.indicator:
            probe.indicator = time.perf_counter()

    main.watch(main.query_one(ModeIndicator), "mode", indicator_changed, init=False)
    indicator: list[float] = []
    meter: list[float] = []
    painted: list[float] = []
    for _ in range(presses):
        if phase == "warmup" and is_warm(main, semantic):
            break  # the warm-up is over: later presses are the idle row's
        probe.reset(main.link.requested + 1)
        await pilot.press("ctrl+t")
        while not (probe.painted and probe.indicator) or main.meter.pending:
            await asyncio.sleep(PRESS_POLL_S)
        probe.expecting = False
        indicator.append((probe.indicator - probe.pressed) * 1000)
        meter.append((probe.meter - probe.pressed) * 1000)
        painted.append((probe.painted - probe.pressed) * 1000)
    if not meter:
        raise BenchError("the warm-up ended before the first press: nothing to time during it")
    return indicator, meter, painted


def run_mode_latency(repo: Path, presses: int, semantic: bool, config, *, phase: str = "idle",
                     loaded: bool = False) -> ModeReport:
    return asyncio.run(mode_latency(repo, presses, semantic, config, phase=phase, loaded=loaded))
