"""Reading and editing the requests the proxy forwards: OpenAI Chat Completions, Anthropic Messages and
OpenAI's Responses API (``/v1/responses``: ``instructions``, and ``input`` as a string or a list of items:
messages, ``function_call`` and ``function_call_output``, reasoning …; each item is read as one message) and
Gemini's ``generateContent`` / ``streamGenerateContent`` (``systemInstruction``, ``contents`` of ``user`` and
``model`` turns whose parts are text, ``functionCall``, ``functionResponse``, inline data; the model and
whether it streams are in the path).

:func:`parse_request` reads a request body into a :class:`~ctxbench.records.proxy.WireRequest` (system
blocks, tool definitions, messages split into parts, each part with its tokens and its place in the JSON)
without changing it. :func:`apply_edits` writes a new body from the original with some parts removed,
some tool results replaced by shorter text and a block appended to the system prompt; everything else
(every other key, every other message) is left as the client sent it. :func:`neutral_messages` turns a
wire message into the provider-neutral messages the store keeps.

A message's hash ignores Anthropic's ``cache_control`` markers: assistants move the cache breakpoint to
the newest message on every request, and the conversation must still be recognised by its prefix.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from json.decoder import scanstring
from typing import Any, Iterable

from ctxbench.records.messages import ToolCall
from ctxbench.records.proxy import WireMessage, WirePart, WireRequest, WireTool
from ctxbench.service.proxy import anatomy
from ctxbench.service.proxy.images import data_url_base64, image_count
from ctxbench.tokens import TOKENS_PER_MESSAGE, Tokenizer

OPENAI_PATH = "/chat/completions"
ANTHROPIC_PATH = "/messages"
RESPONSES_PATH = "/responses"
GEMINI_METHODS = (":generateContent", ":streamGenerateContent")
GEMINI_STREAM = ":streamGenerateContent"
# Responses API input items that call a tool, and those that carry a tool's output (the call's id in call_id)
RESPONSES_CALLS = ("function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call",
                   "computer_call", "mcp_call")
RESPONSES_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output",
                     "shell_call_output", "apply_patch_call_output", "computer_call_output")
HASH_HEX = 24
# a text that starts with a file's path on its own line and then a code fence is an attached file (aider,
# Continue and most chat front ends attach files like that)
_ATTACHED_FILE = re.compile(r"\A\s*([\w./\\-]+\.[A-Za-z0-9]{1,10})\s*\n```")


class WireError(ValueError):
    """The body is not a request the proxy can read (it is forwarded unchanged all the same)."""


def provider_for_path(path: str) -> str | None:
    """``openai`` for a Chat Completions path, ``anthropic`` for a Messages path, ``responses`` for the
    Responses API's create path, else None."""
    path = path.rstrip("/")
    if path.endswith(OPENAI_PATH):
        return "openai"
    if path.endswith(ANTHROPIC_PATH):
        return "anthropic"
    if path.endswith(RESPONSES_PATH):
        return "responses"
    if path.endswith(GEMINI_METHODS):
        return "gemini"
    return None


def gemini_model(path: str) -> str:
    """The model a Gemini path names (``/v1beta/models/gemini-2.5-pro:generateContent``)."""
    tail = path.rstrip("/").rsplit("/models/", 1)[-1] if "/models/" in path else ""
    return tail.split(":", 1)[0]


def _strip_cache_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_marks(v) for v in value]
    return value


def message_hash(message: Any) -> str:
    text = json.dumps(_strip_cache_marks(message), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_HEX]


