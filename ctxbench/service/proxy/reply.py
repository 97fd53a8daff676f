"""Reading an upstream reply as it streams past, in bounded memory: Chat Completions chunks, Anthropic
Messages events, and the Responses API's semantic events (``response.output_text.delta``,
``response.output_item.added``, ``response.completed`` with the usage and the response's id).

The proxy hands every chunk it forwards to a :class:`ReplyRecorder` and forgets it. The recorder keeps
the reply's text up to ``max_chars`` characters, the usage the provider reports and how the reply ended;
a server-sent event is parsed as soon as its line is complete, and a line longer than ``max_line_bytes``
is skipped rather than buffered. A reply that is not a stream (one JSON body) is kept up to
``max_body_bytes`` to be parsed at the end; a longer one is not parsed (its text and usage stay unknown).
"""
from __future__ import annotations

import json
from typing import Any

from ctxbench.records.proxy import ReplyRecord

COUNT_TOKENS = "count_tokens"  # an Anthropic count_tokens answer: the prompt tokens of a request, no reply


class ReplyRecorder:
    def __init__(self, provider: str, *, stream: bool, max_chars: int, max_body_bytes: int) -> None:
        self.provider = provider
        self.stream = stream
        self.max_chars = max_chars
        self.max_body_bytes = max_body_bytes
        self._pending = bytearray()  # an incomplete line (stream) or the body so far (JSON)
        self._skipping = False  # the current line outgrew max_body_bytes: dropped up to its end
        self._text: list[str] = []
        self._chars = 0
        self.cut = False
        self.prompt: int | None = None
        self.completion: int | None = None
        self.model = ""
        self.stop = ""
        self.complete = False
        self.bytes_seen = 0
        self.response_id = ""
        self.cached: int | None = None
        self.written: int | None = None  # prompt tokens written to the cache (Anthropic)
        self.written_1h: int | None = None  # of those, to the 1-hour cache

    # -- feeding -----------------------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        self.bytes_seen += len(chunk)
        if not self.stream:
            if len(self._pending) + len(chunk) <= self.max_body_bytes:
                self._pending += chunk
            else:
                self._skipping = True
            return
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                rest = chunk[start:]
                if self._skipping or len(self._pending) + len(rest) > self.max_body_bytes:
                    self._pending.clear()
                    self._skipping = True
                else:
                    self._pending += rest
                return
            piece = chunk[start:end]
            if self._skipping:
                self._skipping = False
                self._pending.clear()
            else:
                line = bytes(self._pending) + piece if self._pending else piece
                self._pending.clear()
                self._line(line)
            start = end + 1

    def _line(self, line: bytes) -> None:
        line = line.rstrip(b"\r")
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.complete = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if isinstance(event, dict):
            {"anthropic": self._anthropic_event, "responses": self._responses_event,
             "gemini": self._gemini_response}.get(self.provider, self._openai_chunk)(event)

    def _add_text(self, text: str) -> None:
        if not text:
            return
        room = self.max_chars - self._chars
        if room <= 0:
            self.cut = True
            return
        if len(text) > room:
            text, self.cut = text[:room], True
        self._text.append(text)
        self._chars += len(text)

    # -- OpenAI Chat Completions --------------------------------------------------------------------------
    def _openai_chunk(self, event: dict[str, Any]) -> None:
        self.model = str(event.get("model") or self.model)
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            self._add_text(str(delta.get("content") or ""))
            for call in delta.get("tool_calls") or ():
                fn = call.get("function") or {}
                if fn.get("name"):
                    self._add_text(f"\n[tool call {fn['name']}]")
            if choice.get("finish_reason"):
                self.stop = str(choice["finish_reason"])
        self._openai_usage(event.get("usage"))

    def _openai_usage(self, usage: Any, prompt: str = "prompt_tokens", completion: str = "completion_tokens") -> None:
        """OpenAI's usage (Chat Completions' names by default; the Responses API's are ``input_``/``output_tokens``)."""
        if isinstance(usage, dict):
            if usage.get(prompt) is not None:
                self.prompt = int(usage[prompt])
            if usage.get(completion) is not None:
                self.completion = int(usage[completion])
            cached = (usage.get(f"{prompt}_details") or {}).get("cached_tokens")
            if cached is not None:
                self.cached = int(cached)

    # -- Gemini ------------------------------------------------------------------------------------------------
    def _gemini_response(self, data: dict[str, Any]) -> None:
        """One GenerateContentResponse: a streamed chunk, or a whole reply (no end marker: a finish reason)."""
        self.model = str(data.get("modelVersion") or self.model)
        self.response_id = str(data.get("responseId") or self.response_id)
        for candidate in (data.get("candidates") or ())[:1]:
            for part in (candidate.get("content") or {}).get("parts") or ():
                if not isinstance(part, dict) or part.get("thought"):
                    continue
                if isinstance(part.get("text"), str):
                    self._add_text(part["text"])
                elif isinstance(part.get("functionCall"), dict):
                    self._add_text(f"\n[tool call {part['functionCall'].get('name', '')}]")
            if candidate.get("finishReason"):
                self.stop = str(candidate["finishReason"])
                self.complete = True
        usage = data.get("usageMetadata")
        if isinstance(usage, dict):
            if usage.get("promptTokenCount") is not None:
                self.prompt = int(usage["promptTokenCount"])
            if usage.get("candidatesTokenCount") is not None or usage.get("thoughtsTokenCount") is not None:
                self.completion = int(usage.get("candidatesTokenCount") or 0) + int(usage.get("thoughtsTokenCount") or 0)
            if usage.get("cachedContentTokenCount") is not None:
                self.cached = int(usage["cachedContentTokenCount"])

    # -- OpenAI Responses -------------------------------------------------------------------------------------
    def _responses_event(self, event: dict[str, Any]) -> None:
        kind = str(event.get("type") or "")
        if kind == "response.output_text.delta":
            self._add_text(str(event.get("delta") or ""))
        elif kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("type") not in (None, "message", "reasoning"):
                self._add_text(f"\n[tool call {item.get('name') or item.get('type')}]")
        elif kind in ("response.created", "response.in_progress", "response.completed", "response.incomplete",
                      "response.failed"):
            self._responses_head(event.get("response") or {})
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                self.complete = True
        elif kind == "error":
            self.stop = "error"

    def _responses_head(self, response: dict[str, Any]) -> None:
        self.response_id = str(response.get("id") or self.response_id)
        self.model = str(response.get("model") or self.model)
        status = response.get("status")
        if status and status != "in_progress":
            self.stop = str(status)
        self._openai_usage(response.get("usage"), "input_tokens", "output_tokens")

    # -- Anthropic Messages ---------------------------------------------------------------------------------
    def _anthropic_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = str(message.get("model") or self.model)
            self._anthropic_usage(message.get("usage"))
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                self._add_text(f"\n[tool call {block.get('name', '')}]")
            elif block.get("type") == "text":
                self._add_text(str(block.get("text") or ""))
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                self._add_text(str(delta.get("text") or ""))
        elif kind == "message_delta":
            self.stop = str((event.get("delta") or {}).get("stop_reason") or self.stop)
            self._anthropic_usage(event.get("usage"))
        elif kind == "message_stop":
            self.complete = True

    def _anthropic_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        fields = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        if any(usage.get(f) is not None for f in fields):
            self.prompt = sum(int(usage.get(f) or 0) for f in fields)
        if usage.get("cache_read_input_tokens") is not None:
            self.cached = int(usage["cache_read_input_tokens"])
        if usage.get("cache_creation_input_tokens") is not None:
            self.written = int(usage["cache_creation_input_tokens"])
        creation = usage.get("cache_creation")
        if isinstance(creation, dict) and creation.get("ephemeral_1h_input_tokens") is not None:
            self.written_1h = int(creation["ephemeral_1h_input_tokens"])
        if usage.get("output_tokens") is not None:
            self.completion = int(usage["output_tokens"])

    # -- the end ------------------------------------------------------------------------------------------
    def result(self) -> ReplyRecord:
        if not self.stream and self._pending and not self._skipping:
            self._parse_body(bytes(self._pending))
            self._pending.clear()
        return ReplyRecord("".join(self._text), self.cut, self.prompt, self.completion, self.model, self.stop,
                           self.complete, self.response_id, self.cached, self.written, self.written_1h)

    def _parse_body(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except ValueError:
            return
        if self.provider == "gemini":  # one response, or streamGenerateContent without alt=sse: a JSON array
            for one in data if isinstance(data, list) else [data]:
                if isinstance(one, dict):
                    self._gemini_response(one)
            self.complete = self.complete or (isinstance(data, (dict, list)) and "error" not in data)
            return
        if not isinstance(data, dict):
            return
        if self.provider == COUNT_TOKENS:  # {"input_tokens": N}: what the upstream counts for the request
            if isinstance(data.get("input_tokens"), int):
                self.prompt = int(data["input_tokens"])
            self.complete = "error" not in data
            return
        self.model = str(data.get("model") or "")
        if self.provider == "responses":
            for item in data.get("output") or ():
                if not isinstance(item, dict):
                    continue
                if item.get("type") == "message":
                    for block in item.get("content") or ():
                        if isinstance(block, dict) and block.get("type") == "output_text":
                            self._add_text(str(block.get("text") or ""))
                elif item.get("type") != "reasoning":
                    self._add_text(f"\n[tool call {item.get('name') or item.get('type')}]")
            self._responses_head(data)
        elif self.provider == "anthropic":
            for block in data.get("content") or ():
                if isinstance(block, dict) and block.get("type") == "text":
                    self._add_text(str(block.get("text") or ""))
                elif isinstance(block, dict) and block.get("type") == "tool_use":
                    self._add_text(f"\n[tool call {block.get('name', '')}]")
            self.stop = str(data.get("stop_reason") or "")
            self._anthropic_usage(data.get("usage"))
        else:
            for choice in data.get("choices") or ():
                message = choice.get("message") or {}
                self._add_text(str(message.get("content") or ""))
                for call in message.get("tool_calls") or ():
                    self._add_text(f"\n[tool call {(call.get('function') or {}).get('name', '')}]")
                self.stop = str(choice.get("finish_reason") or self.stop)
            self._openai_usage(data.get("usage"))
        self.complete = "error" not in data
