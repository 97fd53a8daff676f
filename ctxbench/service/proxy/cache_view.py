"""The prompt cache's view of a request: its blocks in the order a provider's prefix cache sees them, the prefix
two requests share, and the tokens counted by the provider's own rule."""
from __future__ import annotations

from typing import Any

from ctxbench.records.proxy import WireRequest
from ctxbench.service.proxy.wire_parts import message_hash


def cache_blocks(request: WireRequest) -> tuple[tuple[str, int], ...]:
    """The request in the blocks a provider's prefix cache sees, in its order: each tool definition, each
    system block, each message (system messages among them), as (hash, tokens)."""
    out: list[tuple[str, int]] = []
    for tool in request.tools:
        node: Any = request.body
        for key in tool.location or ("tools", tool.index):
            node = node[key]
        out.append((message_hash(node), tool.tokens))
    in_messages = {p.location for m in request.messages for p in m.parts}
    for part in request.system:
        if part.location not in in_messages:
            out.append((message_hash(["system", part.text]), part.tokens))
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
