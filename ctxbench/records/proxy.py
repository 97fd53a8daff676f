"""Records of the inspecting proxy: a request as the plan sees it, a proxied conversation, one exchange
(request, what went upstream, reply, usage, fault) and the difference between two successive plans.

A request is read into :class:`WireRequest`: its system blocks, its tool definitions and its messages,
each message split into :class:`WirePart` units (a text, a tool call, a tool result, an attached file)
that the plan shows one by one and that steering may drop or cut. ``location`` says where a part sits in
the request's JSON, so an edit touches that spot and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# OpenAI Chat Completions, Anthropic Messages, OpenAI Responses, Gemini generateContent / streamGenerateContent
PROVIDERS = ("openai", "anthropic", "responses", "gemini")

# how an exchange ended
OUTCOMES = ("pending", "ok", "upstream_error", "upstream_down", "cut", "client_gone")

PART_KINDS = ("text", "tool_call", "tool_result", "file", "image", "other")


@dataclass(frozen=True)
class WirePart:
    kind: str  # one of PART_KINDS
    text: str  # text, a tool call's JSON arguments, a tool result's text, a file's text or a description
    tokens: int
    location: tuple[Any, ...]  # path into the request JSON: ("messages", 3, "content", 1) …
    tool_call_id: str = ""
    tool_name: str = ""
    label: str = ""  # a file's path, a tool's name, an image's size and the rule it is counted by
    replaceable: bool = True  # a tool result whose content is text only (steering may cut it)
    scaffold: str = ""  # text the assistant wrote, not the user: its kind (a reminder, a memory file …)
    segment: tuple[int, int] | None = None  # a piece of the text at ``location``: its characters [start, end)
    bytes: int = 0  # bytes of the request body this part holds


@dataclass(frozen=True)
class WireMessage:
    index: int  # position in the request's ``messages``
    role: str  # system | user | assistant | tool (as the request says it)
    parts: tuple[WirePart, ...]
    hash: str  # of the message's canonical JSON: how a conversation is recognised by its prefix
    tokens: int  # the whole message, overhead included
    scaffold: str = ""  # the whole message is the assistant's scaffolding (examples, a repo map …): its kind
    bytes: int = 0  # bytes of the request body the message holds beyond its parts (its keys, its braces)
    # what the next request of its conversation recognises it by: ``hash`` with the assistant's scaffolding inside
    # it and a client's incidental changes left out (service.proxy.recognition); empty: ``hash``
    key: str = ""

    @property
    def identity(self) -> str:
        return self.key or self.hash

    @property
    def has_user_text(self) -> bool:
        return self.role == "user" and any(p.kind in ("text", "file", "image") and not p.scaffold for p in self.parts)

    @property
    def answers_tools(self) -> bool:
        return any(p.kind == "tool_result" for p in self.parts) or self.role == "tool"


@dataclass(frozen=True)
class WireTool:
    name: str
    tokens: int
    index: int  # position in the request's ``tools``
    bytes: int = 0  # bytes of the request body the definition holds
    location: tuple[Any, ...] = ()  # where it sits in the body when not ("tools", index) (Gemini's declarations)


@dataclass(frozen=True)
class WireRequest:
    provider: str  # one of PROVIDERS
    model: str
    stream: bool
    system: tuple[WirePart, ...]  # OpenAI: the system/developer messages' texts; Anthropic: ``system``
    tools: tuple[WireTool, ...]
    messages: tuple[WireMessage, ...]  # OpenAI system/developer messages are in ``system`` and here too
    body: dict[str, Any] = field(compare=False, hash=False, repr=False)  # the parsed JSON, never changed
    list_key: str = "messages"  # the body's key of the message list (``input`` for the Responses API)
    previous_response_id: str = ""  # Responses API: the reply this request continues (the upstream keeps the rest)
    envelope_bytes: int = 0  # bytes of the body outside every part, message and tool (model, options, syntax)

    @property
    def history(self) -> tuple[WireMessage, ...]:
        """The conversation proper: every message but the OpenAI system/developer ones and the assistant's
        scaffolding (few-shot examples, a repository map, an environment message)."""
        return tuple(m for m in self.messages if m.role not in ("system", "developer") and not m.scaffold)

    @property
    def scaffolding(self) -> tuple[WireMessage, ...]:
        """The messages that are the assistant's scaffolding, not the conversation."""
        return tuple(m for m in self.messages if m.role not in ("system", "developer") and m.scaffold)


