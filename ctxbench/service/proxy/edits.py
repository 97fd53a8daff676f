"""Editing a request: a new body from the original with some parts removed, some tool results replaced by shorter
text, pieces cut out of a text and a block appended to the system prompt; everything else (every other key, every
other message) is left as the client sent it."""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from ctxbench.records.proxy import WireRequest


@dataclass
class Edits:
    """What steering changes in a request: parts, whole messages or system blocks removed, pieces cut out of
    a text (a reminder block inside a user's message: ``cut`` maps a text's location to the ``[start, end)``
    spans taken out of it), tool results replaced by shorter text, and text appended to the system prompt."""

    remove: set[tuple[Any, ...]] = field(default_factory=set)
    replace: dict[tuple[Any, ...], str] = field(default_factory=dict)
    system_append: list[str] = field(default_factory=list)
    cut: dict[tuple[Any, ...], list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.remove or self.replace or self.system_append or self.cut)


def parent(body: Any, location: tuple[Any, ...]) -> tuple[Any, Any]:
    """The node of ``body`` that holds ``location``'s last key, and that key."""
    node = body
    for key in location[:-1]:
        node = node[key]
    return node, location[-1]


def apply_edits(request: WireRequest, edits: Edits) -> bytes:
    """The request body with ``edits`` made (the original's other keys and messages as they were)."""
    body = copy.deepcopy(request.body)
    for location, text in edits.replace.items():
        node, key = parent(body, location)
        if request.provider == "anthropic" and location[-1] != "content":  # a tool_result block: its content
            node[key] = dict(node[key], content=text)
        elif request.provider == "gemini":  # a functionResponse part: its one output
            result = node[key]["functionResponse"]
            node[key] = dict(node[key], functionResponse=dict(result, response={"output": text}))
        else:
            node[key] = text
    remove = set(edits.remove)
    for location, spans in edits.cut.items():  # pieces of a text taken out; a text left empty goes whole
        node, key = parent(body, location)
        value = node[key]
        text = value if isinstance(value, str) else str(value.get("text", ""))
        kept, at = [], 0
        for start, end in sorted(spans):
            kept.append(text[at:start])
            at = max(at, end)
        kept.append(text[at:])
        rest = "".join(kept)
        if not rest:
            remove.add(location)
        elif isinstance(value, str):
            node[key] = rest
        else:
            node[key] = dict(value, text=rest)
    tools = sorted((loc for loc in remove if loc[0] == "tools"), key=lambda l: l[-1], reverse=True)
    for loc in tools:  # a tool definition the user dropped (the last index first, so the others stay put)
        node, key = parent(body, loc)
        del node[key]
    if tools:
        _drop_empty_tools(body)
    _remove_system(body, request, {loc for loc in remove if loc[0] != "tools" and loc[0] != request.list_key})
    messages = body[request.list_key]
    remove = {loc for loc in remove if loc[0] == request.list_key}
    whole = {loc[1] for loc in remove if len(loc) == 2}
    if request.provider == "responses":  # an item that is not a message (a call, an output) goes whole
        whole |= {loc[1] for loc in remove if len(loc) > 2 and loc[2] != "content"}
    by_message: dict[int, list[tuple[Any, ...]]] = {}
    for loc in remove:
        if len(loc) > 2 and loc[1] not in whole:
            by_message.setdefault(loc[1], []).append(loc)
    for index, locs in by_message.items():
        message = messages[index]
        for loc in sorted(locs, key=lambda l: l[3] if len(l) > 3 else -1, reverse=True):
            if loc[2] == "content" and len(loc) == 3:
                if request.provider == "openai" and message.get("role") in ("tool", "function"):
                    whole.add(index)  # a tool result message goes whole (its call goes with it)
                message["content"] = "" if request.provider == "openai" else []
            else:
                del message[loc[2]][loc[3]]
        if request.provider == "openai" and "tool_calls" in message and not message["tool_calls"]:
            del message["tool_calls"]
        if _empty(message, request.provider):
            whole.add(index)
    for index in sorted(whole, reverse=True):
        del messages[index]
    if edits.system_append:
        _append_system(body, request.provider, "\n\n".join(edits.system_append))
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# what a request may say only beside tool definitions (OpenAI refuses tool_choice or parallel_tool_calls with no
# tools, Anthropic a tool_choice, Gemini a toolConfig): it goes when a drop leaves none
TOOL_OPTIONS = ("tool_choice", "parallel_tool_calls", "toolConfig", "tool_config")
_DECLARATIONS = ("functionDeclarations", "function_declarations")


def _drop_empty_tools(body: dict[str, Any]) -> None:
    """After tool definitions were dropped: a Gemini tool entry left with no declarations goes, and a tool list
    left empty goes with the options that need it (an empty list is refused upstream: OpenAI's "empty array")."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return
    tools[:] = [t for t in tools if not (isinstance(t, dict) and any(k in t for k in _DECLARATIONS)
                                         and not any(t.get(k) for k in _DECLARATIONS))]
    if not tools:
        del body["tools"]
        for key in TOOL_OPTIONS:
            body.pop(key, None)


def _remove_system(body: dict[str, Any], request: WireRequest, locations: set[tuple[Any, ...]]) -> None:
    """System blocks outside the messages removed (Anthropic's ``system`` blocks, the Responses API's
    ``instructions``, Gemini's ``systemInstruction`` parts); a system prompt left with no block goes whole."""
    for loc in sorted(locations, key=lambda l: l[-1] if isinstance(l[-1], int) else -1, reverse=True):
        node, key = parent(body, loc)
        del node[key]
        if len(loc) > 1 and isinstance(node, list) and not node:
            holder = loc[0]
            if len(loc) == 3 and isinstance(body.get(holder), dict):  # Gemini: {"parts": []} says nothing either
                del body[holder]
            elif len(loc) == 2:
                del body[holder]


def _empty(message: dict[str, Any], provider: str) -> bool:
    content = message.get("content")
    if provider == "responses":
        return content in ("", [], None)
    if provider == "gemini":
        return not message.get("parts")
    if provider == "openai":
        if message.get("role") == "tool":
            return False  # a tool result is only removed with its call, by location
        return not message.get("tool_calls") and (content is None or content == "" or content == [])
    blocks = content if isinstance(content, list) else [content]
    return all(isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking") for b in blocks) \
        or content in ("", [], None)


def _append_system(body: dict[str, Any], provider: str, text: str) -> None:
    if provider == "gemini":
        key = "system_instruction" if "system_instruction" in body else "systemInstruction"
        value = body.get(key)
        if isinstance(value, dict) and isinstance(value.get("parts"), list):
            value["parts"].append({"text": text})
        else:
            body[key] = {"parts": [{"text": text}]}
        return
    if provider == "responses":
        instructions = body.get("instructions")
        body["instructions"] = f"{instructions}\n\n{text}" if isinstance(instructions, str) and instructions else text
        return
    if provider == "anthropic":
        system = body.get("system")
        if isinstance(system, list):
            system.append({"type": "text", "text": text})
        elif isinstance(system, str) and system:
            body["system"] = system + "\n\n" + text
        else:
            body["system"] = text
        return
    messages = body["messages"]
    first = messages[0] if messages else None
    if first is not None and first.get("role") in ("system", "developer"):
        if isinstance(first.get("content"), list):
            first["content"].append({"type": "text", "text": text})
        else:
            first["content"] = f"{first.get('content') or ''}\n\n{text}".lstrip("\n")
    else:
        messages.insert(0, {"role": "system", "content": text})
