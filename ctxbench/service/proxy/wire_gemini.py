"""Gemini's ``generateContent`` / ``streamGenerateContent``, read: ``systemInstruction``, ``contents`` of ``user``
and ``model`` turns whose parts are text, ``functionCall``, ``functionResponse``, inline data; the model and
whether it streams are in the path."""
from __future__ import annotations

import json
from typing import Any

from ctxbench.records.proxy import WireMessage, WirePart, WireRequest, WireTool
from ctxbench.service.proxy.wire_parts import PartReader, WireError, message_hash
from ctxbench.tokens import TOKENS_PER_MESSAGE

GEMINI_STREAM = ":streamGenerateContent"


def gemini_model(path: str) -> str:
    """The model a Gemini path names (``/v1beta/models/gemini-2.5-pro:generateContent``)."""
    tail = path.rstrip("/").rsplit("/models/", 1)[-1] if "/models/" in path else ""
    return tail.split(":", 1)[0]


def _gemini_image(part: dict[str, Any]) -> bool:
    """A Gemini part that is an image: ``inlineData`` or ``fileData`` of an ``image/`` type."""
    data = part.get("inlineData") or part.get("fileData")
    return isinstance(data, dict) and str(data.get("mimeType") or "").startswith("image/")


def _message(reader: PartReader, i: int, m: dict[str, Any], pending: dict[str, list[str]]) -> WireMessage:
    role = {"model": "assistant"}.get(str(m.get("role") or "user"), str(m.get("role") or "user"))
    loc: tuple[Any, ...] = ("contents", i)
    parts: list[WirePart] = []
    for j, part in enumerate(m.get("parts") or ()):
        where = (*loc, "parts", j)
        if not isinstance(part, dict):
            parts.append(reader.other_part(part, where))
        elif isinstance(part.get("text"), str) and not part.get("thought"):
            parts.append(reader.text_part(part["text"], where))
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            name = str(call.get("name", ""))
            args = json.dumps(call.get("args", {}), ensure_ascii=False)
            call_id = str(call.get("id") or f"{name}#{i}.{j}")  # Gemini pairs calls and results by name
            pending.setdefault(name, []).append(call_id)
            parts.append(WirePart("tool_call", args, reader.tok.count(name) + reader.tok.count(args), where,
                                  tool_call_id=call_id, tool_name=name))
        elif isinstance(part.get("functionResponse"), dict):
            result = part["functionResponse"]
            name = str(result.get("name", ""))
            response = result.get("response")
            output = response.get("output") if isinstance(response, dict) and len(response) == 1 else None
            text = output if isinstance(output, str) else json.dumps(response, ensure_ascii=False)
            waiting = pending.get(name) or []
            call_id = str(result.get("id") or (waiting.pop(0) if waiting else f"{name}#{i}.{j}"))
            if result.get("id") and call_id in waiting:
                waiting.remove(call_id)
            parts.append(WirePart("tool_result", text, reader.tok.count(text), where, tool_call_id=call_id,
                                  tool_name=name, replaceable=isinstance(output, str)))
        elif _gemini_image(part):
            inline = part.get("inlineData") if isinstance(part.get("inlineData"), dict) else None
            media = inline or part.get("fileData") or {}
            parts.append(reader.image_part(inline.get("data") if inline else None, "", where, media.get("mimeType")))
        elif isinstance(part.get("inlineData"), dict) or isinstance(part.get("fileData"), dict):
            data = part.get("inlineData") or part.get("fileData") or {}
            parts.append(reader.media_part({"type": "file", "source": {"media_type": data.get("mimeType")},
                                            "title": data.get("fileUri") or data.get("displayName")}, where))
        else:
            parts.append(reader.other_part(part, where))
    return WireMessage(i, role, tuple(parts), message_hash(m), TOKENS_PER_MESSAGE + sum(p.tokens for p in parts))


def read_request(reader: PartReader, body: dict[str, Any], path: str) -> WireRequest:
    contents = body.get("contents")
    if not isinstance(contents, list) or not all(isinstance(m, dict) for m in contents):
        raise WireError("a generateContent request needs a list of contents")
    key = "systemInstruction" if "systemInstruction" in body else "system_instruction"
    value = body.get(key)
    system: list[WirePart] = []
    if isinstance(value, dict):
        for j, part in enumerate(value.get("parts") or ()):
            text = str(part.get("text", "")) if isinstance(part, dict) else str(part)
            system.append(WirePart("text", text, reader.tok.count(text), (key, "parts", j)))
    elif isinstance(value, str) and value:
        system.append(WirePart("text", value, reader.tok.count(value), (key,)))
    pending: dict[str, list[str]] = {}
    wire = tuple(_message(reader, i, m, pending) for i, m in enumerate(contents))
    tools: list[WireTool] = []
    for i, tool in enumerate(body.get("tools") or ()):
        if not isinstance(tool, dict):
            continue
        declarations = tool.get("functionDeclarations") or tool.get("function_declarations")
        if isinstance(declarations, list):
            field_name = "functionDeclarations" if "functionDeclarations" in tool else "function_declarations"
            for k, decl in enumerate(declarations):
                name = str(decl.get("name") or f"tool {i + 1}.{k + 1}") if isinstance(decl, dict) else f"tool {k}"
                tools.append(WireTool(name, reader.tok.count(json.dumps(decl, ensure_ascii=False)), i,
                                      location=("tools", i, field_name, k)))
        else:
            name = next(iter(tool), f"tool {i + 1}")
            tools.append(WireTool(name, reader.tok.count(json.dumps(tool, ensure_ascii=False)), i))
    return WireRequest("gemini", gemini_model(path), path.rstrip("/").endswith(GEMINI_STREAM), tuple(system),
                       tuple(tools), wire, body, list_key="contents")
