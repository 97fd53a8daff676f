"""``ctxbench proxy``: watch (and with ``--steer``, steer) another assistant's model calls live."""
from __future__ import annotations

import ipaddress
import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

import click

from ctxbench.cli.common import config_option, db_option, fail, get_config, resolve_db

MIN_TOKEN_CHARS = 16  # a token short enough to guess protects nothing
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9._~-]{%d,}" % MIN_TOKEN_CHARS)  # it travels in the base URL's path

HELP = """Forward an assistant's model calls to --upstream and record each one as a plan.

Point the assistant at the proxy instead of its endpoint: Claude Code with
ANTHROPIC_BASE_URL=http://127.0.0.1:PORT, OpenAI clients (Codex, aider, Continue, …) with the base URL
http://127.0.0.1:PORT/v1, Gemini CLI with GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT. OpenAI Chat
Completions (/v1/chat/completions), OpenAI Responses (/v1/responses, with previous_response_id chains),
Anthropic Messages (/v1/messages) and Gemini (…:generateContent, …:streamGenerateContent), streamed or not,
are recorded: one session per conversation, a plan per request (system,
tool definitions, history, tool results, attached files, tokens per item), the reply and the reported
usage. Every other path, and a body that is not application/json, is forwarded without being recorded.
Auth headers pass through and are never stored; secrets in the requests are forwarded as sent and stored
masked. Only loopback Host names are served and requests from web pages (an Origin header) are refused;
with --token, every request must carry the token (X-Ctxbench-Token header, or the base URL
http://127.0.0.1:PORT/t/TOKEN/v1). Follow a conversation live with `ctxbench open --watch`.

With --steer, only what you ask changes what goes upstream: your drops, your pins, a Context Mode you
set for a conversation, and the rules set once for every client with `ctxbench policy` (drops of any item by
what it is, pinned text, a budget for tool results); both requests are stored. With nothing asked a request
goes upstream byte for byte. Switch a conversation back to pass-through in the workbench (ctrl+r)."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("proxy", help=HELP)
@click.option("--upstream", default=None, metavar="URL",
              help="The endpoint to forward to, e.g. https://api.anthropic.com or https://api.openai.com/v1 "
                   "(default: proxy.upstream in the config).")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port to listen on (default 8788).")
@click.option("--host", default=None,
              help="Address to listen on (default 127.0.0.1). Keep it on loopback, or set a --token.")
@click.option("--token", default=None, envvar="CTXBENCH_PROXY_TOKEN", metavar="TOKEN",
              help="Require this token of every client (default: proxy.token in the config; none).")
@click.option("--steer", is_flag=True, help="Apply your drops, pins and mode to the outgoing requests.")
@db_option
@config_option
def command(upstream: str | None, port: int | None, host: str | None, token: str | None, steer: bool,
            db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.proxy.guard import token_url
    from ctxbench.proxy.server import ExchangeLog, ProxyServer, serve_forever
    from ctxbench.service.proxy.plan import STEER_SCOPE
    from ctxbench.service.proxy.service import ProxyService
    from ctxbench.service.workbench import Workbench

    config = get_config(config_path)
    upstream = upstream or config.proxy.upstream
    if not upstream:
        fail("--upstream URL is needed (the model endpoint the assistant would call)", 2)
    parts = urlsplit(upstream)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        fail(f"--upstream must be an http:// or https:// URL, got {upstream!r}", 2)
    host = host or config.proxy.host
    port = config.proxy.port if port is None else port
    token = config.proxy.token if token is None else token
    if token and not TOKEN_PATTERN.fullmatch(token):
        fail(f"--token must be at least {MIN_TOKEN_CHARS} of the characters a URL path keeps as they are "
             "(letters, digits, '-', '_', '.', '~'), e.g. from `python -c 'import secrets; print(secrets.token_urlsafe())'`",
             2)
    if not _is_loopback(host) and not token:
        click.echo(f"warning: listening on {host}: anyone who can reach it can use your upstream through it and "
                   "write sessions into your store; set a --token", err=True)
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", 2)

    wb = Workbench(resolve_db(db_path), config)
    wb.database  # noqa: B018 - open (and migrate) the store now: a bad --db fails before the first request
    service = ProxyService(wb, steer=steer)
    closed = service.close_pending()
    if closed:
        click.echo(f"closed {closed} exchange(s) a stopped proxy left pending: recorded as cut, with what they "
                   "had received", err=True)

    def log(entry: ExchangeLog) -> None:
        if entry.outcome == "refused":
            click.echo(f"{entry.method} {entry.path} → {entry.status} refused · {entry.note}", err=True)
            return
        usage = f"est {entry.estimated:,} tok" + (f" · reported {entry.reported:,}" if entry.reported is not None else "")
        if entry.exchange_id is not None and not entry.kept:
            where = "(no session kept: no model answered the conversation's first request)"
        elif entry.exchange_id is not None:
            where = f"#{entry.exchange_id} {entry.session_id}"
        else:
            reason = entry.note.removeprefix("not recorded: ") or "no reason given"
            where = f"(not recorded: {reason})"
        steered = f" · {entry.changes} change(s)" if entry.changes else ""
        note = f" · {entry.note}" if entry.outcome != "ok" and entry.note and entry.exchange_id is not None else ""
        click.echo(f"{entry.method} {entry.path} → {entry.status or '-'} {entry.outcome} · {where} · {usage}"
                   f"{steered}{note}", err=True)

    def ready(url: str) -> None:
        base = token_url(url, token or "")
        click.echo(f"ctxbench proxy on {url} → {upstream} · steering {'on' if steer else 'off'} · "
                   f"{'token required' if token else 'no token'} · store {wb.db_path}", err=True)
        if steer:
            click.echo(f"  {STEER_SCOPE}", err=True)
        click.echo(f"  Claude Code:   ANTHROPIC_BASE_URL={base} claude", err=True)
        click.echo(f"  OpenAI client: base URL {base}/v1 (OPENAI_BASE_URL={base}/v1)", err=True)
        click.echo("  watch it:      ctxbench open --watch", err=True)

    server = ProxyServer(service, upstream, config.proxy, on_exchange=log, token=token)
    try:
        serve_forever(server, host, port, ready)
    finally:
        wb.close()
