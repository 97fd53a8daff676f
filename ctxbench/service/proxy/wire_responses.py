"""OpenAI's Responses API (``/v1/responses``), read: ``instructions``, and ``input`` as a string or a list of
items (messages, ``function_call`` and ``function_call_output`` and the other tool calls and outputs,
reasoning …), each item read as one message."""
from __future__ import annotations

import json
from typing import Any

from ctxbench.records.proxy import WireMessage, WirePart, WireRequest
from ctxbench.service.proxy.wire_parts import PartReader, WireError, message_hash
from ctxbench.tokens import TOKENS_PER_MESSAGE

# Responses API input items that call a tool, and those that carry a tool's output (the call's id in call_id)
RESPONSES_CALLS = ("function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call",
                   "computer_call", "mcp_call")
RESPONSES_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output",
                     "shell_call_output", "apply_patch_call_output", "computer_call_output")


def _item(reader: PartReader, i: int, item: dict[str, Any]) -> WireMessage:
    kind = str(item.get("type") or "message")
    loc: tuple[Any, ...] = ("input", i)
    parts: list[WirePart] = []
    if kind == "message":
        role = str(item.get("role", "user"))
        content = item.get("content")
        if isinstance(content, str):
            parts.append(reader.text_part(content, (*loc, "content")))
        elif isinstance(content, list):
            for j, block in enumerate(content):
                where = (*loc, "content", j)
                btype = block.get("type") if isinstance(block, dict) else None
                if btype in ("input_text", "output_text", "text"):
                    parts.append(reader.text_part(str(block.get("text", "")), where))
                elif btype == "input_image":
                    parts.append(reader.openai_image(block, where))
                elif btype in ("input_file", "input_audio"):
                    parts.append(reader.media_part(block, where))
                else:
                    parts.append(reader.other_part(block, where))
    elif kind in RESPONSES_CALLS:
        role = "assistant"
        name = str(item.get("name") or kind.removesuffix("_call"))
        args = item.get("arguments", item.get("input", item.get("action", "")))
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        parts.append(WirePart("tool_call", text, reader.tok.count(name) + reader.tok.count(text), loc,
                              tool_call_id=str(item.get("call_id") or item.get("id") or ""), tool_name=name))
    elif kind in RESPONSES_OUTPUTS:
        role = "tool"
        output = item.get("output", "")
        image_tokens, images = reader.result_images(output)
        texts = [str(b.get("text", "")) for b in output if isinstance(b, dict) and b.get("type") in (
            "text", "input_text", "output_text")] if isinstance(output, list) else []
        text = output if isinstance(output, str) else "\n".join(texts) if texts else (
            "" if images else json.dumps(output, ensure_ascii=False))
        parts.append(WirePart("tool_result", text, reader.tok.count(text) + image_tokens, (*loc, "output"),
                              tool_call_id=str(item.get("call_id") or item.get("id") or ""),
                              tool_name=str(item.get("name") or ""), replaceable=isinstance(output, str),
                              label=images))
    elif kind == "reasoning":
        role = "assistant"
        summary = "\n".join(str(s.get("text", "")) for s in item.get("summary") or () if isinstance(s, dict))
        shown = summary or f"[reasoning, {len(json.dumps(item, ensure_ascii=False)):,} bytes of JSON]"
        parts.append(WirePart("other", shown, reader.tok.count(shown), loc, label="reasoning"))
    else:
        role = str(item.get("role") or "assistant")
        parts.append(reader.other_part(item, loc))
    return WireMessage(i, role, tuple(parts), message_hash(item), TOKENS_PER_MESSAGE + sum(p.tokens for p in parts))


def read_request(reader: PartReader, body: dict[str, Any]) -> WireRequest:
    value = body.get("input")
    system: list[WirePart] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        system.append(WirePart("text", instructions, reader.tok.count(instructions), ("instructions",)))
    if isinstance(value, str):
        part = reader.text_part(value, ("input",))
        wire: tuple[WireMessage, ...] = (WireMessage(0, "user", (part,), message_hash(
            {"role": "user", "content": value}), TOKENS_PER_MESSAGE + part.tokens),)
    elif isinstance(value, list) and all(isinstance(item, dict) for item in value):
        wire = tuple(_item(reader, i, item) for i, item in enumerate(value))
    elif value is None:
        wire = ()
    else:
        raise WireError("a responses request's input is a string or a list of items")
    system.extend(p for m in wire if m.role in ("system", "developer") for p in m.parts)
    previous = body.get("previous_response_id")
    return WireRequest("responses", str(body.get("model", "")), bool(body.get("stream")), tuple(system),
                       reader.tools(body), wire, body, list_key="input",
                       previous_response_id=previous if isinstance(previous, str) else "")
