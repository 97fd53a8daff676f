"""The inspecting proxy's HTTP side: receive, forward, stream the reply back, record.

Why aiohttp: it is one library for both ends (a server for the assistant, a client for the upstream),
both stream — ``StreamResponse.write`` sends each chunk as it comes and ``ClientResponse.content`` yields
the upstream's bytes as they arrive, so a long reply is never held whole — and it is already installed for
``ctxbench serve`` (textual-serve runs on it), so the proxy adds no dependency of its own.

What the client sends is forwarded as it is: the same method, path, query and headers (its auth headers
included; they are never stored or logged), and the same body byte for byte unless steering changed it.
Only hop-by-hop headers are dropped, and ``Accept-Encoding`` asks the upstream for an uncompressed reply
so the recorder can read it. What the upstream answers goes back as it is: status, headers, body, a
stream cut mid-way (the client's connection is cut at the same point). An upstream that cannot be reached
is a 502 with a JSON error body. Requests other than Chat Completions, Responses, Messages and Gemini's
generateContent (``/v1/models``, ``count_tokens`` …) are forwarded without being recorded.
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from ctxbench.config import ProxyConfig
from ctxbench.records.proxy import ReplyRecord
from ctxbench.service.proxy_service import Exchange, ProxyService

HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
})
UPSTREAM_DOWN_STATUS = 502


@dataclass(frozen=True)
class ExchangeLog:
    """One finished exchange, for the command line's log (no body, no header)."""

    exchange_id: int | None
    session_id: str
    method: str
    path: str
    status: int | None
    outcome: str
    estimated: int
    reported: int | None
    changes: int
    note: str


def upstream_url(upstream: str, path_qs: str) -> str:
    """``upstream`` joined with the request's path: a ``/v1`` the upstream URL already ends with is not
    repeated (``http://localhost:11434/v1`` + ``/v1/chat/completions``)."""
    base = upstream.rstrip("/")
    if urlsplit(base).path.endswith("/v1") and (path_qs.startswith("/v1/") or path_qs == "/v1"):
        path_qs = path_qs[3:]
    return base + path_qs


