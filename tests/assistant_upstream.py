"""A scripted model endpoint on 127.0.0.1 that answers whatever the real assistants ask (Claude Code, Codex CLI,
aider, Gemini CLI), for the tests that drive them through ``ctxbench proxy``.

It speaks, streamed and whole: Anthropic Messages (``/v1/messages``, and ``/v1/messages/count_tokens``),
OpenAI Chat Completions (``/v1/chat/completions``), the OpenAI Responses API (``/v1/responses``) and Gemini
(``/v1beta/models/M:generateContent``, ``:streamGenerateContent``, ``:countTokens``); ``GET …/models`` lists
one model. Any other path is a 404 with a JSON body, and every request — answered or not — is kept in
:attr:`AssistantUpstream.seen` (method, path, headers, raw body), so a test can say what a client called.

Each chat request takes the next scripted :class:`Turn` (the last one repeats): a text reply, or a call of
one of the request's tools. Written on ``http.server`` so it shares no code with the proxy (aiohttp).
"""
from __future__ import annotations

import dataclasses
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Iterator

from upstream_server import LoopbackServer, sse

INPUT_TOKENS = 2345  # the prompt size every usage reports (a test compares it with the stored figure)
OUTPUT_TOKENS = 9
_GEMINI = re.compile(r"/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)")


@dataclass
class Turn:
    """One scripted answer: ``text``, and when ``tool`` is set, a call of that tool with ``arguments``."""

    text: str = "PONG from the scripted upstream"
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str = "call_scripted_1"
    serial: int = 0  # set per answer: every reply has ids of its own (Claude Code merges blocks by message id)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        return json.loads(self.body)

    @property
    def chat(self) -> bool:
        """A model call (not a token count, a model list or a telemetry post)."""
        p = self.path.split("?")[0].rstrip("/")
        return self.method == "POST" and (p.endswith(("/messages", "/chat/completions", "/responses"))
                                          or p.endswith((":generateContent", ":streamGenerateContent")))


