"""``ctxbench serve``: the workbench in a browser (textual-serve), on 127.0.0.1 only."""
from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, fail, get_config

HELP = """Serve the workbench to a web browser on http://127.0.0.1:PORT (textual-serve).

It prints the one URL to open, with a token made for this launch (http://127.0.0.1:PORT/?token=...): the page and
its session refuse a request without it, one whose Host is not this loopback port, and one from another
site's page. Each session runs its own `ctxbench open` with the options given here, one at a time unless
--max-sessions (serve.max_sessions) says more. Anyone holding the URL gets the workbench, your sessions and your
model key: do not share it, do not forward the port."""


@click.command("serve", help=HELP)
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port on 127.0.0.1 (default 8790).")
@click.option("--repo", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Repository to open (default: the enclosing repository of the current directory).")
@click.option("--session", "session_id", default=None, help="Open this session id.")
@click.option("--watch", is_flag=True, help="Follow a proxied conversation live (see ctxbench open --watch).")
@click.option("--mode", default=None, help="Context Mode (off, light, heavy or one defined in the config).")
@click.option("--theme", default=None, help="Theme name.")
@click.option("--no-index", is_flag=True, help="Do not index the repository.")
@click.option("--max-sessions", type=click.IntRange(min=1), default=None,
              help="Browser sessions served at once (default serve.max_sessions, 1); one more is told so.")
@db_option
@config_option
def command(port: int | None, repo: Path | None, session_id: str | None, watch: bool, mode: str | None,
            theme: str | None, no_index: bool, max_sessions: int | None, db_path: Path | None,
            config_path: Path | None) -> None:
    from ctxbench.cli.open_cmd import find_repo_root
    from ctxbench.cli.repo_support import fit_root

    config = get_config(config_path)
    host = config.serve.host
    if host != "127.0.0.1":
        fail("serve.host must be 127.0.0.1: the served workbench answers to the loopback address only", 2)
    root = None  # --watch follows a proxied conversation: no repository
    if not watch:
        root = fit_root(repo if repo is not None else find_repo_root(Path.cwd()))
    port = port or config.serve.port
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", 2)
    args = [sys.executable, "-m", "ctxbench", "open"]
    for flag, value in (("--db", db_path), ("--config", config_path), ("--session", session_id), ("--mode", mode),
                        ("--theme", theme), ("--repo", root)):
        if value is not None:
            args += [flag, str(Path(value).resolve()) if isinstance(value, Path) else str(value)]
    if watch:
        args.append("--watch")
    if no_index:
        args.append("--no-index")
    from ctxbench.web.guard import LoopbackGuard, new_token
    from ctxbench.web.server import GuardedServer

    guard = LoopbackGuard(port, new_token())
    click.echo(f"ctxbench serve: open {guard.url}\n  (this URL is the key to your workbench: keep it to yourself)",
               err=True)
    GuardedServer(shlex.join(args), guard, max_sessions=max_sessions or config.serve.max_sessions).serve()