def _text_of(content: Any) -> str:
    """The text of a content value: a string, or the text blocks of a list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _only_text(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content)


def _gemini_image(part: dict[str, Any]) -> bool:
    """A Gemini part that is an image: ``inlineData`` or ``fileData`` of an ``image/`` type."""
    data = part.get("inlineData") or part.get("fileData")
    return isinstance(data, dict) and str(data.get("mimeType") or "").startswith("image/")


def _file_label(text: str) -> str:
    match = _ATTACHED_FILE.match(text)
    return match.group(1) if match else ""


class _Reader:
    def __init__(self, tokenizer: Tokenizer, provider: str = "openai") -> None:
        self.tok = tokenizer
        self.provider = provider

    def text_part(self, text: str, location: tuple[Any, ...]) -> WirePart:
        label = _file_label(text)
        return WirePart("file" if label else "text", text, self.tok.count(text), location, label=label)

    def media_part(self, block: dict[str, Any], location: tuple[Any, ...]) -> WirePart:
        kind = str(block.get("type", "file"))
        source = block.get("source") if isinstance(block.get("source"), dict) else {}
        label = str(block.get("title") or (block.get("file") or {}).get("filename") or source.get("media_type")
                    or kind)
        text = str(source.get("data", "")) if source.get("type") == "text" else ""
        size = len(json.dumps(block, ensure_ascii=False))
        shown = text or f"[{kind} {label}, {size:,} bytes of JSON]"
        return WirePart("file", shown, self.tok.count(shown), location, label=label, replaceable=False)

    def image_part(self, data: Any, detail: Any, location: tuple[Any, ...], media_type: Any = "") -> WirePart:
        """An image, counted as the provider bills it from its base64 ``data`` (None: a URL or a file reference,
        whose size is not in the request: an estimate), never as text."""
        count = image_count(self.provider, data if isinstance(data, str) else None,
                            detail if isinstance(detail, str) else "")
        kind = f", {media_type}" if isinstance(media_type, str) and media_type else ""
        return WirePart("image", f"[{count.label()}{kind}]", count.tokens, location, label=count.label(),
                        replaceable=False)

    def openai_image(self, block: dict[str, Any], location: tuple[Any, ...]) -> WirePart:
        """A Chat Completions ``image_url`` part or a Responses ``input_image``."""
        value = block.get("image_url")
        url = value.get("url") if isinstance(value, dict) else value
        detail = value.get("detail") if isinstance(value, dict) else block.get("detail")
        return self.image_part(data_url_base64(url) if isinstance(url, str) else None, detail, location)

    def result_images(self, content: Any) -> tuple[int, str]:
        """The tokens and labels of the images among a tool result's blocks (Claude Code's Read of a screenshot,
        Codex's view_image): counted as the provider bills them, they are part of the tool's atom."""
        images = [self.image_part(b.get("source", {}).get("data") if b.get("source", {}).get("type") == "base64"
                                  else None, "", ())
                  if b.get("type") == "image" else self.openai_image(b, ())
                  for b in content if isinstance(b, dict) and b.get("type") in ("image", "input_image")] \
            if isinstance(content, list) else []
        return sum(p.tokens for p in images), "; ".join(p.label for p in images)

    def other_part(self, block: Any, location: tuple[Any, ...]) -> WirePart:
        text = block.get("thinking") or block.get("text") or "" if isinstance(block, dict) else ""
        text = str(text) or json.dumps(block, ensure_ascii=False)
        return WirePart("other", text, self.tok.count(text), location)

    # -- OpenAI Chat Completions ----------------------------------------------------------------------
    def openai_message(self, i: int, m: dict[str, Any]) -> WireMessage:
        role = str(m.get("role", ""))
        loc: tuple[Any, ...] = ("messages", i)
        parts: list[WirePart] = []
        content = m.get("content")
        if role == "tool" or role == "function":
            text = _text_of(content)
            parts.append(WirePart("tool_result", text, self.tok.count(text), (*loc, "content"),
                                  tool_call_id=str(m.get("tool_call_id", "")), tool_name=str(m.get("name", "")),
                                  replaceable=_only_text(content)))
        elif isinstance(content, str):
            if content:
                parts.append(self.text_part(content, (*loc, "content")))
        elif isinstance(content, list):
            for j, block in enumerate(content):
                where = (*loc, "content", j)
                if isinstance(block, dict) and block.get("type") == "text":
                    parts.append(self.text_part(str(block.get("text", "")), where))
                elif isinstance(block, dict) and block.get("type") == "image_url":
                    parts.append(self.openai_image(block, where))
                elif isinstance(block, dict) and block.get("type") in ("input_audio", "file"):
                    parts.append(self.media_part(block, where))
                else:
                    parts.append(self.other_part(block, where))
        for k, call in enumerate(m.get("tool_calls") or ()):
            fn = call.get("function") or {}
            args = str(fn.get("arguments", ""))
            name = str(fn.get("name", ""))
            parts.append(WirePart("tool_call", args, self.tok.count(name) + self.tok.count(args),
                                  (*loc, "tool_calls", k), tool_call_id=str(call.get("id", "")), tool_name=name))
        return WireMessage(i, role, tuple(parts), message_hash(m),
                           TOKENS_PER_MESSAGE + sum(p.tokens for p in parts))

    def openai(self, body: dict[str, Any]) -> WireRequest:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise WireError("a chat completions request needs a list of messages")
        wire = tuple(self.openai_message(i, m) for i, m in enumerate(messages))
        system = tuple(p for m in wire if m.role in ("system", "developer") for p in m.parts)
        return WireRequest("openai", str(body.get("model", "")), bool(body.get("stream")), system,
                           self.tools(body), wire, body)

    # -- Anthropic Messages ---------------------------------------------------------------------------
    def anthropic_message(self, i: int, m: dict[str, Any]) -> WireMessage:
        role = str(m.get("role", ""))
        loc: tuple[Any, ...] = ("messages", i)
        content = m.get("content")
        parts: list[WirePart] = []
        if isinstance(content, str):
            parts.append(self.text_part(content, (*loc, "content")))
        elif isinstance(content, list):
            for j, block in enumerate(content):
                where = (*loc, "content", j)
                kind = block.get("type") if isinstance(block, dict) else None
                if kind == "text":
                    parts.append(self.text_part(str(block.get("text", "")), where))
                elif kind == "tool_use":
                    args = json.dumps(block.get("input", {}), ensure_ascii=False)
                    name = str(block.get("name", ""))
                    parts.append(WirePart("tool_call", args, self.tok.count(name) + self.tok.count(args), where,
                                          tool_call_id=str(block.get("id", "")), tool_name=name))
                elif kind == "tool_result":
                    inner = block.get("content", "")
                    text = _text_of(inner)
                    image_tokens, images = self.result_images(inner)
                    parts.append(WirePart("tool_result", text, self.tok.count(text) + image_tokens, where,
                                          tool_call_id=str(block.get("tool_use_id", "")),
                                          replaceable=_only_text(inner), label=images))
                elif kind == "image":
                    source = block.get("source") if isinstance(block.get("source"), dict) else {}
                    parts.append(self.image_part(source.get("data") if source.get("type") == "base64" else None,
                                                 "", where, source.get("media_type")))
                elif kind == "document":
                    parts.append(self.media_part(block, where))
                else:
                    parts.append(self.other_part(block, where))
        else:
            raise WireError(f"message {i} has no content")
        return WireMessage(i, role, tuple(parts), message_hash(m), TOKENS_PER_MESSAGE + sum(p.tokens for p in parts))

    def anthropic(self, body: dict[str, Any]) -> WireRequest:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise WireError("a messages request needs a list of messages")
        system_value = body.get("system")
        system: list[WirePart] = []
        if isinstance(system_value, str) and system_value:
            system.append(WirePart("text", system_value, self.tok.count(system_value), ("system",)))
        elif isinstance(system_value, list):
            for j, block in enumerate(system_value):
                text = _text_of([block]) if isinstance(block, dict) else str(block)
                system.append(WirePart("text", text, self.tok.count(text), ("system", j)))
        wire = tuple(self.anthropic_message(i, m) for i, m in enumerate(messages))
        return WireRequest("anthropic", str(body.get("model", "")), bool(body.get("stream")), tuple(system),
                           self.tools(body), wire, body)

    # -- OpenAI Responses ----------------------------------------------------------------------------------
    def responses_item(self, i: int, item: dict[str, Any]) -> WireMessage:
        kind = str(item.get("type") or "message")
        loc: tuple[Any, ...] = ("input", i)
        parts: list[WirePart] = []
        if kind == "message":
            role = str(item.get("role", "user"))
            content = item.get("content")
            if isinstance(content, str):
                parts.append(self.text_part(content, (*loc, "content")))
            elif isinstance(content, list):
                for j, block in enumerate(content):
                    where = (*loc, "content", j)
                    btype = block.get("type") if isinstance(block, dict) else None
                    if btype in ("input_text", "output_text", "text"):
                        parts.append(self.text_part(str(block.get("text", "")), where))
                    elif btype == "input_image":
                        parts.append(self.openai_image(block, where))
                    elif btype in ("input_file", "input_audio"):
                        parts.append(self.media_part(block, where))
                    else:
                        parts.append(self.other_part(block, where))
        elif kind in RESPONSES_CALLS:
            role = "assistant"
            name = str(item.get("name") or kind.removesuffix("_call"))
            args = item.get("arguments", item.get("input", item.get("action", "")))
            text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            parts.append(WirePart("tool_call", text, self.tok.count(name) + self.tok.count(text), loc,
                                  tool_call_id=str(item.get("call_id") or item.get("id") or ""), tool_name=name))
        elif kind in RESPONSES_OUTPUTS:
            role = "tool"
            output = item.get("output", "")
            image_tokens, images = self.result_images(output)
            texts = [str(b.get("text", "")) for b in output if isinstance(b, dict) and b.get("type") in (
                "text", "input_text", "output_text")] if isinstance(output, list) else []
            text = output if isinstance(output, str) else "\n".join(texts) if texts else (
                "" if images else json.dumps(output, ensure_ascii=False))
            parts.append(WirePart("tool_result", text, self.tok.count(text) + image_tokens, (*loc, "output"),
                                  tool_call_id=str(item.get("call_id") or item.get("id") or ""),
                                  tool_name=str(item.get("name") or ""), replaceable=isinstance(output, str),
                                  label=images))
        elif kind == "reasoning":
            role = "assistant"
            summary = "\n".join(str(s.get("text", "")) for s in item.get("summary") or () if isinstance(s, dict))
            shown = summary or f"[reasoning, {len(json.dumps(item, ensure_ascii=False)):,} bytes of JSON]"
            parts.append(WirePart("other", shown, self.tok.count(shown), loc, label="reasoning"))
        else:
            role = str(item.get("role") or "assistant")
            parts.append(self.other_part(item, loc))
        return WireMessage(i, role, tuple(parts), message_hash(item), TOKENS_PER_MESSAGE + sum(p.tokens for p in parts))

    def responses(self, body: dict[str, Any]) -> WireRequest:
        value = body.get("input")
        system: list[WirePart] = []
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            system.append(WirePart("text", instructions, self.tok.count(instructions), ("instructions",)))
        if isinstance(value, str):
            part = self.text_part(value, ("input",))
            wire: tuple[WireMessage, ...] = (WireMessage(0, "user", (part,), message_hash(
                {"role": "user", "content": value}), TOKENS_PER_MESSAGE + part.tokens),)
        elif isinstance(value, list) and all(isinstance(item, dict) for item in value):
            wire = tuple(self.responses_item(i, item) for i, item in enumerate(value))
        elif value is None:
            wire = ()
        else:
            raise WireError("a responses request's input is a string or a list of items")
        system.extend(p for m in wire if m.role in ("system", "developer") for p in m.parts)
        previous = body.get("previous_response_id")
        return WireRequest("responses", str(body.get("model", "")), bool(body.get("stream")), tuple(system),
                           self.tools(body), wire, body, list_key="input",
                           previous_response_id=previous if isinstance(previous, str) else "")

    # -- Gemini generateContent ------------------------------------------------------------------------------
    def gemini_message(self, i: int, m: dict[str, Any], pending: dict[str, list[str]]) -> WireMessage:
        role = {"model": "assistant"}.get(str(m.get("role") or "user"), str(m.get("role") or "user"))
        loc: tuple[Any, ...] = ("contents", i)
        parts: list[WirePart] = []
        for j, part in enumerate(m.get("parts") or ()):
            where = (*loc, "parts", j)
            if not isinstance(part, dict):
                parts.append(self.other_part(part, where))
            elif isinstance(part.get("text"), str) and not part.get("thought"):
                parts.append(self.text_part(part["text"], where))
            elif isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                name = str(call.get("name", ""))
                args = json.dumps(call.get("args", {}), ensure_ascii=False)
                call_id = str(call.get("id") or f"{name}#{i}.{j}")  # Gemini pairs calls and results by name
                pending.setdefault(name, []).append(call_id)
                parts.append(WirePart("tool_call", args, self.tok.count(name) + self.tok.count(args), where,
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
                parts.append(WirePart("tool_result", text, self.tok.count(text), where, tool_call_id=call_id,
                                      tool_name=name, replaceable=isinstance(output, str)))
            elif _gemini_image(part):
                inline = part.get("inlineData") if isinstance(part.get("inlineData"), dict) else None
                media = inline or part.get("fileData") or {}
                parts.append(self.image_part(inline.get("data") if inline else None, "", where, media.get("mimeType")))
            elif isinstance(part.get("inlineData"), dict) or isinstance(part.get("fileData"), dict):
                data = part.get("inlineData") or part.get("fileData") or {}
                parts.append(self.media_part({"type": "file", "source": {"media_type": data.get("mimeType")},
                                              "title": data.get("fileUri") or data.get("displayName")}, where))
            else:
                parts.append(self.other_part(part, where))
        return WireMessage(i, role, tuple(parts), message_hash(m), TOKENS_PER_MESSAGE + sum(p.tokens for p in parts))

    def gemini(self, body: dict[str, Any], path: str) -> WireRequest:
        contents = body.get("contents")
        if not isinstance(contents, list) or not all(isinstance(m, dict) for m in contents):
            raise WireError("a generateContent request needs a list of contents")
        key = "systemInstruction" if "systemInstruction" in body else "system_instruction"
        value = body.get(key)
        system: list[WirePart] = []
        if isinstance(value, dict):
            for j, part in enumerate(value.get("parts") or ()):
                text = str(part.get("text", "")) if isinstance(part, dict) else str(part)
                system.append(WirePart("text", text, self.tok.count(text), (key, "parts", j)))
        elif isinstance(value, str) and value:
            system.append(WirePart("text", value, self.tok.count(value), (key,)))
        pending: dict[str, list[str]] = {}
        wire = tuple(self.gemini_message(i, m, pending) for i, m in enumerate(contents))
        tools: list[WireTool] = []
        for i, tool in enumerate(body.get("tools") or ()):
            if not isinstance(tool, dict):
                continue
            declarations = tool.get("functionDeclarations") or tool.get("function_declarations")
            if isinstance(declarations, list):
                field_name = "functionDeclarations" if "functionDeclarations" in tool else "function_declarations"
                for k, decl in enumerate(declarations):
                    name = str(decl.get("name") or f"tool {i + 1}.{k + 1}") if isinstance(decl, dict) else f"tool {k}"
                    tools.append(WireTool(name, self.tok.count(json.dumps(decl, ensure_ascii=False)), i,
                                          location=("tools", i, field_name, k)))
            else:
                name = next(iter(tool), f"tool {i + 1}")
                tools.append(WireTool(name, self.tok.count(json.dumps(tool, ensure_ascii=False)), i))
        return WireRequest("gemini", gemini_model(path), path.rstrip("/").endswith(GEMINI_STREAM), tuple(system),
                           tuple(tools), wire, body, list_key="contents")

    def tools(self, body: dict[str, Any]) -> tuple[WireTool, ...]:
        found = []
        for i, tool in enumerate(body.get("tools") or ()):
            if not isinstance(tool, dict):
                continue
            name = str(tool.get("name") or (tool.get("function") or {}).get("name") or tool.get("type")
                       or f"tool {i + 1}")
            found.append(WireTool(name, self.tok.count(json.dumps(tool, ensure_ascii=False)), i))
        return tuple(found)


def parse_request(provider: str, body: bytes, tokenizer: Tokenizer, path: str = "") -> WireRequest:
    """The request ``body`` of ``provider`` (``openai``, ``anthropic`` or ``responses``), read; WireError if it
    cannot be. The assistant's scaffolding (reminders, examples, environment) is told apart from the user's
    words (:mod:`service.proxy.anatomy`), and every byte of the body is given to one part, message or tool,
    or to the envelope."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"the body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise WireError("the body is not a JSON object")
    reader = _Reader(tokenizer, provider)
    if provider == "responses":
        request = reader.responses(data)
    elif provider == "gemini":
        request = reader.gemini(data, path)
    else:
        request = reader.openai(data) if provider == "openai" else reader.anthropic(data)
    in_system = {p.location for p in request.system}
    # the texts a reminder at the end of a user's message repeats the end of (aider's)
    system_texts = tuple(p.text for p in request.system) + tuple(
        p.text for m in request.messages if m.role in ("system", "developer") for p in m.parts
        if p.kind == "text" and p.location not in in_system)
    # a system message among the messages is the request's system prompt where the wire format says so (Chat
    # Completions, Responses); elsewhere (Claude Code's among Anthropic messages) it is the assistant's scaffolding
    request = replace(request, messages=_anatomy(request.messages, tokenizer, system_texts,
                                                 system_scaffold=provider not in ("openai", "responses")))
    request = replace(request, messages=tuple(replace(m, key=_recognition_key(request, m)) for m in request.messages))
    if request.provider in ("openai", "responses"):  # system parts are the system messages' parts, as marked now
        extra = tuple(p for p in request.system if p.location[0] != request.list_key)
        request = replace(request, system=extra + tuple(
            p for m in request.messages if m.role in ("system", "developer") for p in m.parts))
    return _with_bytes(request, body)


