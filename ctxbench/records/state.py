"""The ``### STATE`` block of seed 001 (the model's Global Anchor): its format, and where it is in a reply.

A reply ends with::

    ### STATE
    Goal: ...
    Context: ...
    Resolved: ...
    Technical Anchors: ...

The block runs from its heading to the next Markdown heading of level 1-3, a closing code
fence, or the end of the reply. The last block in a reply wins: :func:`state_span` finds it,
:func:`extract_state` reads it from there.
"""
from __future__ import annotations

import re

STATE_HEADING = "### STATE"
STATE_FIELDS = ("Goal", "Context", "Resolved", "Technical Anchors")

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*STATE\s*:?\s*$")
_END = re.compile(r"^\s{0,3}(#{1,3}\s+\S|```|~~~)")

def is_state_heading(line: str) -> bool:
    """True for a ``### STATE`` heading line (any level 1-6, optional colon)."""
    return bool(_HEADING.match(line.rstrip("\r\n")))


def extract_state(text: str) -> str | None:
    """The last ``### STATE`` block in ``text`` (heading included, normalised), or None."""
    span = state_span(text)
    if span is None:
        return None
    body = text[span[0]:span[1]].splitlines()[1:]
    while not body[0].strip():
        body.pop(0)
    return STATE_HEADING + "\n" + "\n".join(line.rstrip() for line in body)


def state_span(text: str) -> tuple[int, int] | None:
    """Character offsets ``(start, end)`` of the last ``### STATE`` block in ``text`` (heading line to the
    end of its last line), or None; the same block :func:`extract_state` returns, located in place."""
    lines = text.splitlines(keepends=True)
    offsets: list[int] = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    start = None
    for i, line in enumerate(lines):
        if is_state_heading(line):
            start = i
    if start is None:
        return None
    end_line = len(lines)
    for j in range(start + 1, len(lines)):
        if _END.match(lines[j]):
            end_line = j
            break
    last = end_line - 1
    while last > start and not lines[last].strip():
        last -= 1
    if last == start:
        return None
    return offsets[start], offsets[last] + len(lines[last].rstrip("\r\n"))


def state_fields(block: str) -> dict[str, str]:
    """``Goal: x`` lines of a state block as a dict (continuation lines join the field above)."""
    fields: dict[str, str] = {}
    current = ""
    for line in block.splitlines()[1:]:
        match = re.match(r"^\s*[-*]?\s*([A-Za-z][A-Za-z ]{0,40}):\s*(.*)$", line)
        if match:
            current = match.group(1).strip()
            fields[current] = match.group(2).strip()
        elif current and line.strip():
            fields[current] = (fields[current] + "\n" + line.strip()).strip()
    return fields
