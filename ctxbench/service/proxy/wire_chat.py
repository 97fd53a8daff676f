"""OpenAI Chat Completions, read: ``messages`` (system and developer messages are the system prompt), each
message's text, image, audio and file parts, its ``tool_calls``, and ``tool`` messages holding results."""
from __future__ import annotations

from typing import Any

from ctxbench.records.proxy import WireMessage, WirePart, WireRequest
from ctxbench.service.proxy.wire_parts import PartReader, WireError, message_hash, only_text, text_of
from ctxbench.tokens import TOKENS_PER_MESSAGE


def _message(reader: PartReader, i: int, m: dict[str, Any]) -> WireMessage:
    role = str(m.get("role", ""))
    loc: tuple[Any, ...] = ("messages", i)
    parts: list[WirePart] = []
    content = m.get("content")
    if role == "tool" or role == "function":
        text = text_of(content)
        parts.append(WirePart("tool_result", text, reader.tok.count(text), (*loc, "content"),
                              tool_call_id=str(m.get("tool_call_id", "")), tool_name=str(m.get("name", "")),
                              replaceable=only_text(content)))
    elif isinstance(content, str):
        if content:
            parts.append(reader.text_part(content, (*loc, "content")))
    elif isinstance(content, list):
        for j, block in enumerate(content):
            where = (*loc, "content", j)
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(reader.text_part(str(block.get("text", "")), where))
            elif isinstance(block, dict) and block.get("type") == "image_url":
                parts.append(reader.openai_image(block, where))
            elif isinstance(block, dict) and block.get("type") in ("input_audio", "file"):
                parts.append(reader.media_part(block, where))
            else:
                parts.append(reader.other_part(block, where))
    for k, call in enumerate(m.get("tool_calls") or ()):
        fn = call.get("function") or {}
        args = str(fn.get("arguments", ""))
        name = str(fn.get("name", ""))
        parts.append(WirePart("tool_call", args, reader.tok.count(name) + reader.tok.count(args),
                              (*loc, "tool_calls", k), tool_call_id=str(call.get("id", "")), tool_name=name))
    return WireMessage(i, role, tuple(parts), message_hash(m),
                       TOKENS_PER_MESSAGE + sum(p.tokens for p in parts))


def read_request(reader: PartReader, body: dict[str, Any]) -> WireRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise WireError("a chat completions request needs a list of messages")
    wire = tuple(_message(reader, i, m) for i, m in enumerate(messages))
    system = tuple(p for m in wire if m.role in ("system", "developer") for p in m.parts)
    return WireRequest("openai", str(body.get("model", "")), bool(body.get("stream")), system,
                       reader.tools(body), wire, body)