# -- the assistant's scaffolding ------------------------------------------------------------------------------
def _pieces(p: WirePart, pieces: list[tuple[int, int, str]], tok: Tokenizer) -> list[WirePart]:
    """The part ``p`` split into its ``pieces``, each with its kind."""
    if len(pieces) == 1:
        return [replace(p, scaffold=pieces[0][2])]
    return [replace(p, text=p.text[start:end], tokens=tok.count(p.text[start:end]), scaffold=kind,
                    segment=(start, end), replaceable=False, label="") for start, end, kind in pieces]


def _anatomy(messages: tuple[WireMessage, ...], tok: Tokenizer, system_texts: tuple[str, ...] = (), *,
             system_scaffold: bool = False) -> tuple[WireMessage, ...]:
    """``messages`` with reminder blocks split from the user's words and scaffolding marked by kind: a reminder
    that repeats the end of ``system_texts`` at the end of a user's text is one; with ``system_scaffold``, a
    system message among the messages is scaffolding, split into its sections."""
    out: list[WireMessage] = []
    for m in messages:
        if m.role in ("system", "developer"):
            if system_scaffold:
                split = [q for p in m.parts for q in (
                    _pieces(p, anatomy.system_segments(p.text), tok) if p.kind == "text" and p.segment is None
                    else [replace(p, scaffold=p.scaffold or anatomy.REMINDER)])]
                m = replace(m, parts=tuple(split), tokens=TOKENS_PER_MESSAGE + sum(p.tokens for p in split),
                            scaffold=split[0].scaffold if split else anatomy.REMINDER)
            out.append(m)
            continue
        parts: list[WirePart] = []
        for p in m.parts:
            if p.kind != "text" or p.segment is not None:
                parts.append(p)
                continue
            pieces = anatomy.segments(p.text, system_texts if m.role == "user" else ())
            if len(pieces) == 1:
                kind = pieces[0][2] or (anatomy.text_kind(p.text) if m.role == "user" else "")
                parts.append(replace(p, scaffold=kind) if kind else p)
                continue
            for start, end, kind in pieces:
                text = p.text[start:end]
                parts.append(replace(p, text=text, tokens=tok.count(text), scaffold=kind, segment=(start, end),
                                     replaceable=False, label=""))
        tokens = TOKENS_PER_MESSAGE + sum(p.tokens for p in parts)
        whole = ""
        if m.role == "user" and parts and all(p.kind == "text" and p.scaffold for p in parts):
            whole = parts[0].scaffold
        elif m.role == "assistant" and out and out[-1].scaffold and out[-1].role == "user" and anatomy.announced_kind(
                "".join(p.text for p in out[-1].parts)) and parts and all(p.kind == "text" for p in parts) \
                and anatomy.is_ack("".join(p.text for p in parts)):
            whole = out[-1].scaffold  # "Ok." after the fixed-wording scaffolding it acknowledges
        out.append(replace(m, parts=tuple(parts), tokens=tokens, scaffold=whole))
    talk = [(n, m) for n, m in enumerate(out) if m.role not in ("system", "developer")]
    examples = anatomy.few_shot_end([(m.role, "".join(p.text for p in m.parts if p.kind == "text")) for _n, m in talk])
    for n, _m in talk[:examples]:
        out[n] = replace(out[n], scaffold=anatomy.FEW_SHOT)
    return tuple(out)


