"""A scripted model endpoint on 127.0.0.1 speaking OpenAI Chat Completions, Anthropic Messages, OpenAI's
Responses API (``/v1/responses``: semantic events when streamed, a response object when not) and Gemini's
``generateContent`` / ``streamGenerateContent`` (server-sent events with ``alt=sse``, else a JSON array), for
the proxy tests. Written on ``http.server`` (not the proxy's aiohttp) so the two ends share no code.

Every request is recorded as it arrived: method, path, headers and the raw body bytes. Each request takes
the next scripted :class:`Answer` (the last one repeats): a streamed or whole reply with usage, an HTTP
error with its body, a stream cut after some events, or a long stream of many events.
"""
from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Answer:
    text: str = "Hello from upstream."
    status: int = 200
    error_body: bytes = b'{"error": {"type": "overloaded_error", "message": "scripted overload"}}'
    prompt_tokens: int = 1234
    completion_tokens: int = 7
    cut_after_events: int | None = None  # close the socket after this many content events
    events: int = 0  # a long stream: this many extra text events of ``filler`` each
    filler: str = ""
    tool_call: tuple[str, dict[str, Any]] | None = None  # (name, input): the reply calls a tool
    cached_tokens: int = 0  # prompt tokens the provider reports read from its cache
    delay_s: float = 0.0  # a slow stream: this long between events
    raw_stream: bytes | None = None  # sent as a close-delimited event stream (no length, no chunks), then closed
    cache_write_tokens: int = 0  # Anthropic: prompt tokens reported written to the 5-minute cache
    cache_write_1h_tokens: int = 0  # Anthropic: prompt tokens reported written to the 1-hour cache
    # the prompt tokens reported as a function of the request's JSON (a tokenizer the proxy does not know);
    # replaces prompt_tokens (Anthropic: the uncached input_tokens, cached and written ones apart)
    prompt_of: Callable[[dict[str, Any]], int] | None = None


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        return json.loads(self.body)


