"""``ctxbench bench ui``: how fast the workbench paints and answers the mode hotkey (``ctxbench.bench.ui``)."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import click

from ctxbench.cli.common import config_option, emit_json, get_config


@click.command(help="UI speed: first paint of `ctxbench demo` and the mode hotkey → meter latency.")
@click.option("--runs", type=click.IntRange(min=1), default=5, show_default=True, help="Demo starts to time.")
@click.option("--presses", type=click.IntRange(min=3), default=30, show_default=True, help="Mode hotkey presses.")
@click.option("--repo", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Repository for the hotkey timing (default: textual's source).")
@click.option("--semantic/--no-semantic", default=False, show_default=True,
              help="Warm the embedding model and vector index before timing the hotkey.")
@click.option("--skip-paint", is_flag=True, help="Only time the hotkey.")
@click.option("--warmup", is_flag=True, help="Also time the hotkey during the warm-up (index, model, history).")
@click.option("--loaded", is_flag=True, help="Also time each row with a CPU-bound process beside the app.")
@click.option("--starts", is_flag=True,
              help="Also time the demo's first and second start to semantic ready, phase by phase, with its memory.")
@click.option("--actions", is_flag=True,
              help="Also time every action key (budget up/down, overlay open, pin, lease, unpin, drop, accept, "
                   "reject): key to its effect on the screen, in the same rows (idle, --warmup, --loaded).")
@click.option("--action-rounds", type=click.IntRange(min=1), default=5, show_default=True,
              help="Rounds of action keys per row (each round presses every action key once).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@config_option
def command(runs: int, presses: int, repo: Path | None, semantic: bool, skip_paint: bool, warmup: bool, loaded: bool,
            starts: bool, actions: bool, action_rounds: int, as_json: bool, config_path) -> None:
    import dataclasses

    from ctxbench.cli.repo_support import fit_root

    config = get_config(config_path)
    if repo is not None:
        repo = fit_root(repo)
    config = dataclasses.replace(config, ui=dataclasses.replace(config.ui, live_preview=False))
    report: dict = {}
    from ctxbench.bench.ui import (
        FIRST_PAINT_TARGET_S, MODE_TARGET_MS, TERMINAL_SIZE, BenchError, default_repo, first_paint, run_mode_latency,
    )

    if not skip_paint:
        try:
            paint = first_paint(runs)
        except BenchError as exc:
            raise click.ClickException(str(exc)) from exc
        report["first_paint_s"] = asdict(paint)
        report["first_paint_target_s"] = FIRST_PAINT_TARGET_S
        if not as_json:
            click.echo(f"first paint of `ctxbench demo` ({runs} runs, pty {TERMINAL_SIZE[0]}x{TERMINAL_SIZE[1]}): "
                       f"p50 {paint.p50:.3f} s · p95 {paint.p95:.3f} s · max {paint.max:.3f} s "
                       f"({'meets' if paint.p95 <= FIRST_PAINT_TARGET_S else 'MISSES'} ≤ {FIRST_PAINT_TARGET_S} s)")
    if starts:
        _starts(report, as_json)
    rows = []
    for phase in ("idle", "warmup") if warmup else ("idle",):
        for busy in (False, True) if loaded else (False,):
            try:
                rows.append(run_mode_latency(repo or default_repo(), presses, semantic, config, phase=phase,
                                             loaded=busy))
            except BenchError as exc:
                raise click.ClickException(str(exc)) from exc
    mode = rows[0]
    report["mode_hotkey"] = asdict(mode)
    report["mode_hotkey_rows"] = [asdict(r) for r in rows]
    report["mode_target_ms"] = MODE_TARGET_MS
    action_rows = _actions(repo or default_repo(), action_rounds, semantic, config, warmup, loaded) if actions else []
    if action_rows:
        report["action_rows"] = [asdict(r) for r in action_rows]
    if as_json:
        emit_json(report)
        return
    click.echo(f"mode hotkey on {mode.repo} ({mode.symbols} symbols, semantic {'on' if mode.semantic else 'off'}, "
               f"warm-up {mode.warmup_s:.1f} s):")
    for r in rows:
        where = ("after the warm-up" if r.phase == "idle" else "during the warm-up") + (
            ", a CPU-bound process beside" if r.loaded else "")
        click.echo(f"  {where} ({r.meter_ms.runs} presses):")
        for name, s in (("indicator", r.indicator_ms), ("meter updated", r.meter_ms),
                        ("meter painted", r.painted_ms)):
            click.echo(f"    {name:<14} p50 {s.p50:7.2f} ms · p95 {s.p95:7.2f} ms · max {s.max:7.2f} ms")
    verdict = "meets" if mode.meter_ms.p95 <= MODE_TARGET_MS else "MISSES"
    click.echo(f"  idle meter p95 {verdict} the target of {MODE_TARGET_MS:.0f} ms")
    if action_rows:
        _echo_actions(action_rows)


def _actions(repo: Path, rounds: int, semantic: bool, config, warmup: bool, loaded: bool) -> list:
    from ctxbench.bench.ui import BenchError
    from ctxbench.bench.ui_actions import run_action_latency

    rows = []
    for phase in ("idle", "warmup") if warmup else ("idle",):
        for busy in (False, True) if loaded else (False,):
            try:
                rows.append(run_action_latency(repo, rounds, semantic, config, phase=phase, loaded=busy))
            except BenchError as exc:
                raise click.ClickException(str(exc)) from exc
    return rows


def _echo_actions(rows: list) -> None:
    from ctxbench.bench.ui_actions import OVERLAY_OPEN_TARGET_MS

    first = rows[0]
    click.echo(f"action keys on {first.repo} (semantic {'on' if first.semantic else 'off'}), key to its effect "
               "painted, ms:")
    for r in rows:
        where = ("after the warm-up" if r.phase == "idle" else "during the warm-up") + (
            ", a CPU-bound process beside" if r.loaded else "")
        overlay = max(OVERLAY_OPEN_TARGET_MS, r.target_ms)
        moved = f"; {r.moved} row actions not timed, a new plan moved the selection first" if r.moved else ""
        click.echo(f"  {where} (target p95 ≤ {r.target_ms:.0f} ms, the overlay's opening ≤ {overlay:.0f} ms, "
                   f"its first included{moved}):")
        for name, s in r.timings:
            target = overlay if name == "overlay open" else r.target_ms
            verdict = "meets" if s.p95 <= target else "MISSES"
            click.echo(f"    {name:<14} n={s.runs:<3} p50 {s.p50:7.2f} · p95 {s.p95:7.2f} · max {s.max:7.2f}  "
                       f"{verdict}")


def _starts(report: dict, as_json: bool) -> None:
    """The demo's first and second start, phase by phase (seconds since the process started), and its memory."""
    from ctxbench.bench.ui import START_PHASES, BenchError, demo_starts

    try:
        both = demo_starts()
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc
    report["demo_starts"] = [asdict(r) for r in both]
    if as_json:
        return
    click.echo("`ctxbench demo` to semantic ready, seconds since the process started (first: nothing kept; "
               "second: the first's vectors kept):")
    click.echo(f"  {'phase':<18}" + "".join(f"{r.which:>10}" for r in both))
    for phase in START_PHASES:
        click.echo(f"  {phase:<18}" + "".join(f"{r.phases.get(phase, float('nan')):>10.2f}" for r in both))
    for name, value in (("frame on screen", lambda r: r.painted_s),
                        ("ready on screen", lambda r: r.ready_on_screen_s),
                        ("RSS peak MB", lambda r: r.rss_peak_mb), ("RSS steady MB", lambda r: r.rss_steady_mb)):
        click.echo(f"  {name:<18}" + "".join(f"{value(r):>10.2f}" for r in both))