# -- recognising a conversation ------------------------------------------------------------------------------
# keys a message's recognition ignores: Anthropic's cache breakpoints (moved to the newest message on every
# request) and Gemini's thought signatures (a resumed Gemini CLI conversation sends its calls without them)
RECOGNITION_IGNORES = frozenset({"cache_control", "thoughtSignature", "thought_signature"})


def _without_keys(value: Any, keys: frozenset[str]) -> tuple[Any, bool]:
    """``value`` without ``keys`` at any depth, and whether there were any (the same object when not)."""
    if isinstance(value, dict):
        out, found = {}, False
        for k, v in value.items():
            if k in keys:
                found = True
                continue
            out[k], inner = _without_keys(v, keys)
            found = found or inner
        return (out, True) if found else (value, False)
    if isinstance(value, list):
        pairs = [_without_keys(v, keys) for v in value]
        return ([v for v, _f in pairs], True) if any(f for _v, f in pairs) else (value, False)
    return value, False


def _is_result(block: Any) -> bool:
    return isinstance(block, dict) and (block.get("type") == "tool_result" or "functionResponse" in block)


def _recognition_key(request: WireRequest, m: WireMessage) -> str:
    """What the message is recognised by in the next request of its conversation: its hash with the assistant's
    scaffolding inside it left out (aider moves its reminder off the previous message on every request), the
    keys in RECOGNITION_IGNORES left out, and a tool result repeated whole in one message counted once (Gemini
    CLI's resume sends the function response twice). ``m.hash`` where none of that applies."""
    values = request.body.get(request.list_key)
    if m.scaffold or m.role in ("system", "developer") or not isinstance(values, list) or m.index >= len(values):
        return m.hash  # not in the conversation's history: never compared
    message, changed = _without_keys(values[m.index], RECOGNITION_IGNORES)
    kept: dict[tuple[Any, ...], list[str]] = {}
    scaffolded: set[tuple[Any, ...]] = set()
    for p in m.parts:
        rest = p.location[2:]
        kept.setdefault(rest, [])
        if p.scaffold:
            scaffolded.add(rest)
        else:
            kept[rest].append(p.text)
    if scaffolded and _editable(scaffolded):
        message, changed = copy.deepcopy(message), True
        gone = []
        for rest in scaffolded:
            node, key = _parent(message, rest)
            words = "".join(kept[rest])
            if isinstance(node[key], str):
                node[key] = words
            elif words and isinstance(node[key], dict):
                node[key] = dict(node[key], text=words)
            else:
                gone.append(rest)
        for rest in sorted(gone, key=lambda r: r[-1], reverse=True):
            node, key = _parent(message, rest)
            del node[key]
    for name in ("parts", "content"):
        blocks = message.get(name) if isinstance(message, dict) else None
        if isinstance(blocks, list) and sum(map(_is_result, blocks)) > 1:
            once: list[Any] = []
            for block in blocks:
                if not (_is_result(block) and block in once):
                    once.append(block)
            if len(once) < len(blocks):
                message, changed = dict(message, **{name: once}), True
    return message_hash(message) if changed else m.hash


