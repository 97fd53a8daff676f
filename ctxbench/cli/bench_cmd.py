"""``ctxbench bench …``: benchmarks, one module per benchmark, imported lazily."""
from __future__ import annotations

import click

from ctxbench.cli import LazyGroup

BENCHMARKS: dict[str, str] = {
    "plan-latency": "ctxbench.cli.bench_plan_latency:command",
    "code": "ctxbench.cli.bench_code:command",
    "perf": "ctxbench.cli.bench_perf:command",
    "ui": "ctxbench.cli.bench_ui:command",
    "timeline": "ctxbench.cli.bench_timeline:command",
    "locomo": "ctxbench.cli.bench_locomo:command",
    "compaction": "ctxbench.cli.bench_compaction:command",
}


class _BenchGroup(LazyGroup):
    registry = BENCHMARKS


@click.group(cls=_BenchGroup, help="Benchmarks: planning latency, code retrieval quality, history recall on LoCoMo, "
                                       "indexing and UI speed.")
def command() -> None:
    pass
