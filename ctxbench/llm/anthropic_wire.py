"""A plan's payload as an Anthropic Messages request, and where its prompt-cache breakpoints go. Pure: no I/O.

**Rendering.** A plan renders OpenAI-style messages (``plan.messages()``); Anthropic wants ``system`` blocks, then
``messages`` of ``user`` and ``assistant`` turns made of content blocks, and tool definitions with an
``input_schema``. The mapping keeps every message's text as it is, byte for byte, in the same order:

- the system messages the payload opens with become the ``system`` text blocks, one each;
- a system message after the first turn (in the cache order: the state block, memos, symbol cards) becomes a text
  block of a ``user`` turn where it stands (Anthropic has no system role inside the conversation);
- a user message is a text block; an assistant message is its text block (when it has text) and a ``tool_use``
  block per tool call (``input``: the call's arguments parsed; arguments that are not a JSON object travel as
  ``{"arguments": "<the text>"}``); a tool message is a ``tool_result`` block of a ``user`` turn;
- consecutive blocks of one role are one turn (a tool result and the next user message share a ``user`` turn);
- an empty text (an assistant message that only calls tools) renders no block;
- tool call ids keep letters, digits, ``_`` and ``-`` (the characters Anthropic accepts), others become ``_``, the
  same way in a ``tool_use`` and in the ``tool_result`` that answers it.

**Breakpoints** (:func:`place_breakpoints`). Anthropic caches the prompt up to a block marked
``cache_control: {"type": "ephemeral"}`` (at most four a request) in the order tool definitions, system, messages;
a later request that opens with the same blocks reads them at the cache-read price. A breakpoint goes after:

1. *end of the prompt*: the last message, so the next request, which opens with this one, can read it all;
2. *shared with the previous request*: the last message this request has in common, from the start, with the
   session's previous request that got a reply (same tool definitions, same messages up to there);
3. *stable context*: the last message of the run of items the payload opens with that change only when the user
   changes them: the system prompt, the tool definitions, the history's system messages, the orientation scaffold,
   pins that are not ephemeral, summaries, and history kept for a standing reason (a standing instruction, a pinned
   turn, the turns a summary keeps verbatim);
4. *system prompt and tools*: the last message of the run of the system prompt and the history's system messages
   the payload opens with (with the tool definitions before it, which the provider caches first).

Each position is taken once (the first reason that names it; a stable context that ends where the system run
ends is the system run); when the limit is below four, the first reasons of
this list win. A breakpoint on a message marks the last block that message renders (the block before, when it
renders none).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ctxbench.planner.cache import QUERY_KINDS, STANDING, TURN_KINDS

EPHEMERAL = {"type": "ephemeral"}
ANTHROPIC_MAX_BREAKPOINTS = 4  # Anthropic refuses a request with more cache_control blocks

END, SHARED, STABLE, SYSTEM = ("end of the prompt", "shared with the previous request", "stable context",
                               "system prompt and tools")
SYSTEM_KINDS = frozenset({"system_prompt", "tool_definitions", "system_message"})
_TOOL_ID = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Breakpoint:
    """A ``cache_control`` breakpoint after message ``message`` of the payload (its index in ``plan.messages()``)."""

    message: int
    reason: str  # END | SHARED | STABLE | SYSTEM


@dataclass(frozen=True)
class PreviousRequest:
    """What the session's previous request (one that got a reply) sent: its messages and tool definitions."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()


def _stable(item: Any) -> bool:
    """An item that changes only when the user changes it (or a summary is written)."""
    if item.kind in SYSTEM_KINDS:
        return True
    if item.kind == "current_turn" or item.kind in TURN_KINDS or item.kind in QUERY_KINDS or item.pin == "ephemeral":
        return False
    if item.kind == "history_atom":
        return item.reason in STANDING
    return True  # the scaffold, pins, summaries


def _leading_run_end(items: Sequence[Any], keep: Any) -> int | None:
    """The index of the last message of the run of items (payload order) that satisfy ``keep``, from the start."""
    end, n = None, 0
    for item in items:
        if not keep(item):
            break
        n += len(item.messages)
        if item.messages:
            end = n - 1
    return end