def _editable(locations: set[tuple[Any, ...]]) -> bool:
    """Locations inside a message (``("content",)``, ``("content", 2)``, ``("parts", 0)``) a key can edit."""
    return all(rest and (len(rest) == 1 or isinstance(rest[-1], int)) for rest in locations)


# -- every byte of the body, accounted for ---------------------------------------------------------------------
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
SPAN_DEPTH = 4  # JSON paths down to ("messages", 3, "content", 1): the deepest place a part sits


def json_spans(text: str, depth: int = SPAN_DEPTH) -> dict[tuple[Any, ...], tuple[int, int]]:
    """The character span of every value of the JSON document ``text`` down to ``depth`` keys deep, by its
    path (``()`` is the whole document); deeper values are skipped whole by the C scanner."""
    out: dict[tuple[Any, ...], tuple[int, int]] = {}

    def value(idx: int, path: tuple[Any, ...]) -> int:
        idx = _WS.match(text, idx).end()
        start, ch = idx, text[idx]
        if ch == "{" and len(path) < depth:
            idx = _WS.match(text, idx + 1).end()
            if text[idx] == "}":
                idx += 1
            else:
                while True:
                    key, idx = scanstring(text, idx + 1)
                    idx = _WS.match(text, idx).end() + 1  # past the colon
                    idx = _WS.match(text, value(idx, (*path, key))).end()
                    if text[idx] == ",":
                        idx = _WS.match(text, idx + 1).end()
                        continue
                    idx += 1
                    break
        elif ch == "[" and len(path) < depth:
            idx = _WS.match(text, idx + 1).end()
            if text[idx] == "]":
                idx += 1
            else:
                n = 0
                while True:
                    idx = _WS.match(text, value(idx, (*path, n))).end()
                    n += 1
                    if text[idx] == ",":
                        idx += 1
                        continue
                    idx += 1
                    break
        elif ch == '"':
            idx = scanstring(text, idx + 1)[1]
        else:
            idx = _DECODER.raw_decode(text, idx)[1]
        out[path] = (start, idx)
        return idx

    value(0, ())
    return out


