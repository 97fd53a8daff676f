"""``ctxbench bench perf``: indexing, incremental re-index, index loading, PageRank and scaffold timings."""
from __future__ import annotations

from pathlib import Path

import click

from ctxbench.cli.common import config_option, emit_json, fail, get_config


@click.command(help="Speed of the code side: cold and unchanged indexing (targets: 2 s / 0.3 s on textual's "
                    "source), a one-file change, loading the index, PageRank, the scaffold, embedding throughput "
                    "(target >= 150 cards/s) and one warm retrieval query (target <= 30 ms). "
                    "Groups: index, graph, embed, retrieve.")
@click.option("--repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Repository to measure (default: textual's installed source).")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Runs per phase.")
@click.option("--only", "groups", multiple=True, help="Run only this phase group (repeatable): index, graph, embed or retrieve (index always runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@config_option
def command(repo: Path | None, repeat: int, groups: tuple[str, ...], as_json: bool, config_path) -> None:
    from ctxbench.bench import perf

    known = [name for name, _ in perf.PHASE_GROUPS]
    for name in groups:
        if name not in known:
            fail(f"unknown phase group {name!r} for --only; known: {', '.join(known)}", 2)
    config = get_config(config_path)
    source = repo or perf.default_repo()
    if source is None:
        raise click.UsageError("textual is not installed; pass --repo PATH")
    report = perf.run(source, config, repeat=repeat, groups=list(groups) or None,
                      progress=None if as_json else (lambda what: click.echo(f"{what} ...", err=True)))
    if as_json:
        emit_json(report.to_json())
        return
    counts = dict(report.counts)
    click.echo(f"perf on {report.repo}: " + ", ".join(f"{v} {k}" for k, v in counts.items())
               + f" (median of {report.repeat} runs)")
    click.echo(f"{'phase':<42} {'median s':>9} {'best s':>9} {'cpu s':>9} {'target s':>9}  verdict")
    for p in report.phases:
        target = f"{p.target_s:.2f}" if p.target_s is not None else "-"
        cpu = f"{p.cpu_median_s:.4f}" if p.cpu_median_s is not None else "-"
        verdict = "" if p.meets is None else ("meets" if p.meets else "MISSES")
        click.echo(f"{p.name:<42} {p.median_s:>9.4f} {p.best_s:>9.4f} {cpu:>9} {target:>9}  {verdict}")
        if p.detail:
            click.echo("    " + " · ".join(f"{k} {v}" for k, v in p.detail))
