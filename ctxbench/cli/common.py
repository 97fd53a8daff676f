"""Options and helpers shared by the commands."""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ctxbench.config import (
    MAX_TOKENS,
    ConfigError,
    default_config_path,
    default_db_path,
    load_config,
)

# a number of tokens given on the command line (a budget, a context window): what the config file accepts too
TOKENS = click.IntRange(min=1, max=MAX_TOKENS)

db_option = click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="SQLite database file (default: $CTXBENCH_DB or the user data directory).",
)
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Config file (default: $CTXBENCH_CONFIG or the user config directory).",
)


def resolve_db(db_path: Path | None) -> Path:
    return db_path or default_db_path()


def has_db(path: Path) -> bool:
    """Whether ``path`` holds a database (or might: a path that cannot be one, under a file, is left to the store to
    refuse with its own line)."""
    if str(path) == ":memory:" or path.exists():
        return True
    existing = next((p for p in path.parents if p.exists()), None)
    return existing is not None and not existing.is_dir()


def stored_db(db_path: Path | None, looking_for: str) -> Path:
    """The database a command reads something already stored from (a session, a plan). A path with no file there
    holds nothing: the command says so (``looking_for``: what it did not find), exit 2, and creates no folder
    and no file."""
    path = resolve_db(db_path)
    if not has_db(path):
        fail(f"{looking_for}: there is no database at {path} (nothing has been stored there yet)", 2)
    return path


def get_config(config_path: Path | None):
    """The config, validated as a whole; a config that is wrong is ``error: FILE: KEY: what is wrong`` (one line
    per problem, the first says the first) and exit 2, before anything is stored."""
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        fail(str(exc), 2)
    if config.ui.keymap:  # the keys live with the workbench: checked against its bindings, only when rebound
        from ctxbench.tui.keymap import keymap_problems

        problems = keymap_problems(config.ui.keymap)
        if problems:
            source = config_path or default_config_path()
            fail("\n".join(f"{source}: {p}" for p in problems), 2)
    return config


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False))


def bench_progress(as_json: bool) -> Callable[[str], None] | None:
    """A bench's progress lines on stderr ("what ..."), none when its output is JSON."""
    return None if as_json else (lambda what: click.echo(f"{what} ...", err=True))


def report_bench(name: str, report: Any, printer: Callable[[Any], None], *, as_json: bool, no_save: bool,
                 out_dir: Path | None, results_dir: str) -> None:
    """A bench's end: its JSON saved under ``name`` in the results folder (unless ``no_save``), then either the
    JSON on stdout or the printed report and where it was saved."""
    data = report.to_json()
    saved = None
    if not no_save:
        from ctxbench.bench.results import save_result

        saved = save_result(name, data, out_dir or Path(results_dir))
    if as_json:
        emit_json(data)
        return
    printer(report)
    if saved is not None:
        click.echo(f"saved {saved}")


def fail(message: str, code: int = 1) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)