def _with_bytes(request: WireRequest, body: bytes) -> WireRequest:
    """``request`` with the bytes of the body each part, message and tool holds; the rest is the envelope."""
    try:
        text = body.decode("utf-8")
        spans = json_spans(text)
    except (UnicodeDecodeError, ValueError, IndexError):
        return replace(request, envelope_bytes=len(body))

    def size(path: tuple[Any, ...]) -> int:
        span = spans.get(path)
        return len(text[span[0]:span[1]].encode("utf-8")) if span is not None else 0

    def measured(parts: tuple[WirePart, ...]) -> tuple[WirePart, ...]:
        out = list(parts)
        by_location: dict[tuple[Any, ...], list[int]] = {}
        for n, p in enumerate(out):
            by_location.setdefault(p.location, []).append(n)
        for location, ns in by_location.items():
            total = size(location)
            left = total
            for k, n in enumerate(ns):
                if k == len(ns) - 1:
                    share = left
                else:  # a piece of a text: its length as JSON text, the rest to the last piece
                    share = min(left, len(json.dumps(out[n].text, ensure_ascii=False).encode("utf-8")) - 2
                                + (2 if k == 0 else 0))
                out[n] = replace(out[n], bytes=share)
                left -= share
        return tuple(out)

    messages = []
    for m in request.messages:
        parts = measured(m.parts)
        path = (request.list_key, m.index)
        inner = sum(size(loc) for loc in {p.location for p in m.parts if p.location[:2] == path})
        own = size(path) - inner if path in spans and not any(p.location == path for p in m.parts) else 0
        messages.append(replace(m, parts=parts, bytes=own))
    in_messages = {p.location for m in request.messages for p in m.parts}
    system = measured(tuple(p for p in request.system if p.location not in in_messages))
    system_all = tuple(next((q for m in messages for q in m.parts if q.location == p.location
                             and q.segment == p.segment), p) if p.location in in_messages else
                       next(q for q in system if q.location == p.location and q.segment == p.segment)
                       for p in request.system)
    tools = tuple(replace(t, bytes=size(t.location or ("tools", t.index))) for t in request.tools)
    held = (sum(p.bytes for m in messages for p in m.parts) + sum(m.bytes for m in messages)
            + sum(p.bytes for p in system) + sum(t.bytes for t in tools))
    return replace(request, messages=tuple(messages), system=system_all, tools=tools,
                   envelope_bytes=len(body) - held)


