"""Reading the requests the proxy forwards: which wire format a path speaks (OpenAI Chat Completions
:mod:`.wire_chat`, Anthropic Messages :mod:`.wire_anthropic`, OpenAI's Responses API :mod:`.wire_responses`,
Gemini's ``generateContent`` :mod:`.wire_gemini`), and :func:`parse_request`, which reads a request body into a
:class:`~ctxbench.records.proxy.WireRequest` (system blocks, tool definitions, messages split into parts, each part
with its tokens and its place in the JSON) without changing it: the format's reader, then the assistant's
scaffolding marked (:mod:`.scaffolding`), each message's recognition key (:mod:`.recognition`) and every byte of
the body given to one part, message or tool, or to the envelope (:mod:`.wire_bytes`).

What is done with a read request lives beside it: :mod:`.edits` writes an edited body, :mod:`.neutral` turns a wire
message into the messages the store keeps, :mod:`.cache_view` is the prompt cache's view of a request.
"""
from __future__ import annotations

import json
from dataclasses import replace

from ctxbench.records.proxy import WireRequest
from ctxbench.service.proxy import wire_anthropic, wire_chat, wire_gemini, wire_responses
from ctxbench.service.proxy.recognition import recognition_key
from ctxbench.service.proxy.scaffolding import mark_scaffolding
from ctxbench.service.proxy.wire_bytes import with_bytes
from ctxbench.service.proxy.wire_parts import PartReader, WireError
from ctxbench.tokens import Tokenizer

OPENAI_PATH = "/chat/completions"
ANTHROPIC_PATH = "/messages"
RESPONSES_PATH = "/responses"
GEMINI_METHODS = (":generateContent", ":streamGenerateContent")


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
    reader = PartReader(tokenizer, provider)
    if provider == "responses":
        request = wire_responses.read_request(reader, data)
    elif provider == "gemini":
        request = wire_gemini.read_request(reader, data, path)
    else:
        request = (wire_chat if provider == "openai" else wire_anthropic).read_request(reader, data)
    in_system = {p.location for p in request.system}
    # the texts a reminder at the end of a user's message repeats the end of (aider's)
    system_texts = tuple(p.text for p in request.system) + tuple(
        p.text for m in request.messages if m.role in ("system", "developer") for p in m.parts
        if p.kind == "text" and p.location not in in_system)
    # a system message among the messages is the request's system prompt where the wire format says so (Chat
    # Completions, Responses); elsewhere (Claude Code's among Anthropic messages) it is the assistant's scaffolding
    request = replace(request, messages=mark_scaffolding(request.messages, tokenizer, system_texts,
                                                         system_scaffold=provider not in ("openai", "responses")))
    request = replace(request, messages=tuple(replace(m, key=recognition_key(request, m)) for m in request.messages))
    if request.provider in ("openai", "responses"):  # system parts are the system messages' parts, as marked now
        extra = tuple(p for p in request.system if p.location[0] != request.list_key)
        request = replace(request, system=extra + tuple(
            p for m in request.messages if m.role in ("system", "developer") for p in m.parts))
    return with_bytes(request, body)
