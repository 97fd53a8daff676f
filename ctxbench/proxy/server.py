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
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from ctxbench.config import ProxyConfig
from ctxbench.proxy.guard import TOKEN_HEADER, TOKEN_PREFIX, Admitted, Guard, Refusal, recordable
from ctxbench.records.proxy import ReplyRecord
from ctxbench.service.proxy.body import BodyTap
from ctxbench.service.proxy.service import Exchange, ProxyService

HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", TOKEN_HEADER.lower(),
})
UPSTREAM_DOWN_STATUS = 502
UPSTREAM_CUT = "the upstream stream was cut"  # its connection broke mid-reply: the client's is cut the same way


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
    # False: the exchange was the first request of a conversation no model answered, and its session was not kept
    # (``exchange_id`` and ``session_id`` name what was deleted)
    kept: bool = True


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
                 on_exchange: Callable[[ExchangeLog], None] | None = None, *, token: str | None = None) -> None:
        self.service = service
        self.upstream = upstream
        self.config = config
        self.on_exchange = on_exchange
        self.token = config.token if token is None else token
        self.guard = Guard("127.0.0.1", 0, self.token)  # its address once it listens (:meth:`listening`)
        self._client: aiohttp.ClientSession | None = None
        # replies cut by a stop while their request's recording was still being written: (recording, status, reply)
        self._stopped: list[tuple["asyncio.Future[Exchange]", int | None, ReplyRecord]] = []

    async def close_stopped(self) -> None:
        """After a stop: wait (``proxy.record_stop_wait_s`` at most) for the recordings still being written of
        replies the stop cut, and close each as cut with what arrived, so none is left pending."""
        stopped, self._stopped = self._stopped, []
        for begun, status, reply in stopped:
            try:
                exchange = await asyncio.wait_for(begun, self.config.record_stop_wait_s)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                continue  # still pending: the next start closes it
            self._finish_now(exchange, status, "cut", reply, "the proxy was stopped mid-reply")

    def listening(self, host: str, port: int) -> None:
        """The address the proxy serves: the Host a request may name."""
        self.guard = Guard(host, port, self.token)

    def app(self) -> web.Application:
        # a body the proxy reads whole (to steer it) is at most max_request_bytes; any other streams through
        app = web.Application(client_max_size=self.config.max_request_bytes + 1)
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
        verdict = self.guard.check(request.headers.get("Host"), request.headers.get("Origin"),
                                   request.headers.get(TOKEN_HEADER), request.path, request.path_qs)
        if isinstance(verdict, Refusal):
            return self._refuse(request, verdict)
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        headers.append(("Accept-Encoding", "identity"))
        url = upstream_url(self.upstream, verdict.path_qs)
        why_not = self._why_not_recorded(request, verdict)
        tap: BodyTap | None = None
        sent = asyncio.Event()
        size = request.content_length
        if why_not is None and self.service.steer and size is not None and size <= self.config.max_request_bytes:
            # steering needs the whole request before anything goes upstream
            exchange = await self._begin(verdict.path, await request.read())
            data: object = exchange.forward_body or None
        else:
            # forwarded as it arrives, recorded once the upstream has it
            if why_not is None and request.body_exists:
                tap = BodyTap(self.config.max_request_bytes, self.config.record_text_bytes)
            exchange = Exchange(None, "", self.service.provider(verdict.path), False, b"",
                                note=why_not or "not recorded: the upstream answered before the request was sent")
            data = self._stream_body(request, tap, sent) if request.body_exists else None
            if size is not None and request.body_exists:
                headers.append(("Content-Length", str(size)))
        # a forwarded request is recorded as soon as the upstream has all of it, while the upstream thinks
        begun = asyncio.ensure_future(self._begin_tapped(verdict.path, tap, sent)) if tap is not None else None
        assert self._client is not None
        try:
            upstream = await self._client.request(request.method, url, data=data, headers=headers,
                                                  allow_redirects=False)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            if begun is not None:
                await self._drain(request, tap, sent)  # recorded all the same, as a request that found no upstream
                exchange = await begun
            return await self._upstream_down(request, verdict, exchange, exc)
        except asyncio.CancelledError:
            if begun is not None:
                begun.cancel()
            self._finish_now(exchange, None, "cut", ReplyRecord(), "the proxy was stopped before the upstream answered")
            raise
        try:
            if begun is not None:
                exchange, begun = await self._recorded(begun, sent, exchange)
            return await self._relay(request, verdict, exchange, begun, upstream)
        finally:
            upstream.release()

    def _why_not_recorded(self, request: web.Request, admitted: Admitted) -> str | None:
        if request.method != "POST" or self.service.provider(admitted.path) is None:
            return "not a chat request"
        if not recordable(request.content_type):
            # forwarded all the same: only a local program gets this far (a web page's request is refused for
            # its Origin), and it could call the upstream itself; recording it would let it write a session
            return f"not recorded: the body is {request.content_type or 'untyped'}, not application/json"
        return None

    def _refuse(self, request: web.Request, refusal: Refusal) -> web.Response:
        kind = "unauthorized" if refusal.status == 401 else "forbidden"
        if self.on_exchange is not None:
            path = request.path if not request.path.startswith(TOKEN_PREFIX) else f"{TOKEN_PREFIX}…"
            self.on_exchange(ExchangeLog(None, "", request.method, path, refusal.status, "refused", 0, None, 0,
                                         refusal.message.removeprefix("ctxbench proxy: ")))
        return web.json_response({"type": "error", "error": {"type": kind, "message": refusal.message}},
                                 status=refusal.status)

    async def _stream_body(self, request: web.Request, tap: BodyTap | None, sent: asyncio.Event):
        async for chunk in request.content.iter_chunked(self.config.chunk_bytes):
            if tap is not None:
                tap.feed(chunk)
            yield chunk
        sent.set()

    async def _begin(self, path: str, body: bytes, **kwargs: object) -> Exchange:
        try:
            return await asyncio.to_thread(self.service.begin, path, body, **kwargs)
        except Exception as exc:  # noqa: BLE001 - recording never stops a request: forward it unchanged
            return Exchange(None, "", None, False, body, note=f"not recorded: {type(exc).__name__}: {exc}")

    async def _drain(self, request: web.Request, tap: BodyTap | None, sent: asyncio.Event) -> None:
        """Read what is left of a request the upstream did not take, for the record."""
        if tap is None or sent.is_set():
            return
        async for chunk in request.content.iter_chunked(self.config.chunk_bytes):
            tap.feed(chunk)
        sent.set()

    async def _begin_tapped(self, path: str, tap: BodyTap | None, sent: asyncio.Event) -> Exchange:
        """Record a request that was forwarded as it arrived, from what the tap kept of it, once it is all sent."""
        assert tap is not None
        await sent.wait()
        body, cut = tap.result()
        if body is None:
            return Exchange(None, "", None, False, b"",
                            note=f"not recorded: even with its texts cut to {tap.cut_bytes:,} bytes, the request "
                                 f"({tap.size:,} bytes) is above proxy.max_request_bytes")
        return await self._begin(path, body, cut=cut, forwarded=True)

    async def _recorded(self, begun: "asyncio.Future[Exchange]", sent: asyncio.Event,
                        waiting: Exchange) -> tuple[Exchange, "asyncio.Future[Exchange] | None"]:
        """The exchange of a forwarded request before its reply is relayed, so a watcher sees it pending — or,
        when recording takes longer than ``proxy.record_wait_s`` (a body of megabytes), the reply goes on
        and the recording still under way is returned, to be waited for at the end. An upstream that answers
        before it has the whole request (an error, most likely) leaves it unrecorded."""
        if not sent.is_set():
            try:
                await asyncio.wait_for(sent.wait(), self.config.body_settle_s)
            except asyncio.TimeoutError:
                begun.cancel()
                return waiting, None
        done, _ = await asyncio.wait({begun}, timeout=self.config.record_wait_s)
        return (begun.result(), None) if done else (waiting, begun)

    async def _upstream_down(self, request: web.Request, admitted: Admitted, exchange: Exchange,
                             exc: BaseException) -> web.Response:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        message = f"ctxbench proxy: cannot reach the upstream {self.upstream}: {reason}"
        payload = {"type": "error", "error": {"type": "upstream_unreachable", "message": message}}
        await self._finish(request, admitted, exchange, UPSTREAM_DOWN_STATUS, "upstream_down", ReplyRecord(), message)
        return web.json_response(payload, status=UPSTREAM_DOWN_STATUS)

    async def _relay(self, request: web.Request, admitted: Admitted, exchange: Exchange,
                     begun: "asyncio.Future[Exchange] | None", upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        def current() -> Exchange:  # the exchange, once a recording still under way has stored it
            return begun.result() if begun is not None and begun.done() and not begun.cancelled() else exchange

        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP_BY_HOP or key.lower() == "content-length":
                response.headers.add(key, value)
        stream = upstream.headers.get("Content-Type", "").startswith("text/event-stream")
        recorder = self.service.recorder(exchange, stream=stream)
        error_text = bytearray()
        outcome, error = "ok" if upstream.status < 400 else "upstream_error", ""
        saved_at = time.monotonic()
        try:
            await response.prepare(request)
            async for chunk in upstream.content.iter_chunked(self.config.chunk_bytes):
                try:
                    await response.write(chunk)
                except (ConnectionError, aiohttp.ClientConnectionResetError) as exc:
                    outcome, error = "client_gone", f"the client went away: {type(exc).__name__}"
                    break
                recorder.feed(chunk)
                if upstream.status >= 400 and len(error_text) < self.config.error_excerpt_chars:
                    error_text += chunk[: self.config.error_excerpt_chars - len(error_text)]
                if stream and time.monotonic() - saved_at >= self.config.reply_save_s:
                    # what has arrived so far is saved as it comes: a proxy killed mid-reply keeps it
                    saved_at = time.monotonic()
                    await self._save_partial(current(), recorder.result())
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            outcome, error = "cut", f"{UPSTREAM_CUT}: {type(exc).__name__}: {exc}"
            rest = _unread(upstream.content)
            if rest:  # what the upstream sent before it cut, still unread: the client gets it, then the cut
                recorder.feed(rest)
                try:
                    await response.write(rest)
                except (ConnectionError, aiohttp.ClientConnectionResetError):
                    pass
        except asyncio.CancelledError:
            # the proxy is stopping (Ctrl+C, SIGTERM) mid-reply: keep what arrived, as cut — a recording still being
            # written (a busy machine: the reply went on after record_wait_s) is closed by ``close_stopped`` once
            # it is stored, after the server has stopped, instead of being left pending
            if begun is not None and not begun.done():
                self._stopped.append((begun, upstream.status, recorder.result()))
            else:
                self._finish_now(current(), upstream.status, "cut", recorder.result(), "the proxy was stopped mid-reply")
            raise
        if begun is not None and not begun.cancelled():
            exchange = await begun
        if upstream.status >= 400 and not error:
            error = error_text.decode("utf-8", "replace")
        reply = recorder.result()
        if outcome == "ok" and stream and not (reply.complete or reply.stop_reason):
            # the HTTP reply ended cleanly (a close-delimited stream), so the client's does too, as the upstream's
            outcome, error = "cut", ("the upstream closed the stream before the reply began" if recorder.bytes_seen == 0
                                     else "the upstream closed the stream before its end (no finish event)")
        await self._finish(request, admitted, exchange, upstream.status, outcome, reply, error)
        if outcome == "cut" and error.startswith(UPSTREAM_CUT):
            # the upstream cut its reply: cut the client's at the same point (no clean end of body); aiohttp's
            # closing write then fails quietly, and the log has the exchange's one line, not a traceback
            if request.transport is not None:
                request.transport.close()
            return response
        if outcome != "client_gone":
            try:
                await response.write_eof()
            except (ConnectionError, aiohttp.ClientConnectionResetError):
                pass  # the client read its last event and hung up before the closing chunk: nothing is lost
        return response

    async def _save_partial(self, exchange: Exchange, reply: ReplyRecord) -> None:
        if exchange.id is None:
            return
        try:
            await asyncio.to_thread(self.service.save_partial, exchange, reply)
        except Exception:  # noqa: BLE001 - a store failure never reaches the client; the end is recorded anyway
            pass

    def _finish_now(self, exchange: Exchange, status: int | None, outcome: str, reply: ReplyRecord,
                    error: str) -> None:
        try:
            self.service.finish(exchange, status=status, outcome=outcome, reply=reply, error=error)
        except Exception:  # noqa: BLE001 - stopping: the next start closes what is left pending
            pass

    async def _finish(self, request: web.Request, admitted: Admitted, exchange: Exchange, status: int | None,
                      outcome: str, reply: ReplyRecord, error: str) -> None:
        kept = exchange.id is not None
        try:
            kept = await asyncio.to_thread(self.service.finish, exchange, status=status, outcome=outcome, reply=reply,
                                           error=error)
        except Exception as exc:  # noqa: BLE001 - a store failure never reaches the client
            error = f"{error} (not recorded: {type(exc).__name__}: {exc})"
        if self.on_exchange is not None:
            plan = exchange.plan
            self.on_exchange(ExchangeLog(exchange.id, exchange.session_id, request.method, admitted.path, status,
                                         outcome, plan.used_tokens if plan is not None else 0, reply.prompt_tokens,
                                         len(exchange.note.split("; ")) if exchange.steered else 0,
                                         error or exchange.note, kept=kept or exchange.id is None))


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
        self._runner = web.AppRunner(self.server.app(), access_log=None, handle_signals=False,
                                     shutdown_timeout=self.server.config.stop_grace_s)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = _bound_port(site, self.port)
        self.server.listening(self.host, self.port)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result()
            asyncio.run_coroutine_threadsafe(self.server.close_stopped(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> "RunningProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(server: ProxyServer, host: str, port: int, on_ready: Callable[[str], None]) -> None:
    """Serve until interrupted: Ctrl+C or SIGTERM. Either way a reply still streaming gets
    ``proxy.stop_grace_s`` to end, then is recorded as cut with what arrived of it. Both take the same path (the
    serving ends, then the server stops), not asyncio's Ctrl+C, which cancels the serving task and under load left
    the process stuck in its stop; a second Ctrl+C or SIGTERM while stopping ends the process at once."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def interrupted() -> None:
            if stop.is_set():  # asked again while stopping: leave now
                os._exit(130)
            stop.set()

        loop.add_signal_handler(signal.SIGTERM, interrupted)
        loop.add_signal_handler(signal.SIGINT, interrupted)
        runner = web.AppRunner(server.app(), access_log=None, shutdown_timeout=server.config.stop_grace_s)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = _bound_port(site, port)
        server.listening(host, bound)
        on_ready(f"http://{_url_host(host)}:{bound}")
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
            await server.close_stopped()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass


def _unread(content: aiohttp.StreamReader) -> bytes:
    """What a stream that failed still holds unread. aiohttp raises a cut stream's error before the data that
    arrived with it (a reader that was busy while the upstream sent its last events and closed would lose
    them); its buffer is private, so this reads it defensively."""
    buffer = getattr(content, "_buffer", None)
    if not buffer:
        return b""
    try:
        data = b"".join(bytes(b) for b in buffer)
        buffer.clear()
    except (TypeError, AttributeError):
        return b""
    return data


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _bound_port(site: web.TCPSite, asked: int) -> int:
    """The port the site listens on (the one the system chose when ``asked`` is 0)."""
    server = getattr(site, "_server", None)
    sockets = getattr(server, "sockets", None) or ()
    return int(sockets[0].getsockname()[1]) if sockets else asked
