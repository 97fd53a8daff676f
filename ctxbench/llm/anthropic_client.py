"""A streaming chat client for Anthropic's Messages API (``/v1/messages``) with the ``anthropic`` SDK.

The request is the plan's payload rendered by :mod:`.anthropic_wire` (``system`` blocks, ``messages``, ``tools``)
with ``cache_control`` breakpoints where :func:`.anthropic_wire.place_breakpoints` puts them (at most
``llm.cache_breakpoints``). Streaming, retries before the first token, cancellation and the deadline are the
OpenAI client's (:class:`.client.OpenAIChatClient`); only the request and the events differ.

The usage Anthropic reports splits the prompt three ways (``input_tokens`` uncached, ``cache_creation_input_tokens``
written to the cache, ``cache_read_input_tokens`` read from it); :class:`.client.Usage` keeps the last two as they
are and counts the prompt as their sum with the first, so it compares with the plan's estimate of the whole prompt.
``message_start`` carries them; a ``message_delta`` that repeats them (cumulative counts) replaces them.
"""
from __future__ import annotations

from typing import Any, Iterator

from ctxbench.llm.anthropic_wire import anthropic_body, place_breakpoints
from ctxbench.llm.client import (
    ChatRequest,
    OpenAIChatClient,
    StreamEvent,
    TextDelta,
    ToolCallStarted,
    Usage,
    _Assembly,
)

USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


class AnthropicChatClient(OpenAIChatClient):
    """Streams from an Anthropic Messages endpoint (``base_url``: the API's root, e.g. ``https://api.anthropic.com``)."""

    provider = "anthropic"
    # the turns it stores are ctxbench's own messages (tool calls as ToolCall records), rendered for Anthropic only
    # on the wire: they stay in the family every plan renders, so a session can change provider and keep its tools
    parsing_strategy = "openai"
    uses_previous_request = True  # the turn runner hands it the session's previous request (where breakpoints go)
    sdk_module = "anthropic"  # its exception classes have the openai SDK's names, which _classify knows
    sdk_client = "Anthropic"

    @property
    def _where(self) -> str:
        return self.config.base_url or "the Anthropic API"

    def _create(self, payload: dict[str, Any]) -> Any:
        return self._sdk.messages.create(**payload)

    def _payload(self, request: ChatRequest) -> dict[str, Any]:
        plan = request.plan
        items = sorted(plan.included, key=lambda i: i.order) if plan is not None else None
        points = place_breakpoints(request.messages, request.tools, items=items, previous=request.previous,
                                   limit=self.config.cache_breakpoints)
        body = anthropic_body(request.messages, request.tools, points)
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else self.config.max_reply_tokens,
            "messages": body.messages,
            "stream": True,
        }
        if body.system:
            payload["system"] = body.system
        if body.tools:
            payload["tools"] = body.tools
        return payload

    def _absorb(self, event: Any, assembly: _Assembly) -> Iterator[StreamEvent]:  # type: ignore[override]
        kind = getattr(event, "type", "")
        if kind == "message_start":
            message = event.message
            if getattr(message, "model", None):
                assembly.model = message.model
            self._usage(getattr(message, "usage", None), assembly)
        elif kind == "content_block_start":
            block = event.content_block
            if getattr(block, "type", "") == "tool_use":
                n = len(assembly.calls)
                assembly.calls[event.index] = {"id": block.id or "", "name": block.name or "", "arguments": ""}
                yield ToolCallStarted(n, block.name or "")
            elif getattr(block, "type", "") == "text" and getattr(block, "text", ""):
                assembly.content.append(block.text)
                yield TextDelta(block.text)
        elif kind == "content_block_delta":
            delta = event.delta
            if getattr(delta, "type", "") == "text_delta" and delta.text:
                assembly.content.append(delta.text)
                yield TextDelta(delta.text)
            elif getattr(delta, "type", "") == "input_json_delta" and event.index in assembly.calls:
                assembly.calls[event.index]["arguments"] += delta.partial_json or ""
        elif kind == "message_delta":
            self._usage(getattr(event, "usage", None), assembly)
            if getattr(event.delta, "stop_reason", None):
                assembly.finish_reason = event.delta.stop_reason

    @staticmethod
    def _usage(usage: Any, assembly: _Assembly) -> None:
        """Take the counts ``usage`` reports (a later report of a count replaces the earlier one)."""
        if usage is None:
            return
        for name in USAGE_FIELDS:
            value = getattr(usage, name, None)
            if value is not None:
                assembly.reported[name] = int(value)
        got = assembly.reported
        if "input_tokens" not in got:
            return
        read = got.get("cache_read_input_tokens")
        written = got.get("cache_creation_input_tokens")
        prompt = got["input_tokens"] + (read or 0) + (written or 0)
        output = got.get("output_tokens")
        assembly.usage = Usage(prompt, output, prompt + output if output is not None else None,
                               cache_read_tokens=read, cache_write_tokens=written)
