"""``ctxbench export SESSION``: a session's branch as OpenAI JSONL, which ``ctxbench import`` reads back."""
from __future__ import annotations

from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, fail, get_config, stored_db


@click.command("export", help="Write the active (or given) branch of SESSION as OpenAI JSONL: one message a line, "
               "with its parsing strategy and flags; `ctxbench import` reads it back as the same messages.")
@click.argument("session_id")
@click.option("--branch", default=None, help="Export this branch (default: the session's active branch).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write (default: standard output).")
@click.option("--include-dropped", is_flag=True, help="Also export turns dropped from the context.")
@db_option
@config_option
def command(session_id: str, branch: str | None, output: Path | None, include_dropped: bool, db_path: Path | None,
            config_path: Path | None) -> None:
    from ctxbench.records.errors import NotFound
    from ctxbench.service.timeline import Timeline
    from ctxbench.service.workbench import Workbench

    try:
        with Workbench(stored_db(db_path, f"unknown session {session_id!r}"), get_config(config_path)) as wb:
            wb.sessions.info(session_id)
            lines = Timeline(wb, session_id).export_lines(branch, include_dropped=include_dropped)
    except NotFound as exc:
        fail(str(exc), 2)
    text = "".join(line + "\n" for line in lines)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}", 2)
    click.echo(f"exported {len(lines)} messages to {output}", err=True)