class AssistantUpstream(LoopbackServer):
    """``with AssistantUpstream([Turn(...)]) as up: up.url``."""

    def __init__(self, script: list[Turn] | None = None) -> None:
        self.script = list(script or [Turn()])
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._n = 0
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # each event goes out when written, as a model endpoint sends it

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def do_GET(self) -> None:  # noqa: N802
                upstream._record(self, b"")
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "scripted-model", "object": "model"}],
                                     "models": [{"name": "models/scripted-model"}]})
                else:
                    self._json(404, {"error": {"type": "not_found", "message": f"no route GET {self.path}"}})

            def do_HEAD(self) -> None:  # noqa: N802
                upstream._record(self, b"")
                self._json(404, {})

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                upstream._record(self, body)
                try:
                    payload = json.loads(body or b"{}")
                except json.JSONDecodeError:
                    payload = {}
                path = self.path.split("?")[0].rstrip("/")
                gemini = _GEMINI.search(path)
                if path.endswith("/messages/count_tokens"):
                    self._json(200, {"input_tokens": INPUT_TOKENS})
                elif path.endswith("/messages"):
                    self._answer(payload, _anthropic_events, _anthropic_whole)
                elif path.endswith("/chat/completions"):
                    self._answer(payload, _chat_events, _chat_whole)
                elif path.endswith("/responses"):
                    self._answer(payload, _responses_events, _responses_whole)
                elif gemini and gemini.group(2) == "countTokens":
                    self._json(200, {"totalTokens": INPUT_TOKENS})
                elif gemini:
                    payload["model"] = gemini.group(1)
                    # a structured side call takes no scripted turn
                    turn = Turn() if _structured(payload) else upstream._next()
                    if gemini.group(2) == "streamGenerateContent":
                        self._events(_gemini_events(payload, turn))
                    else:
                        self._json(200, _gemini_whole(payload, turn))
                else:
                    self._json(404, {"error": {"type": "not_found", "message": f"no route POST {self.path}"}})

            def _answer(self, payload: dict[str, Any], events, whole) -> None:
                turn = upstream._next()
                if payload.get("stream"):
                    self._events(events(payload, turn))
                else:
                    self._json(200, whole(payload, turn))

            def _json(self, status: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _events(self, events: Iterator[bytes]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for event in events:
                    self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self._serve(Handler)

    def _record(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        with self._lock:
            self.seen.append(Seen(handler.command, handler.path, {k.lower(): v for k, v in handler.headers.items()},
                                  body))

    def _next(self) -> Turn:
        with self._lock:
            turn = self.script[min(self._n, len(self.script) - 1)]
            self._n += 1
            return dataclasses.replace(turn, serial=self._n)

    def chats(self) -> list[Seen]:
        """The model calls received, in order."""
        return [s for s in self.seen if s.chat]

    def calls(self) -> list[str]:
        """``METHOD path`` of every request received, for a failing test's message."""
        return [f"{s.method} {s.path}" for s in self.seen]





def _pieces(text: str, size: int = 6) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _offers(payload: dict[str, Any], turn: Turn) -> bool:
    """Whether the turn calls a tool the request offers (a client that sent no such tool gets the text only)."""
    if turn.tool is None:
        return False
    names = set()
    for tool in payload.get("tools") or ():
        names.add(tool.get("name") or (tool.get("function") or {}).get("name"))
        for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or ():
            names.add(decl.get("name"))
    return turn.tool in names


# -- Anthropic Messages ---------------------------------------------------------------------------------------
def _anthropic_usage() -> dict[str, int]:
    return {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}


def _anthropic_events(payload: dict[str, Any], turn: Turn) -> Iterator[bytes]:
    model = payload.get("model", "scripted-model")
    yield sse({"type": "message_start", "message": {
        "id": f"msg_scripted_{turn.serial}", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": _anthropic_usage() | {"output_tokens": 1}}},
        "message_start")
    yield sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
               "content_block_start")
    for piece in _pieces(turn.text):
        yield sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
                   "content_block_delta")
    yield sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    stop = "end_turn"
    if _offers(payload, turn):
        stop = "tool_use"
        yield sse({"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": turn.call_id, "name": turn.tool, "input": {}}}, "content_block_start")
        yield sse({"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(turn.arguments)}}, "content_block_delta")
        yield sse({"type": "content_block_stop", "index": 1}, "content_block_stop")
    yield sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": OUTPUT_TOKENS}}, "message_delta")
    yield sse({"type": "message_stop"}, "message_stop")


def _anthropic_whole(payload: dict[str, Any], turn: Turn) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}]
    if _offers(payload, turn):
        content.append({"type": "tool_use", "id": turn.call_id, "name": turn.tool, "input": turn.arguments})
    return {"id": f"msg_scripted_{turn.serial}", "type": "message", "role": "assistant",
            "model": payload.get("model", "scripted-model"), "content": content,
            "stop_reason": "tool_use" if len(content) > 1 else "end_turn", "stop_sequence": None,
            "usage": _anthropic_usage()}


# -- OpenAI Chat Completions ----------------------------------------------------------------------------------
def _chat_usage() -> dict[str, int]:
    return {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}


def _chat_events(payload: dict[str, Any], turn: Turn) -> Iterator[bytes]:
    base = {"id": f"chatcmpl-scripted-{turn.serial}", "object": "chat.completion.chunk", "created": 1,
            "model": payload.get("model", "scripted-model")}
    yield sse(base | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
    for piece in _pieces(turn.text):
        yield sse(base | {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
    finish = "stop"
    if _offers(payload, turn):
        finish = "tool_calls"
        yield sse(base | {"choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [{
            "index": 0, "id": turn.call_id, "type": "function",
            "function": {"name": turn.tool, "arguments": json.dumps(turn.arguments)}}]}}]})
    yield sse(base | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if (payload.get("stream_options") or {}).get("include_usage"):
        yield sse(base | {"choices": [], "usage": _chat_usage()})
    yield sse("[DONE]")


def _chat_whole(payload: dict[str, Any], turn: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if _offers(payload, turn):
        message["tool_calls"] = [{"id": turn.call_id, "type": "function",
                                  "function": {"name": turn.tool, "arguments": json.dumps(turn.arguments)}}]
    return {"id": f"chatcmpl-scripted-{turn.serial}", "object": "chat.completion", "created": 1,
            "model": payload.get("model", "scripted-model"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
            "usage": _chat_usage()}


# -- OpenAI Responses -----------------------------------------------------------------------------------------
def _responses_output(payload: dict[str, Any], turn: Turn) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = [{
        "type": "message", "id": f"msg_scripted_{turn.serial}", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": turn.text, "annotations": []}]}]
    if _offers(payload, turn):
        output.append({"type": "function_call", "id": f"fc_scripted_{turn.serial}", "status": "completed", "call_id": turn.call_id,
                       "name": turn.tool, "arguments": json.dumps(turn.arguments)})
    return output


def _response(payload: dict[str, Any], turn: Turn, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    done = status == "completed"
    return {"id": f"resp_scripted_{turn.serial}", "object": "response", "created_at": 1, "status": status,
            "model": payload.get("model", "scripted-model"), "output": output, "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None,
            "usage": {"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": OUTPUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS} if done else None}


def _responses_events(payload: dict[str, Any], turn: Turn) -> Iterator[bytes]:
    output = _responses_output(payload, turn)
    seq = iter(range(1_000_000))

    def event(kind: str, **data: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq)} | data, kind)

    yield event("response.created", response=_response(payload, turn, "in_progress", []))
    yield event("response.in_progress", response=_response(payload, turn, "in_progress", []))
    message = output[0]
    yield event("response.output_item.added", output_index=0, item=message | {"status": "in_progress", "content": []})
    part = {"type": "output_text", "text": "", "annotations": []}
    yield event("response.content_part.added", item_id=message["id"], output_index=0, content_index=0, part=part)
    for piece in _pieces(turn.text):
        yield event("response.output_text.delta", item_id=message["id"], output_index=0, content_index=0,
                    delta=piece, logprobs=[])
    yield event("response.output_text.done", item_id=message["id"], output_index=0, content_index=0,
                text=turn.text, logprobs=[])
    yield event("response.content_part.done", item_id=message["id"], output_index=0, content_index=0,
                part=message["content"][0])
    yield event("response.output_item.done", output_index=0, item=message)
    for index, item in enumerate(output[1:], start=1):
        yield event("response.output_item.added", output_index=index, item=item | {"arguments": ""})
        yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                    delta=item["arguments"])
        yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                    arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=_response(payload, turn, "completed", output))


def _responses_whole(payload: dict[str, Any], turn: Turn) -> dict[str, Any]:
    return _response(payload, turn, "completed", _responses_output(payload, turn))


# -- Gemini ---------------------------------------------------------------------------------------------------
def _gemini_usage() -> dict[str, int]:
    return {"promptTokenCount": INPUT_TOKENS, "candidatesTokenCount": OUTPUT_TOKENS,
            "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS}


def _gemini_chunk(parts: list[dict[str, Any]], finish: str | None, model: str, usage: bool,
                  serial: int = 0) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": f"gemini-scripted-{serial}"}
    if usage:
        chunk["usageMetadata"] = _gemini_usage()
    return chunk


def _filled(schema: dict[str, Any]) -> Any:
    """The plainest value that fits a JSON schema (its first enum value, every property)."""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {name: _filled(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [_filled(schema.get("items") or {"type": "string"})]
    if kind in ("number", "integer"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return False
    return "scripted"


def _structured(payload: dict[str, Any]) -> bool:
    return (payload.get("generationConfig") or {}).get("responseMimeType") == "application/json"


def _gemini_parts(payload: dict[str, Any], turn: Turn) -> list[dict[str, Any]]:
    config = payload.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema") or {"type": "object"}
    if _structured(payload):
        # a structured side call (Gemini CLI's model router asks for a JSON verdict first)
        return [{"text": json.dumps(_filled(schema))}]
    parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text else []
    if _offers(payload, turn):
        parts.append({"functionCall": {"name": turn.tool, "args": turn.arguments}})
    return parts


def _gemini_events(payload: dict[str, Any], turn: Turn) -> Iterator[bytes]:
    model = payload.get("model", "scripted-model")
    if _structured(payload):
        yield sse(_gemini_chunk(_gemini_parts(payload, turn), "STOP", model, True, turn.serial))
        return
    pieces = _pieces(turn.text)
    for piece in pieces[:-1]:
        yield sse(_gemini_chunk([{"text": piece}], None, model, False, turn.serial))
    last = [{"text": pieces[-1]}] if pieces else []
    if _offers(payload, turn):
        last.append({"functionCall": {"name": turn.tool, "args": turn.arguments}})
    yield sse(_gemini_chunk(last, "STOP", model, True, turn.serial))


def _gemini_whole(payload: dict[str, Any], turn: Turn) -> dict[str, Any]:
    return _gemini_chunk(_gemini_parts(payload, turn), "STOP", payload.get("model", "scripted-model"), True, turn.serial)