class ProxyServer:
    """The aiohttp application of one proxy."""

    def __init__(self, service: ProxyService, upstream: str, config: ProxyConfig,
                 on_exchange: Callable[[ExchangeLog], None] | None = None) -> None:
        self.service = service
        self.upstream = upstream
        self.config = config
        self.on_exchange = on_exchange
        self._client: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.config.max_request_bytes)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._start_client)
        app.on_cleanup.append(self._stop_client)
        return app

    async def _start_client(self, _app: web.Application) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.config.connect_timeout_s,
                                        sock_read=self.config.read_timeout_s)
        self._client = aiohttp.ClientSession(timeout=timeout, auto_decompress=False,
                                             skip_auto_headers=("User-Agent", "Content-Type"))

    async def _stop_client(self, _app: web.Application) -> None:
        if self._client is not None:
            await self._client.close()

    # -- one request ------------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        exchange = await self._begin(request, body)
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        headers.append(("Accept-Encoding", "identity"))
        url = upstream_url(self.upstream, request.path_qs)
        assert self._client is not None
        try:
            upstream = await self._client.request(request.method, url, data=exchange.forward_body or None,
                                                  headers=headers, allow_redirects=False)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            return await self._upstream_down(request, exchange, exc)
        try:
            return await self._relay(request, exchange, upstream)
        finally:
            upstream.release()

    async def _begin(self, request: web.Request, body: bytes) -> Exchange:
        if request.method != "POST":
            return Exchange(None, "", None, False, body, note="not a chat request")
        try:
            return await asyncio.to_thread(self.service.begin, request.path, body)
        except Exception as exc:  # noqa: BLE001 - recording never stops a request: forward it unchanged
            return Exchange(None, "", None, False, body, note=f"not recorded: {type(exc).__name__}: {exc}")

    async def _upstream_down(self, request: web.Request, exchange: Exchange, exc: BaseException) -> web.Response:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        message = f"ctxbench proxy: cannot reach the upstream {self.upstream}: {reason}"
        payload = {"type": "error", "error": {"type": "upstream_unreachable", "message": message}}
        await self._finish(request, exchange, UPSTREAM_DOWN_STATUS, "upstream_down", ReplyRecord(), message)
        return web.json_response(payload, status=UPSTREAM_DOWN_STATUS)

    async def _relay(self, request: web.Request, exchange: Exchange,
                     upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP_BY_HOP or key.lower() == "content-length":
                response.headers.add(key, value)
        stream = upstream.headers.get("Content-Type", "").startswith("text/event-stream")
        recorder = self.service.recorder(exchange, stream=stream)
        error_text = bytearray()
        outcome, error = "ok" if upstream.status < 400 else "upstream_error", ""
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_chunked(self.config.chunk_bytes):
                try:
                    await response.write(chunk)
                except (ConnectionError, aiohttp.ClientConnectionResetError) as exc:
                    outcome, error = "client_gone", f"the client went away: {type(exc).__name__}"
                    break
                recorder.feed(chunk)
                if upstream.status >= 400 and len(error_text) < self.config.error_excerpt_chars:
                    error_text += chunk[: self.config.error_excerpt_chars - len(error_text)]
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            outcome, error = "cut", f"the upstream stream was cut: {type(exc).__name__}: {exc}"
        if upstream.status >= 400 and not error:
            error = error_text.decode("utf-8", "replace")
        reply = recorder.result()
        if outcome == "ok" and stream and not reply.complete and recorder.bytes_seen == 0:
            outcome, error = "cut", "the upstream closed the stream before the reply began"
        await self._finish(request, exchange, upstream.status, outcome, reply, error)
        if outcome == "cut":
            # the upstream cut its reply: cut the client's at the same point (no clean end of body)
            if request.transport is not None:
                request.transport.close()
            raise ConnectionResetError(error)
        if outcome != "client_gone":
            try:
                await response.write_eof()
            except (ConnectionError, aiohttp.ClientConnectionResetError):
                pass  # the client read its last event and hung up before the closing chunk: nothing is lost
        return response

    async def _finish(self, request: web.Request, exchange: Exchange, status: int | None, outcome: str,
                      reply: ReplyRecord, error: str) -> None:
        try:
            await asyncio.to_thread(self.service.finish, exchange, status=status, outcome=outcome, reply=reply,
                                    error=error)
        except Exception as exc:  # noqa: BLE001 - a store failure never reaches the client
            error = f"{error} (not recorded: {type(exc).__name__}: {exc})"
        if self.on_exchange is not None:
            plan = exchange.plan
            self.on_exchange(ExchangeLog(exchange.id, exchange.session_id, request.method, request.path, status,
                                         outcome, plan.used_tokens if plan is not None else 0, reply.prompt_tokens,
                                         len(exchange.note.split("; ")) if exchange.steered else 0,
                                         error or exchange.note))


class RunningProxy:
    """A proxy serving on its own event loop in a background thread (``with RunningProxy(...) as p: p.url``)."""

    def __init__(self, server: ProxyServer, host: str, port: int) -> None:
        self.server = server
        self.host = host
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="ctxbench-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "RunningProxy":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()
        return self

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.server.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = _bound_port(site, self.port)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> "RunningProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(server: ProxyServer, host: str, port: int, on_ready: Callable[[str], None]) -> None:
    """Serve until interrupted (Ctrl+C)."""

    async def main() -> None:
        runner = web.AppRunner(server.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        on_ready(f"http://{host}:{_bound_port(site, port)}")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass



def _bound_port(site: web.TCPSite, asked: int) -> int:
    """The port the site listens on (the one the system chose when ``asked`` is 0)."""
    server = getattr(site, "_server", None)
    sockets = getattr(server, "sockets", None) or ()
    return int(sockets[0].getsockname()[1]) if sockets else asked
