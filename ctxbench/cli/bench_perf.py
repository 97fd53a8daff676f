"""``ctxbench bench perf``: indexing, incremental re-index, index loading, PageRank and scaffold timings."""
from __future__ import annotations

from pathlib import Path

import click

from ctxbench.cli.common import bench_progress, config_option, emit_json, fail, get_config


@click.command(help="The performance suite in one run, each figure beside its target: cold and unchanged indexing "
                    "(2 s / 0.3 s on textual's source), a one-file change, loading the index, PageRank, the "
                    "scaffold, embedding throughput (>= 150 cards/s), one warm retrieval query (<= 30 ms), the "
                    "import time of each package on the start-up path, the first paint (<= 0.8 s), plan latency "
                    "p50/p95 on a 1,000-turn session at 8k and 32k (the default strategy with query encoding: "
                    "<= 20 ms), the mode hotkey's replan (<= 50 ms) and the peak memory. Results are saved with the "
                    "machine's description (and load average) for /bench. Groups: index, graph, embed, retrieve, "
                    "startup, plan, ui, memory. With --large, the load suite instead (minutes): a generated 10,000-turn "
                    "session — per strategy the first plan (the history embedded first for semantic and fused) and "
                    "plan p50/p95 warm (<= 50 ms), the plan after a new turn, replay's first record (<= 2 s) — and "
                    "indexing a generated repository of 100,000 symbols (time and peak memory); saved as "
                    "perf_large.json.")
@click.option("--repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Repository to measure (default: textual's installed source).")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Runs per phase.")
@click.option("--only", "groups", multiple=True, help="Run only this phase group (repeatable): index, graph, embed, "
                                                     "retrieve, startup, plan, ui, cache or memory (index always runs; cache "
                                                     "replays the bundled coding session turn by turn per strategy "
                                                     "and payload order: prefix shared with the previous plan, "
                                                     "$/turn without and with cache reads).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the results file goes (default: bench.results_dir of the config).")
@click.option("--no-save", is_flag=True, help="Do not write the results file.")
@click.option("--large", is_flag=True, help="Run the load suite (a 10,000-turn session, 100,000 symbols) instead.")
@click.option("--large-turns", type=click.IntRange(min=10), default=None,
              help="Turns of the generated session for --large (default 10,000).")
@click.option("--large-symbols", type=click.IntRange(min=100), default=None,
              help="Symbols of the generated repository for --large (default 100,000).")
@click.option("--aider-python", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Python of an aider install: the index group also times aider's cold repo map of the same files "
                   "(e.g. .clients/aider-venv/bin/python after `make clients`; without it, no aider row).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@config_option
def command(repo: Path | None, repeat: int, groups: tuple[str, ...], out_dir: Path | None, no_save: bool,
            large: bool, large_turns: int | None, large_symbols: int | None, aider_python: Path | None,
            as_json: bool, config_path) -> None:
    from ctxbench.bench import perf

    if not large and (large_turns is not None or large_symbols is not None):
        fail("--large-turns and --large-symbols go with --large", 2)
    if large and (repo is not None or groups):
        fail("--large generates what it measures: --repo and --only do not apply", 2)
    if large:
        _large(large_turns, large_symbols, out_dir, no_save, as_json, config_path)
        return
    known = [name for name, _ in perf.PHASE_GROUPS]
    for name in groups:
        if name not in known:
            fail(f"unknown phase group {name!r} for --only; known: {', '.join(known)}", 2)
    config = get_config(config_path)
    from ctxbench.cli.repo_support import fit_root

    source = fit_root(repo) if repo is not None else perf.default_repo()
    if source is None:
        raise click.UsageError("textual is not installed; pass --repo PATH")
    if aider_python is not None and not aider_python.is_file():
        fail(f"--aider-python: no such file: {aider_python}", 2)
    report = perf.run(source, config, repeat=repeat, groups=list(groups) or None, progress=bench_progress(as_json),
                      options={"aider_python": str(aider_python.absolute())} if aider_python else None)
    counts = dict(report.counts)
    _finish("perf", report, f"perf on {report.repo}: " + ", ".join(f"{v} {k}" for k, v in counts.items())
            + f" (median of {report.repeat} runs)", out_dir=out_dir or Path(config.bench.results_dir),
            no_save=no_save, as_json=as_json)


def _large(turns: int | None, symbols: int | None, out_dir: Path | None, no_save: bool, as_json: bool,
           config_path) -> None:
    from ctxbench.bench import perf_large

    config = get_config(config_path)
    report = perf_large.run(config, turns=turns or perf_large.LARGE_TURNS, symbols=symbols or perf_large.LARGE_SYMBOLS,
                            config_path=config_path, progress=bench_progress(as_json) or (lambda what: None))
    _finish("perf_large", report, f"perf --large: a {report.turns:,}-turn session ({report.messages:,} messages), "
            f"{report.symbols:,} generated symbols", out_dir=out_dir or Path(config.bench.results_dir),
            no_save=no_save, as_json=as_json)


def _finish(name: str, report, headline: str, *, out_dir: Path, no_save: bool, as_json: bool) -> None:
    """Both suites' end: rows and the machine beside the report, saved as ``name``, then JSON or the table."""
    from ctxbench.bench.perf_suite import display_rows
    from ctxbench.bench.results import machine, save_result

    rows = display_rows(report.phases)
    data = {**report.to_json(), "rows": rows, "machine": machine()}
    saved = None if no_save else save_result(name, data, out_dir)
    if as_json:
        emit_json(data)
        return
    click.echo(headline)
    _table(rows)
    _footer(data, saved)


def _table(rows: list[dict]) -> None:
    click.echo(f"{'measure':<72} {'measured':>14} {'target':>16}  verdict")
    for row in rows:
        verdict = "" if row["meets"] is None else ("meets" if row["meets"] else "MISSES")
        click.echo(f"{row['name']:<72} {row['value']:>14} {row['target'] or '-':>16}  {verdict}")
        if row["detail"]:
            click.echo("    " + " · ".join(f"{k} {v}" for k, v in row["detail"].items()))


def _footer(data: dict, saved: Path | None) -> None:
    load = data["machine"].get("load_average")
    click.echo(f"machine: {data['machine'].get('processor', '?')}, {data['machine'].get('cores')} cores, load average "
               f"{' '.join(map(str, load)) if load else '?'} (timings on a busy machine run slow)")
    if saved is not None:
        click.echo(f"saved {saved}")
