"""``ctxbench wrap``: run an assistant with its model calls going through a proxy started for it alone."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

import click

from ctxbench.cli.common import config_option, db_option, fail, get_config, resolve_db

LOOPBACK = "127.0.0.1"
NOT_FOUND_EXIT = 127  # the shell's "command not found"
CANNOT_RUN_EXIT = 126  # the shell's "found but cannot be run"
SIGNAL_EXIT_BASE = 128  # a client killed by signal N exits 128 + N, as a shell reports it
CODEX_PROVIDER = "ctxbench"  # the name of the provider the codex overrides add


@dataclass(frozen=True)
class ClientSetup:
    """How to point one assistant at the proxy: its usual endpoint, and what to add to its environment and
    in front of its arguments, given the proxy's URL."""

    upstream: str
    env: Callable[[str, dict[str, str]], dict[str, str]]
    args: Callable[[str, dict[str, str]], list[str]] = lambda url, env: []
    how: str = ""


def _codex_args(url: str, env: dict[str, str]) -> list[str]:
    """Codex speaks the Responses API to its configured provider: a provider for the proxy, given as ``-c``
    overrides (nothing is written to the user's config). Its key comes from OPENAI_API_KEY when that is set,
    else from Codex's own login (``codex login --api-key``)."""
    key = 'env_key = "OPENAI_API_KEY"' if env.get("OPENAI_API_KEY") else "requires_openai_auth = true"
    provider = f'{{ name = "ctxbench proxy", base_url = "{url}/v1", wire_api = "responses", {key} }}'
    return ["-c", f'model_providers.{CODEX_PROVIDER}={provider}', "-c", f'model_provider="{CODEX_PROVIDER}"']


def _every_base_url(url: str, env: dict[str, str]) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": url, "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_BASE": f"{url}/v1",
            "GOOGLE_GEMINI_BASE_URL": url}


CLIENTS: dict[str, ClientSetup] = {
    "claude": ClientSetup("https://api.anthropic.com", lambda url, env: {"ANTHROPIC_BASE_URL": url},
                          how="ANTHROPIC_BASE_URL"),
    "codex": ClientSetup("https://api.openai.com/v1", lambda url, env: {}, _codex_args,
                         how="a provider given with -c (Responses API)"),
    "aider": ClientSetup("https://api.openai.com/v1", lambda url, env: {"AIDER_OPENAI_API_BASE": f"{url}/v1"},
                         how="AIDER_OPENAI_API_BASE (its OpenAI models)"),
    "gemini": ClientSetup("https://generativelanguage.googleapis.com",
                          lambda url, env: {"GOOGLE_GEMINI_BASE_URL": url},
                          how="GOOGLE_GEMINI_BASE_URL (Gemini API key auth)"),
}
ANY_COMMAND = ClientSetup("", _every_base_url, how="ANTHROPIC_BASE_URL, OPENAI_BASE_URL, OPENAI_API_BASE, "
                                                   "GOOGLE_GEMINI_BASE_URL")

HELP = """Run an assistant with its model calls going through a ctxbench proxy started for it.

\b
  ctxbench wrap claude                 Claude Code (ANTHROPIC_BASE_URL) → https://api.anthropic.com
  ctxbench wrap codex exec "fix it"    Codex CLI (a provider given with -c, Responses API) → https://api.openai.com/v1
  ctxbench wrap aider --model gpt-4o   aider (AIDER_OPENAI_API_BASE: its OpenAI models) → https://api.openai.com/v1
  ctxbench wrap gemini                 Gemini CLI (GOOGLE_GEMINI_BASE_URL, API key auth) → the Gemini API
  ctxbench wrap --upstream URL -- CMD  any command: ANTHROPIC_BASE_URL, OPENAI_BASE_URL, OPENAI_API_BASE and
                                       GOOGLE_GEMINI_BASE_URL all point at the proxy (--upstream is needed)

The proxy listens on a free port of 127.0.0.1 and forwards to the client's usual endpoint (--upstream
overrides it); the client runs in this terminal with your arguments and its own keys (they pass through
and are never stored). Every request is recorded as a plan, as with `ctxbench proxy`: watch it live with
`ctxbench open --watch` in another terminal. When the client exits the proxy stops, and wrap exits with
the client's exit code. Put wrap's own options before the client's name."""


