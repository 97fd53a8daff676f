"""The prompt cache's view of a request: its blocks in the order a provider's prefix cache sees them, the prefix
two requests share, and the tokens counted by the provider's own rule."""
from __future__ import annotations

from typing import Any

from ctxbench.records.proxy import WirePart, WireRequest, WireTool
from ctxbench.service.proxy.wire_parts import message_hash


def node_at(body: Any, location: tuple[Any, ...]) -> Any:
    """The value of ``body`` at ``location`` (keys and indexes, in turn)."""
    for key in location:
        body = body[key]
    return body


def tool_node(request: WireRequest, tool: WireTool) -> Any:
    """The tool definition ``tool`` as the request's body holds it."""
    return node_at(request.body, tool.location or ("tools", tool.index))


def system_blocks(request: WireRequest) -> tuple[WirePart, ...]:
    """The request's system blocks that are blocks of their own (not parts of a system message, which is a
    message block), in order: with the tool definitions before them and the messages after, the cache's order."""
    in_messages = {p.location for m in request.messages for p in m.parts}
    return tuple(p for p in request.system if p.location not in in_messages)


def cache_blocks(request: WireRequest) -> tuple[tuple[str, int], ...]:
    """The request in the blocks a provider's prefix cache sees, in its order: each tool definition, each
    system block, each message (system messages among them), as (hash, tokens)."""
    out = [(message_hash(tool_node(request, tool)), tool.tokens) for tool in request.tools]
    out.extend((message_hash(["system", part.text]), part.tokens) for part in system_blocks(request))
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
