"""textual-serve's server with a loopback guard, a launch token and a cap on concurrent sessions.

The seams are textual-serve's own: ``_make_app`` (the aiohttp application: a middleware refuses a foreign
``Host`` or ``Origin`` on every route, and ``/ws/{token}`` is added), ``handle_index`` (the page: token, cap,
our template) and ``handle_websocket`` (token, Origin required, cap; each accepted connection runs its own
``ctxbench open``). The page loads nothing from outside this machine: the font is the one textual-serve ships.
"""
from __future__ import annotations

import asyncio
import html
import logging
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import textual_serve
from aiohttp import web
from textual_serve.server import Server, to_int

from ctxbench.web.guard import LoopbackGuard

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(textual_serve.__file__).resolve().parent / "static"  # textual.js, xterm.css, the Roboto Mono font
PAGE_HEADERS = {  # the page's URL holds the token: never cached, never sent on as a referrer, never framed
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}
SLOT_WAIT_S = 3.0  # a page or websocket finding every session taken waits this long for one to end (a reloaded
# tab: its old session's process is still stopping) before it is told another session is open
NO_TOKEN = ("This address needs its token: open the URL that <code>ctxbench serve</code> printed when it started "
            "(<code>http://127.0.0.1:PORT/?token=…</code>).")
BUSY = ("Another ctxbench session is open in another tab or window ({n} of {cap} allowed: "
        "<code>serve.max_sessions</code>, <code>--max-sessions</code>). Close it, then reload this page.")


def message_page(status: int, title: str, body_html: str) -> web.Response:
    """A small self-contained page (no script, nothing loaded from anywhere) saying why."""
    text = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><meta name='referrer' content='no-referrer'>"
            f"<title>ctxbench: {html.escape(title)}</title><style>body{{background:#0c181f;color:#e8eef2;"
            f"font-family:menlo,monospace;max-width:48em;margin:4em auto;line-height:1.5}}</style></head>"
            f"<body><h1>{html.escape(title)}</h1><p>{body_html}</p></body></html>")
    return web.Response(status=status, text=text, content_type="text/html", headers=PAGE_HEADERS)


class TokenMask(logging.Filter):
    """Writes the launch token of a logged request line as ``…``."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.token in message:
            record.msg, record.args = message.replace(self.token, "…"), None
        return True


class GuardedServer(Server):
    """Serves ``command`` (one process per browser session) on 127.0.0.1:``guard.port`` to the holder of the
    token only, ``max_sessions`` sessions at a time."""

    def __init__(self, command: str, guard: LoopbackGuard, *, max_sessions: int = 1, title: str = "ctxbench"):
        super().__init__(command, host="127.0.0.1", port=guard.port, title=title, statics_path=STATIC,
                         templates_path=TEMPLATES)
        self.guard = guard
        self.max_sessions = max_sessions
        self.sessions = 0  # websocket sessions open now (each one a running command)
        self.slot_wait_s = SLOT_WAIT_S
        self._ended = asyncio.Condition()  # notified whenever a session has ended

    async def build_app(self) -> web.Application:
        """The aiohttp application, guarded (what ``serve()`` runs; tests run it on a port of their own)."""
        return await self._make_app()

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._loopback_only)
        app.router.add_get("/ws/{token}", self.handle_websocket, name="session")
        return app

    @web.middleware
    async def _loopback_only(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Every route: the request names this server (a foreign ``Host`` is DNS rebinding) and comes, if from a
        page, from one of its own."""
        if not self.guard.host_ok(request.headers.get("Host")):
            return web.Response(status=403, text="refused: this server answers only to "
                                                 f"127.0.0.1:{self.guard.port} (a foreign Host header)\n")
        origin = request.headers.get("Origin")
        if origin is not None and not self.guard.origin_ok(origin):
            return web.Response(status=403, text="refused: a page of another origin cannot use this server\n")
        return await handler(request)

    def initialize_logging(self) -> None:
        """textual-serve's request log, with the token masked (it is printed once, at launch)."""
        super().initialize_logging()
        logging.getLogger("aiohttp.access").addFilter(TokenMask(self.guard.token))

    async def on_startup(self, app: web.Application) -> None:
        """Quiet: ``ctxbench serve`` prints the one URL to open (textual-serve's banner would print another)."""

    async def handle_index(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        if not self.guard.token_ok(request.query.get("token")):
            return message_page(403, "token needed", NO_TOKEN)
        if not await self._slot_free():
            return message_page(409, "another session is open", BUSY.format(n=self.sessions, cap=self.max_sessions))
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            # the websocket goes to the host the page was opened on (an origin the guard accepts)
            "app_websocket_url": f"ws://{request.host}/ws/{self.guard.token}",
            "static_url": "/static/",
            "title": self.title,
        }
        response = aiohttp_jinja2.render_template("app_index.html", request, context)
        response.headers.update(PAGE_HEADERS)
        response.headers["Content-Security-Policy"] = self.content_policy()
        return response

    def content_policy(self) -> str:
        """The page may load from this server only and open its websocket on the loopback port only."""
        sockets = " ".join(f"ws://{host}" for host in sorted(self.guard.hosts))
        return ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
                f"img-src 'self' data:; font-src 'self'; connect-src 'self' {sockets}; frame-ancestors 'none'; "
                "base-uri 'none'; form-action 'none'")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        token = request.match_info.get("token") or request.query.get("token")
        if not self.guard.token_ok(token):
            raise web.HTTPForbidden(text="refused: the session websocket needs this launch's token\n")
        if not self.guard.origin_ok(request.headers.get("Origin")):
            raise web.HTTPForbidden(text="refused: the session websocket is opened by this server's own page only\n")
        if not await self._slot_free():
            raise web.HTTPConflict(text=f"refused: another ctxbench session is open ({self.sessions} of "
                                        f"{self.max_sessions} allowed: serve.max_sessions)\n")
        self.sessions += 1  # counted with no await since the check: two handshakes cannot both pass the cap
        try:
            return await super().handle_websocket(request)
        finally:
            self.sessions -= 1
            async with self._ended:
                self._ended.notify_all()

    async def _slot_free(self) -> bool:
        """Whether a session may start, waiting up to ``slot_wait_s`` for one to end when all are taken."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.slot_wait_s
        while self.sessions >= self.max_sessions:  # checked last with no await before the caller counts itself in
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                async with self._ended:
                    await asyncio.wait_for(self._ended.wait(), remaining)
            except asyncio.TimeoutError:
                return False
        return True