def _run(argv: list[str], env: dict[str, str]) -> int:
    """Run the client in this terminal; Ctrl+C is the client's to handle (the terminal sends it to both), a
    SIGTERM to wrap is passed on; the client's exit code (128 + N when signal N ended it)."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    started: list[subprocess.Popen] = []
    # set before the client starts, so a Ctrl+C the moment it is up cannot stop wrap instead; a handler (not
    # SIG_IGN, which a child would inherit) is reset to the default in the client when it execs
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    signal.signal(signal.SIGTERM, lambda signum, frame: started and started[0].send_signal(signum))
    try:
        try:
            started.append(subprocess.Popen(argv, env=env))
        except OSError as exc:
            click.echo(f"error: cannot run {argv[0]}: {exc.strerror or exc}", err=True)
            return CANNOT_RUN_EXIT
        code = started[0].wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return SIGNAL_EXIT_BASE - code if code < 0 else code


@click.command("wrap", help=HELP, context_settings={"ignore_unknown_options": True,
                                                     "allow_interspersed_args": False})
@click.option("--upstream", default=None, metavar="URL",
              help="The endpoint to forward to (default: the client's usual one; needed for any other command).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Port for the proxy (default: a free one).")
@click.option("--steer", is_flag=True, help="Apply your drops, pins and mode to the outgoing requests.")
@db_option
@config_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="CLIENT [ARGS]... | -- COMMAND...")
def command(upstream: str | None, port: int, steer: bool, db_path: Path | None, config_path: Path | None,
            command: tuple[str, ...]) -> None:
    from ctxbench.proxy.guard import token_url
    from ctxbench.proxy.server import ExchangeLog, ProxyServer, RunningProxy
    from ctxbench.service.proxy.service import ProxyService
    from ctxbench.service.workbench import Workbench

    name = Path(command[0]).name
    setup = CLIENTS.get(name, ANY_COMMAND)
    upstream = upstream or setup.upstream
    if not upstream:
        fail(f"--upstream URL is needed for {name!r} (ctxbench knows the endpoints of {', '.join(CLIENTS)})", 2)
    parts = urlsplit(upstream)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        fail(f"--upstream must be an http:// or https:// URL, got {upstream!r}", 2)
    executable = shutil.which(command[0])
    if executable is None:
        fail(f"{command[0]}: command not found (is it installed and on PATH?)", NOT_FOUND_EXIT)

    config = get_config(config_path)
    wb = Workbench(resolve_db(db_path), config)
    wb.database  # noqa: B018 - open (and migrate) the store now: a bad --db fails before the client starts
    recorded: list[int] = []

    def count(entry: ExchangeLog) -> None:
        if entry.exchange_id is not None and entry.kept:
            recorded.append(entry.exchange_id)

    server = ProxyServer(ProxyService(wb, steer=steer), upstream, config.proxy, on_exchange=count)
    watch = "ctxbench open --watch" + (f" --db {db_path}" if db_path is not None else "")
    try:
        try:
            proxy = RunningProxy(server, LOOPBACK, port).start()
        except OSError as exc:
            fail(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}", 2)
        try:
            # where the proxy asks for a token (proxy.token), the client sends it as its base URL's first segment
            base = token_url(proxy.url, config.proxy.token)
            env = dict(os.environ)
            env.update(setup.env(base, env))
            env["CTXBENCH_PROXY_URL"] = base
            argv = [executable, *setup.args(base, env), *command[1:]]
            click.echo(f"ctxbench wrap: {name} → proxy {proxy.url} ({setup.how}) → {upstream} · steering "
                       f"{'on' if steer else 'off'} · store {wb.db_path}", err=True)
            click.echo(f"  watch it: {watch}", err=True)
            code = _run(argv, env)
        finally:
            proxy.stop()
    finally:
        wb.close()
    click.echo(f"ctxbench wrap: {name} exited with {code}; {len(recorded)} request(s) recorded · {watch}", err=True)
    click.get_current_context().exit(code)