@dataclass(frozen=True)
class ConversationState:
    """What the store keeps of a proxied conversation to recognise its next request."""

    session_id: str
    provider: str
    hashes: tuple[str, ...]  # the latest request's history, message by message
    message_ids: tuple[tuple[int, ...], ...]  # the stored messages of each of those
    groups: tuple[int, ...]  # the group (Turn) of each of those
    last_reply: str
    passthrough: bool  # the user switched steering off for this conversation
    requests: int
    updated_at: str


@dataclass(frozen=True)
class ProxyExchange:
    """One request through the proxy, as stored."""

    id: int
    session_id: str
    plan_id: str
    provider: str
    path: str
    model: str
    stream: bool
    steered: bool  # the upstream got an edited request (both are stored)
    changes: tuple[str, ...]  # what steering changed, one line each with its reason
    status: int | None  # HTTP status the client got (None while the reply streams)
    outcome: str  # one of OUTCOMES
    error: str
    reply: str
    reply_cut: bool  # the stored reply is cut to proxy.record_reply_chars
    reported_prompt: int | None
    reported_completion: int | None
    estimated: int
    created_at: str
    finished_at: str


@dataclass(frozen=True)
class ReplyRecord:
    """What the recorder read from an upstream reply (bounded: text cut, events skipped past limits)."""

    text: str = ""
    cut: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str = ""
    stop_reason: str = ""
    complete: bool = False  # the reply's end was seen (``[DONE]``, ``message_stop``, a whole JSON body)
    response_id: str = ""  # the reply's id (Responses API: what a chained request names as previous_response_id)
    cached_tokens: int | None = None  # prompt tokens the provider read from its cache (part of prompt_tokens)
    cache_write_tokens: int | None = None  # prompt tokens written to the provider's cache (part of prompt_tokens;
    # Anthropic's cache_creation_input_tokens, the 1-hour ones included)
    cache_write_1h_tokens: int | None = None  # of those, written to the 1-hour cache


@dataclass(frozen=True)
class DiffEntry:
    item_id: str
    label: str
    section: str
    before: int  # tokens in the previous plan (0: not there)
    after: int  # tokens now (0: gone)


@dataclass(frozen=True)
class PlanDiff:
    """How a proxied request's plan differs from the previous request's: items that entered the
    context, left it, or changed size."""

    entered: tuple[DiffEntry, ...] = ()
    left: tuple[DiffEntry, ...] = ()
    changed: tuple[DiffEntry, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.entered or self.left or self.changed)

    def summary(self) -> str:
        if self.empty:
            return "no change from the previous request"
        parts = []
        if self.entered:
            parts.append(f"+{len(self.entered)} entered ({sum(e.after for e in self.entered):,} tok)")
        if self.left:
            parts.append(f"-{len(self.left)} left ({sum(e.before for e in self.left):,} tok)")
        if self.changed:
            parts.append(f"~{len(self.changed)} changed ({sum(e.after - e.before for e in self.changed):+,} tok)")
        return " · ".join(parts)


@dataclass(frozen=True)
class WatchUpdate:
    """What ``open --watch`` gets when a new proxied request (or its reply) has arrived."""

    exchange: ProxyExchange
    diff: PlanDiff


@dataclass(frozen=True)
class CacheReport:
    """What a proxied request could read from the provider's prompt cache: the blocks (tool definitions,
    system blocks, messages, in the order providers cache them) and tokens of the request as it went upstream
    that repeat the conversation's previous answered request unchanged from the start (the estimate), beside
    the cached tokens the provider reported for it."""

    exchange_id: int
    prefix_blocks: int  # blocks equal to the previous request's first ones
    prefix_tokens: int  # their tokens: what a prefix cache could serve (0 for a conversation's first request)
    request_tokens: int  # the tokens of every block of the request
    first_request: bool  # no previous request to share a prefix with
    reported_cached: int | None = None  # cache_read_input_tokens / cached_tokens / cachedContentTokenCount
    reported_prompt: int | None = None  # the prompt tokens the provider reported, cached ones included

    def summary(self) -> str:
        if self.first_request:
            estimate = "first request: nothing cached yet"
        else:
            estimate = (f"unchanged prefix {self.prefix_tokens:,} of {self.request_tokens:,} tok "
                        f"({self.prefix_blocks} block{'s' if self.prefix_blocks != 1 else ''}) est. cached")
        reported = (f" · reported cached {self.reported_cached:,}"
                    + (f" of {self.reported_prompt:,}" if self.reported_prompt is not None else "")
                    if self.reported_cached is not None else " · no cache figure reported")
        return f"cache: {estimate}{reported}"
