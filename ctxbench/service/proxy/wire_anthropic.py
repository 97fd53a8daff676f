"""Anthropic Messages, read: the ``system`` string or blocks, and each message's text, ``tool_use``,
``tool_result`` (with the images inside it), image and document blocks."""
from __future__ import annotations

import json
from typing import Any

from ctxbench.records.proxy import WireMessage, WirePart, WireRequest
from ctxbench.service.proxy.wire_parts import PartReader, WireError, message_hash, only_text, text_of
from ctxbench.tokens import TOKENS_PER_MESSAGE


def _message(reader: PartReader, i: int, m: dict[str, Any]) -> WireMessage:
    role = str(m.get("role", ""))
    loc: tuple[Any, ...] = ("messages", i)
    content = m.get("content")
    parts: list[WirePart] = []
    if isinstance(content, str):
        parts.append(reader.text_part(content, (*loc, "content")))
    elif isinstance(content, list):
        for j, block in enumerate(content):
            where = (*loc, "content", j)
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                parts.append(reader.text_part(str(block.get("text", "")), where))
            elif kind == "tool_use":
                args = json.dumps(block.get("input", {}), ensure_ascii=False)
                name = str(block.get("name", ""))
                parts.append(WirePart("tool_call", args, reader.tok.count(name) + reader.tok.count(args), where,
                                      tool_call_id=str(block.get("id", "")), tool_name=name))
            elif kind == "tool_result":
                inner = block.get("content", "")
                text = text_of(inner)
                image_tokens, images = reader.result_images(inner)
                parts.append(WirePart("tool_result", text, reader.tok.count(text) + image_tokens, where,
                                      tool_call_id=str(block.get("tool_use_id", "")),
                                      replaceable=only_text(inner), label=images))
            elif kind == "image":
                source = block.get("source") if isinstance(block.get("source"), dict) else {}
                parts.append(reader.image_part(source.get("data") if source.get("type") == "base64" else None,
                                               "", where, source.get("media_type")))
            elif kind == "document":
                parts.append(reader.media_part(block, where))
            else:
                parts.append(reader.other_part(block, where))
    else:
        raise WireError(f"message {i} has no content")
    return WireMessage(i, role, tuple(parts), message_hash(m), TOKENS_PER_MESSAGE + sum(p.tokens for p in parts))


def read_request(reader: PartReader, body: dict[str, Any]) -> WireRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise WireError("a messages request needs a list of messages")
    system_value = body.get("system")
    system: list[WirePart] = []
    if isinstance(system_value, str) and system_value:
        system.append(WirePart("text", system_value, reader.tok.count(system_value), ("system",)))
    elif isinstance(system_value, list):
        for j, block in enumerate(system_value):
            text = text_of([block]) if isinstance(block, dict) else str(block)
            system.append(WirePart("text", text, reader.tok.count(text), ("system", j)))
    wire = tuple(_message(reader, i, m) for i, m in enumerate(messages))
    return WireRequest("anthropic", str(body.get("model", "")), bool(body.get("stream")), tuple(system),
                       reader.tools(body), wire, body)
