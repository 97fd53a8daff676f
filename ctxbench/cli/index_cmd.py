"""``ctxbench index [PATH]``: build or refresh the code index of a repository (incremental)."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config, resolve_db


class _TerminalProgress:
    """Phase progress bars on stderr (only when stderr is a terminal)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> "_TerminalProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def __call__(self, phase: str, done: int, total: int) -> None:
        task = self.tasks.get(phase)
        if task is None:
            task = self.tasks[phase] = self.progress.add_task(phase, total=max(total, 1))
        self.progress.update(task, completed=done, total=max(total, 1))


@click.command(help="Index a repository (default: the current directory) for code retrieval.")
@click.argument("path", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@click.option("--no-embed", is_flag=True, help="Skip embedding the cards (keyword and graph retrieval still work).")
@db_option
@config_option
def command(path: Path | None, as_json: bool, no_embed: bool, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.records.errors import EmbedderError
    from ctxbench.service.attach import index_repository
    from ctxbench.service.workbench import Workbench

    from ctxbench.codegraph.index import PHASE_WAIT

    from ctxbench.cli.repo_support import fit_root

    config = get_config(config_path)
    path = fit_root(path or Path.cwd())
    show_bar = not as_json and sys.stderr.isatty()
    bar: _TerminalProgress | None = None

    def progress(phase: str, done: int, total: int) -> None:
        if phase == PHASE_WAIT:  # said once, terminal or not: the run is not stuck
            if done == 0:
                click.echo("another index run is using this database; waiting for it to finish…", err=True)
            return
        if bar is not None:
            bar(phase, done, total)

    try:
        with Workbench(resolve_db(db_path), config) as wb:  # a StoreError is the CLI's one-line error (exit 2)
            if show_bar:
                with _TerminalProgress() as bar:
                    result = index_repository(wb, path, progress, embed=not no_embed)
            else:
                result = index_repository(wb, path, progress, embed=not no_embed)
    except EmbedderError as exc:  # a bad model checksum or load failure is a clear error, not a traceback
        fail(str(exc))
        return
    data = result.to_json()
    if no_embed:
        data["embed_note"] = "--no-embed: cards not embedded"
    if as_json:
        emit_json(data)
        return
    click.echo(f"indexed {result.root}")
    if result.waited_for:
        waited = dict(result.phases).get(PHASE_WAIT, 0.0)
        click.echo(f"  waited {waited:.1f}s for another index run ({result.waited_for}), then "
                   + ("found nothing left to do" if not result.changed else "indexed what had changed since"))
    click.echo(f"  {result.files} files ({result.files_parsed} parsed, {result.files_reused} unchanged"
               f"{f', {result.files_removed} removed' if result.files_removed else ''}), {result.symbols} symbols, "
               f"{result.edges} edges, {result.cards} cards ({result.cards_reused} reused)")
    if result.embedded:
        click.echo(f"  embeddings: {result.cards_embedded} cards embedded, {result.vectors_reused} reused from cache"
                   + (f", {result.vectors_removed} stale removed" if result.vectors_removed else ""))
    else:
        click.echo(f"  embeddings: {data['embed_note']}")
    if result.skipped:
        reasons = Counter(s.reason for s in result.skipped)
        click.echo(f"  skipped {len(result.skipped)}: " + ", ".join(f"{r} {n}" for r, n in sorted(reasons.items())))
    if result.capsules_stale:
        shown = ", ".join(f"{c.label} {c.subject}" for c in result.capsules_stale[:5])
        more = len(result.capsules_stale) - 5
        click.echo(f"  capsules now stale: {len(result.capsules_stale)} ({shown}{f', and {more} more' if more > 0 else ''}); "
                   "refresh them with `ctxbench capsules --build`")
    for err in result.parse_errors:
        click.echo(f"  parse error{' (partial)' if err.partial else ''}: {err.path}: {err.error}")
    click.echo("  seconds: " + " · ".join(f"{name} {sec:.3f}" for name, sec in result.phases)
               + f" · total {result.seconds:.3f}")
