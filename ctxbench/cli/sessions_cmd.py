"""``ctxbench sessions``: the stored sessions, most recently active first."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, emit_json, get_config, has_db, resolve_db


@click.command("sessions", help="List sessions, most recently active first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@db_option
@config_option
def command(as_json: bool, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.service.workbench import Workbench

    path, config = resolve_db(db_path), get_config(config_path)
    if not has_db(path):  # listing creates nothing: no folder, no database
        if as_json:
            emit_json([])
        else:
            click.echo(f"no sessions: there is no database at {path} yet (ctxbench import FILE, or open the workbench)")
        return
    with Workbench(path, config) as wb:
        found = wb.sessions.list()
    if as_json:
        emit_json([dataclasses.asdict(s) for s in found])
        return
    if not found:
        click.echo("no sessions yet: ctxbench import FILE, or open the workbench")
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    for name, justify in (("id", "left"), ("title", "left"), ("messages", "right"), ("groups", "right"),
                          ("last activity", "left"), ("repo", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in found:
        table.add_row(s.id, s.title, str(s.message_count), str(s.group_count), s.last_activity[:19].replace("T", " "),
                      s.repo or "")
    Console(width=max(100, Console().width), highlight=False).print(table)
