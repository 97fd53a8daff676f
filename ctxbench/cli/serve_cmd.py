"""``ctxbench serve``: the workbench in a browser (textual-serve), on 127.0.0.1 only."""
from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, fail, get_config

HELP = """Serve the workbench to a web browser on http://127.0.0.1:PORT (textual-serve).

Each browser tab runs its own `ctxbench open` with the options given here. The server listens on
127.0.0.1 only and has NO AUTHENTICATION: anyone who can reach that address and port (other users of this
machine, anything you tunnel it to) gets the workbench, your sessions and your model key. Do not forward
the port."""


@click.command("serve", help=HELP)
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port on 127.0.0.1 (default 8790).")
@click.option("--repo", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Repository to open (default: the enclosing repository of the current directory).")
@click.option("--session", "session_id", default=None, help="Open this session id.")
@click.option("--watch", is_flag=True, help="Follow a proxied conversation live (see ctxbench open --watch).")
@click.option("--mode", default=None, help="Context Mode (off, light, heavy or one defined in the config).")
@click.option("--theme", default=None, help="Theme name.")
@click.option("--no-index", is_flag=True, help="Do not index the repository.")
@db_option
@config_option
def command(port: int | None, repo: Path | None, session_id: str | None, watch: bool, mode: str | None,
            theme: str | None, no_index: bool, db_path: Path | None, config_path: Path | None) -> None:
    config = get_config(config_path)
    host = config.serve.host
    if host != "127.0.0.1":
        fail("serve.host must be 127.0.0.1: the served workbench has no authentication", 2)
    port = port or config.serve.port
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", 2)
    args = [sys.executable, "-m", "ctxbench", "open"]
    for flag, value in (("--db", db_path), ("--config", config_path), ("--session", session_id), ("--mode", mode),
                        ("--theme", theme), ("--repo", repo.resolve() if repo else None)):
        if value is not None:
            args += [flag, str(Path(value).resolve()) if isinstance(value, Path) else str(value)]
    if watch:
        args.append("--watch")
    if no_index:
        args.append("--no-index")
    from textual_serve.server import Server

    click.echo(f"ctxbench serve on http://{host}:{port} (no authentication: keep it on this machine)", err=True)
    Server(shlex.join(args), host=host, port=port, title="ctxbench").serve()
