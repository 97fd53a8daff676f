"""``ctxbench branch list|fork|switch SESSION``: a session's timelines.

A fork sees its parent's turns up to the fork point and then its own; it inherits the parent's pins,
leases, activation, ``### STATE``, scratchpad and settings, and from then on changes only its own.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config, stored_db


def _timeline(wb, session_id: str):
    from ctxbench.service.timeline import Timeline

    wb.sessions.info(session_id)  # raises UnknownSession
    return Timeline(wb, session_id)


def _print_branches(branches) -> None:
    click.echo(f"{'':2}{'branch':<20} {'from':<16} {'fork at':>8} {'head':>6} {'turns':>6} {'own':>5}")
    for b in branches:
        fork = "" if b.fork_turn is None else str(b.fork_turn)
        head = "" if b.head_turn is None else str(b.head_turn)
        click.echo(f"{'*' if b.active else ' ':2}{b.name:<20} {b.parent:<16} {fork:>8} {head:>6} {b.turns:>6} "
                   f"{b.own_turns:>5}")


@click.group("branch", help="List, fork and switch the branches (timelines) of a session.")
def command() -> None:
    pass


@command.command("list", help="List the branches of SESSION: where each forked, its head turn and turns (* active).")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@db_option
@config_option
def list_command(session_id: str, as_json: bool, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.records.errors import NotFound
    from ctxbench.service.workbench import Workbench

    try:
        with Workbench(stored_db(db_path, f"unknown session {session_id!r}"), get_config(config_path)) as wb:
            branches = _timeline(wb, session_id).branches()
    except NotFound as exc:
        fail(str(exc), 2)
    if as_json:
        emit_json([dataclasses.asdict(b) for b in branches])
    else:
        _print_branches(branches)


@command.command("fork", help="Fork the active branch of SESSION as NAME and switch to it.")
@click.argument("session_id")
@click.argument("name")
@click.option("--at", "at_turn", type=click.IntRange(min=1), default=None,
              help="Fork after this turn (a group id, as /message list shows it; default: the latest turn).")
@db_option
@config_option
def fork_command(session_id: str, name: str, at_turn: int | None, db_path: Path | None,
                 config_path: Path | None) -> None:
    from ctxbench.records.errors import NotFound
    from ctxbench.service.workbench import Workbench

    try:
        with Workbench(stored_db(db_path, f"unknown session {session_id!r}"), get_config(config_path)) as wb:
            wb.check_store()  # a damaged page is refused before anything is written
            branch = _timeline(wb, session_id).fork(name, at_turn)
    except (NotFound, ValueError) as exc:
        fail(str(exc), 2)
    where = f"after turn {branch.fork_turn}" if branch.fork_turn is not None else "before the first turn"
    click.echo(f"forked {branch.name} from {branch.parent} {where}; {branch.name} is now the active branch")


@command.command("switch", help="Make branch NAME the active branch of SESSION (the workbench opens on it).")
@click.argument("session_id")
@click.argument("name")
@db_option
@config_option
def switch_command(session_id: str, name: str, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.records.errors import NotFound
    from ctxbench.service.workbench import Workbench

    try:
        with Workbench(stored_db(db_path, f"unknown session {session_id!r}"), get_config(config_path)) as wb:
            branch = _timeline(wb, session_id).switch(name)
    except NotFound as exc:
        fail(str(exc), 2)
    click.echo(f"now on branch {branch.name} ({branch.turns} turns)")