# -- the store's view of a message --------------------------------------------------------------------------
@dataclass(frozen=True)
class NeutralMessage:
    role: str  # user | assistant | tool | system
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None


def neutral_messages(message: WireMessage, tool_names: dict[str, str]) -> list[NeutralMessage]:
    """The provider-neutral messages a wire message becomes: an Anthropic user message holding tool results
    becomes one ``tool`` message per result (then a user message for any text beside them). ``tool_names``
    maps tool call ids seen so far to their tools (filled as calls are met)."""
    out: list[NeutralMessage] = []
    role = "system" if message.role == "developer" else message.role
    texts = [p.text for p in message.parts if p.kind in ("text", "file", "image", "other") and not p.scaffold]
    calls = [ToolCall(p.tool_call_id, p.tool_name, p.text) for p in message.parts if p.kind == "tool_call"]
    for call in calls:
        tool_names[call.id] = call.name
    for p in message.parts:
        if p.kind == "tool_result":
            out.append(NeutralMessage("tool", p.text, tool_call_id=p.tool_call_id or "?",
                                      tool_name=tool_names.get(p.tool_call_id) or p.tool_name or None))
    if role == "tool":
        return out
    if texts or calls or not out:
        out.append(NeutralMessage(role if role in ("system", "user", "assistant") else "user", "\n\n".join(texts),
                                  tool_calls=tuple(calls)))
    return out