def shared_messages(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]],
                    previous: PreviousRequest | None) -> int:
    """How many messages ``messages`` opens with that ``previous`` opened with too (0 when the tool definitions
    differ: the provider caches them first)."""
    if previous is None or tuple(previous.tools) != tuple(tools):
        return 0
    shared = 0
    for a, b in zip(previous.messages, messages):
        if a != b:
            break
        shared += 1
    return shared


def place_breakpoints(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
                      items: Sequence[Any] | None = None, previous: PreviousRequest | None = None,
                      limit: int = ANTHROPIC_MAX_BREAKPOINTS) -> tuple[Breakpoint, ...]:
    """Where the request's ``cache_control`` breakpoints go (see the module's docstring), at most ``limit`` (capped
    at four), in payload order. ``items``: the plan's included items in payload order, whose messages make up
    ``messages``; without them (or when they do not add up to ``messages``) the stable context is not placed and the
    system run is the system messages the payload opens with."""
    if not messages or limit <= 0:
        return ()
    if items is not None and sum(len(i.messages) for i in items) != len(messages):
        items = None
    if items is not None:
        system_end = _leading_run_end(items, lambda i: i.kind in SYSTEM_KINDS)
        stable_end = _leading_run_end(items, _stable)
        if stable_end == system_end:  # nothing stable beyond the system run: the breakpoint is the system run's
            stable_end = None
    else:
        leading = next((n for n, m in enumerate(messages) if m.get("role") != "system"), len(messages))
        system_end, stable_end = (leading - 1 if leading else None), None
    shared = shared_messages(messages, tools, previous)
    wanted = ((len(messages) - 1, END), (shared - 1 if shared else None, SHARED), (stable_end, STABLE),
              (system_end, SYSTEM))
    placed: dict[int, str] = {}
    for position, reason in wanted:
        if position is not None and position not in placed and len(placed) < min(limit, ANTHROPIC_MAX_BREAKPOINTS):
            placed[position] = reason
    return tuple(Breakpoint(p, placed[p]) for p in sorted(placed))


# ---- rendering ---------------------------------------------------------------------------------------------

def tool_id(call_id: str) -> str:
    """A tool call id as Anthropic accepts it (``^[A-Za-z0-9_-]+$``)."""
    return _TOOL_ID.sub("_", call_id) or "call"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: their texts, in order
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": arguments}


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    text = _text(message.get("content"))
    if role == "tool":
        return [{"type": "tool_result", "tool_use_id": tool_id(str(message.get("tool_call_id") or "")),
                 "content": text}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    if role == "assistant":
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            blocks.append({"type": "tool_use", "id": tool_id(str(call.get("id") or "")),
                           "name": function.get("name", ""), "input": _input(function.get("arguments") or "{}")})
    return blocks


def anthropic_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function schemas as Anthropic tool definitions."""
    out = []
    for tool in tools:
        function = tool.get("function", tool)
        definition: dict[str, Any] = {"name": function.get("name", "")}
        if function.get("description"):
            definition["description"] = function["description"]
        definition["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
        out.append(definition)
    return out


@dataclass(frozen=True)
class AnthropicBody:
    """The parts of a Messages request a plan decides: ``system`` blocks, ``messages`` and ``tools``."""

    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


def anthropic_body(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] = (),
                   breakpoints: Sequence[Breakpoint] = ()) -> AnthropicBody:
    """``messages`` (a plan's payload) and ``tools`` (OpenAI function schemas) as Anthropic Messages, with a
    ``cache_control`` breakpoint after each message ``breakpoints`` names."""
    marks = {b.message for b in breakpoints}
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    last: dict[str, Any] | None = None  # the last block rendered so far
    opening = True
    for n, message in enumerate(messages):
        role = message.get("role")
        if opening and role == "system":
            text = _text(message.get("content"))
            if text:
                last = {"type": "text", "text": text}
                system.append(last)
        else:
            opening = False
            blocks = _blocks(message)
            if blocks:
                wire_role = "assistant" if role == "assistant" else "user"
                if turns and turns[-1]["role"] == wire_role:
                    turns[-1]["content"].extend(blocks)
                else:
                    turns.append({"role": wire_role, "content": blocks})
                last = blocks[-1]
        if n in marks and last is not None:
            last["cache_control"] = dict(EPHEMERAL)
    return AnthropicBody(system, turns, anthropic_tools(tools))
