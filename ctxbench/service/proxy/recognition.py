"""What a message of a proxied conversation is recognised by in the next request of that conversation."""
from __future__ import annotations

import copy
from typing import Any

from ctxbench.records.proxy import WireMessage, WireRequest
from ctxbench.service.proxy.edits import parent
from ctxbench.service.proxy.wire_parts import message_hash

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


def recognition_key(request: WireRequest, m: WireMessage) -> str:
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
            node, key = parent(message, rest)
            words = "".join(kept[rest])
            if isinstance(node[key], str):
                node[key] = words
            elif words and isinstance(node[key], dict):
                node[key] = dict(node[key], text=words)
            else:
                gone.append(rest)
        for rest in sorted(gone, key=lambda r: r[-1], reverse=True):
            node, key = parent(message, rest)
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