# -- editing ------------------------------------------------------------------------------------------------
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


def _parent(body: Any, location: tuple[Any, ...]) -> tuple[Any, Any]:
    node = body
    for key in location[:-1]:
        node = node[key]
    return node, location[-1]


def apply_edits(request: WireRequest, edits: Edits) -> bytes:
    """The request body with ``edits`` made (the original's other keys and messages as they were)."""
    body = copy.deepcopy(request.body)
    for location, text in edits.replace.items():
        node, key = _parent(body, location)
        if request.provider == "anthropic" and location[-1] != "content":  # a tool_result block: its content
            node[key] = dict(node[key], content=text)
        elif request.provider == "gemini":  # a functionResponse part: its one output
            result = node[key]["functionResponse"]
            node[key] = dict(node[key], functionResponse=dict(result, response={"output": text}))
        else:
            node[key] = text
    remove = set(edits.remove)
    for location, spans in edits.cut.items():  # pieces of a text taken out; a text left empty goes whole
        node, key = _parent(body, location)
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
        node, key = _parent(body, loc)
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
        node, key = _parent(body, loc)
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


def tool_calls_by_id(messages: Iterable[WireMessage]) -> dict[str, WirePart]:
    return {p.tool_call_id: p for m in messages for p in m.parts if p.kind == "tool_call" and p.tool_call_id}


# -- the prompt cache's view of a request ----------------------------------------------------------------------
def cache_blocks(request: WireRequest) -> tuple[tuple[str, int], ...]:
    """The request in the blocks a provider's prefix cache sees, in its order: each tool definition, each
    system block, each message (system messages among them), as (hash, tokens)."""
    def digest(value: Any) -> str:
        return message_hash(value)

    out: list[tuple[str, int]] = []
    for tool in request.tools:
        node: Any = request.body
        for key in tool.location or ("tools", tool.index):
            node = node[key]
        out.append((digest(node), tool.tokens))
    in_messages = {p.location for m in request.messages for p in m.parts}
    for part in request.system:
        if part.location not in in_messages:
            out.append((digest(["system", part.text]), part.tokens))
    out.extend((m.hash, m.tokens) for m in request.messages)
    return tuple(out)


def fixed_tokens(request: WireRequest) -> int:
    """The request's tokens counted by the provider's own rule rather than the tokenizer: its images (the items of
    kind ``image``; one inside a tool's result is counted with the tool). Calibration leaves them as they are."""
    return sum(p.tokens for m in request.messages for p in m.parts if p.kind == "image")


def shared_prefix(before: tuple[tuple[str, int], ...] | None, after: tuple[tuple[str, int], ...]) -> tuple[int, int]:
    """How many of ``after``'s blocks, and tokens, repeat ``before``'s first ones unchanged."""
    blocks = tokens = 0
    for old, new in zip(before or (), after):
        if old[0] != new[0]:
            break
        blocks += 1
        tokens += new[1]
    return blocks, tokens
