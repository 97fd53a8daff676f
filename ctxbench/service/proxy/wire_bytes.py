"""Every byte of a request body accounted for: the span of each JSON value, and the bytes each part, message
and tool holds (the rest is the envelope)."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from json.decoder import scanstring
from typing import Any

from ctxbench.records.proxy import WirePart, WireRequest

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


def with_bytes(request: WireRequest, body: bytes) -> WireRequest:
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