class LoopbackServer:
    """A scripted HTTP server on a free loopback port, served from a daemon thread while the ``with`` block lasts;
    a client that hangs up mid-answer is not an error."""

    _httpd: ThreadingHTTPServer
    _thread: threading.Thread

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.handle_error = lambda request, client_address: None
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class Upstream(LoopbackServer):
    def __init__(self, script: list[Answer] | None = None) -> None:
        self.script = list(script or [Answer()])
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._n = 0
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def do_GET(self) -> None:  # noqa: N802
                upstream._record(self, b"")
                self._send(200, b'{"object": "list", "data": [{"id": "scripted-model", "object": "model"}]}')

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer = upstream._record(self, body)
                if answer.status != 200:
                    self._send(answer.status, answer.error_body)
                    return
                if answer.raw_stream is not None:
                    self._close_delimited(answer.raw_stream)
                    return
                payload = json.loads(body)
                if answer.prompt_of is not None:
                    answer = dataclasses.replace(answer, prompt_tokens=answer.prompt_of(payload), prompt_of=None)
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/messages/count_tokens"):  # Anthropic's token counting: the prompt, no reply
                    self._send(200, json.dumps({"input_tokens": answer.prompt_tokens}).encode())
                    return
                if path.endswith("/responses"):
                    response_id = f"resp_{len(upstream.seen)}"
                    if payload.get("stream"):
                        self._stream_events(_responses_events(payload, answer, response_id), answer)
                    else:
                        self._send(200, json.dumps(_response_object(payload, answer, response_id, "completed")).encode())
                    return
                if path.endswith((":generateContent", ":streamGenerateContent")):
                    model = path.rsplit("/models/", 1)[-1].split(":")[0]
                    chunks = _gemini_chunks(answer, model)
                    if path.endswith(":generateContent"):
                        self._send(200, json.dumps(_gemini_whole(answer, model)).encode())
                    elif "alt=sse" in self.path:
                        self._stream_events((sse(c) for c in chunks), answer)
                    else:  # streamGenerateContent without alt=sse: one JSON array of the chunks
                        self._send(200, json.dumps(list(chunks)).encode())
                    return
                anthropic = path.endswith("/messages")
                if payload.get("stream"):
                    self._stream(payload, answer, anthropic)
                else:
                    self._send(200, json.dumps(_whole(payload, answer, anthropic)).encode())

            def _send(self, status: int, raw: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.send_header("X-Upstream", "scripted")
                self.end_headers()
                self.wfile.write(raw)

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _close_delimited(self, raw: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(raw)
                self.wfile.flush()
                self.close_connection = True

            def _stream(self, payload: dict[str, Any], answer: Answer, anthropic: bool) -> None:
                events = _anthropic_events(payload, answer) if anthropic else _openai_events(payload, answer)
                self._stream_events(events, answer)

            def _stream_events(self, events, answer: Answer) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for n, event in enumerate(events):
                    if answer.cut_after_events is not None and n >= answer.cut_after_events:
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    self._chunk(event)
                    if answer.delay_s:
                        time.sleep(answer.delay_s)
                self._chunk(b"")

        self._serve(Handler)

    def _record(self, handler: BaseHTTPRequestHandler, body: bytes) -> Answer:
        with self._lock:
            self.seen.append(Seen(handler.command, handler.path, {k.lower(): v for k, v in handler.headers.items()},
                                  body))
            answer = self.script[min(self._n, len(self.script) - 1)]
            self._n += 1
            return answer



def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


def _openai_events(payload: dict[str, Any], a: Answer):
    model = payload.get("model", "scripted")
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}
    yield sse(base | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
    for piece in [a.text[i:i + 5] for i in range(0, len(a.text), 5)] + [a.filler] * a.events:
        yield sse(base | {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
    yield sse(base | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if (payload.get("stream_options") or {}).get("include_usage"):
        yield sse(base | {"choices": [], "usage": {"prompt_tokens": a.prompt_tokens,
                                                    "completion_tokens": a.completion_tokens,
                                                    "total_tokens": a.prompt_tokens + a.completion_tokens}})
    yield sse("[DONE]")


def _anthropic_events(payload: dict[str, Any], a: Answer):
    model = payload.get("model", "scripted")
    yield sse({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": _anthropic_usage(a, 1)}}, "message_start")
    yield sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
               "content_block_start")
    for piece in [a.text[i:i + 5] for i in range(0, len(a.text), 5)] + [a.filler] * a.events:
        yield sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
                   "content_block_delta")
    yield sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    stop = "end_turn"
    if a.tool_call is not None:
        stop = "tool_use"
        yield sse({"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": a.tool_call[0], "input": {}}}, "content_block_start")
        yield sse({"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(a.tool_call[1])}}, "content_block_delta")
        yield sse({"type": "content_block_stop", "index": 1}, "content_block_stop")
    yield sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": a.completion_tokens}}, "message_delta")
    yield sse({"type": "message_stop"}, "message_stop")


def _anthropic_usage(a: Answer, output: int) -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": a.prompt_tokens, "cache_read_input_tokens": a.cached_tokens,
                             "output_tokens": output}
    if a.cache_write_tokens or a.cache_write_1h_tokens:
        usage["cache_creation_input_tokens"] = a.cache_write_tokens + a.cache_write_1h_tokens
        usage["cache_creation"] = {"ephemeral_5m_input_tokens": a.cache_write_tokens,
                                   "ephemeral_1h_input_tokens": a.cache_write_1h_tokens}
    return usage


def _whole(payload: dict[str, Any], a: Answer, anthropic: bool) -> dict[str, Any]:
    model = payload.get("model", "scripted")
    if anthropic:
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": a.text}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": _anthropic_usage(a, a.completion_tokens)}
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": a.text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens,
                      "total_tokens": a.prompt_tokens + a.completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": a.cached_tokens}}}


def _responses_usage(a: Answer) -> dict[str, Any]:
    return {"input_tokens": a.prompt_tokens, "input_tokens_details": {"cached_tokens": a.cached_tokens},
            "output_tokens": a.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": a.prompt_tokens + a.completion_tokens}


def _responses_output(a: Answer) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                                  "content": [{"type": "output_text", "text": a.text + a.filler * a.events,
                                               "annotations": []}]}]
    if a.tool_call is not None:
        out.append({"id": "fc_1", "type": "function_call", "call_id": "call_up_1", "name": a.tool_call[0],
                    "arguments": json.dumps(a.tool_call[1]), "status": "completed"})
    return out


def _response_object(payload: dict[str, Any], a: Answer, response_id: str, status: str) -> dict[str, Any]:
    done = status == "completed"
    return {"id": response_id, "object": "response", "created_at": 1, "status": status,
            "model": payload.get("model", "scripted"), "output": _responses_output(a) if done else [],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": payload.get("tools") or [],
            "instructions": payload.get("instructions"), "previous_response_id": payload.get("previous_response_id"),
            "usage": _responses_usage(a) if done else None}


def _responses_events(payload: dict[str, Any], a: Answer, response_id: str):
    """The Responses API's semantic events, in the order the API sends them (no ``[DONE]``)."""
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    yield event("response.created", response=_response_object(payload, a, response_id, "in_progress"))
    yield event("response.in_progress", response=_response_object(payload, a, response_id, "in_progress"))
    yield event("response.output_item.added", output_index=0, item={
        "id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []})
    yield event("response.content_part.added", item_id="msg_1", output_index=0, content_index=0,
                part={"type": "output_text", "text": "", "annotations": []})
    for piece in [a.text[i:i + 5] for i in range(0, len(a.text), 5)] + [a.filler] * a.events:
        yield event("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta=piece,
                    logprobs=[])
    text = a.text + a.filler * a.events
    yield event("response.output_text.done", item_id="msg_1", output_index=0, content_index=0, text=text, logprobs=[])
    yield event("response.content_part.done", item_id="msg_1", output_index=0, content_index=0,
                part={"type": "output_text", "text": text, "annotations": []})
    output = _responses_output(a)
    yield event("response.output_item.done", output_index=0, item=output[0])
    if a.tool_call is not None:
        call = output[1]
        yield event("response.output_item.added", output_index=1, item=dict(call, arguments="", status="in_progress"))
        yield event("response.function_call_arguments.delta", item_id="fc_1", output_index=1,
                    delta=call["arguments"])
        yield event("response.function_call_arguments.done", item_id="fc_1", output_index=1,
                    arguments=call["arguments"])
        yield event("response.output_item.done", output_index=1, item=call)
    yield event("response.completed", response=_response_object(payload, a, response_id, "completed"))


def _gemini_usage(a: Answer) -> dict[str, Any]:
    return {"promptTokenCount": a.prompt_tokens, "candidatesTokenCount": a.completion_tokens,
            "totalTokenCount": a.prompt_tokens + a.completion_tokens, "cachedContentTokenCount": a.cached_tokens}


def _gemini_chunks(a: Answer, model: str):
    """Gemini's streamed GenerateContentResponse chunks: text pieces, a function call, then the finish reason and
    the usage in the last one (no end marker)."""
    pieces = [a.text[i:i + 5] for i in range(0, len(a.text), 5)] + [a.filler] * a.events
    for piece in pieces:
        yield {"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}],
               "modelVersion": model, "responseId": "gem-1"}
    parts = [{"functionCall": {"name": a.tool_call[0], "args": a.tool_call[1]}}] if a.tool_call else [{"text": ""}]
    yield {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
           "usageMetadata": _gemini_usage(a), "modelVersion": model, "responseId": "gem-1"}


def _gemini_whole(a: Answer, model: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": a.text + a.filler * a.events}]
    if a.tool_call:
        parts.append({"functionCall": {"name": a.tool_call[0], "args": a.tool_call[1]}})
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": _gemini_usage(a), "modelVersion": model, "responseId": "gem-1"}
