"""``ctxbench bench timeline``: the plan diff of a 1,000-turn session and the what-if slider's replan."""
from __future__ import annotations

import os

import click

from ctxbench.cli.common import bench_progress, config_option, emit_json, get_config


@click.command(help="Time travel speed: the diff of two plans of a long session (≤ 20 ms) and one what-if replan "
                    "at 32k on the demo session (≤ 50 ms per step).")
@click.option("--turns", type=click.IntRange(min=2), default=1000, show_default=True,
              help="Turns in the synthetic session whose plans are diffed.")
@click.option("--steps", type=click.IntRange(min=3), default=40, show_default=True, help="What-if steps to time.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@config_option
def command(turns: int, steps: int, as_json: bool, config_path) -> None:
    from ctxbench.bench import timeline
    from ctxbench.tokens import get_tokenizer

    config = get_config(config_path)
    tokenizer = get_tokenizer(config.tokenizer.name, config.tokenizer.cache_size)
    say = bench_progress(as_json)
    figures = [timeline.time_diff(config, tokenizer, turns), timeline.time_whatif(config, steps, say)]
    load = os.getloadavg()[0]
    if as_json:
        emit_json({"load_average": round(load, 2), "figures": [f.to_json() for f in figures]})
        return
    for f in figures:
        detail = ", ".join(f"{k} {v}" for k, v in f.detail)
        click.echo(f"{f.name}: p50 {f.p50_ms:.2f} ms · p95 {f.p95_ms:.2f} ms · max {f.max_ms:.2f} ms over {f.runs} "
                   f"({'meets' if f.meets else 'MISSES'} ≤ {f.target_ms:.0f} ms; {detail})")
    click.echo(f"load average {load:.2f}")
