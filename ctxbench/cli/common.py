"""Options and helpers shared by the commands."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ctxbench.config import ConfigError, default_db_path, load_config

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


def get_config(config_path: Path | None):
    try:
        return load_config(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False))


def fail(message: str, code: int = 1) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)
