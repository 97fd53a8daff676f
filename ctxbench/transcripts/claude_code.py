"""A Claude Code session file (JSONL, one record a line) → a :class:`Transcript`.

Records with ``type`` ``user`` or ``assistant`` carry ``message.content``: a string, or a list
of blocks — ``text``, ``tool_use`` ``{id, name, input}``, ``tool_result`` ``{tool_use_id,
content}`` (a string or text blocks), ``thinking`` and ``image``. They become OpenAI-style
messages with the ``claude-code`` parsing strategy (the anthropic family, so the planner
isolates these tool calls from other providers):

- a user record with text is a user message and starts a Turn;
- a user record with ``tool_result`` blocks gives one tool message per block, in the open Turn;
- assistant records that share ``message.id`` and follow each other (Claude Code writes one
  record per content block) merge into one assistant message: text joined, ``tool_use``
  blocks as tool calls (``input`` as JSON arguments); ``thinking`` is not part of the history.

Other record types (``summary``, ``system``, file snapshots ...), sidechain records (sub-agent
conversations) and meta records (``isMeta``, injected by the tool, not typed by the user) are
skipped. Malformed input raises :class:`TranscriptError` with the line number.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ctxbench.records.messages import ToolCall
from ctxbench.records.transcripts import Transcript, TranscriptError, TranscriptMessage, json_objects, read_lines

FORMAT = "claude-code"
STRATEGY = "claude-code"
MESSAGE_TYPES = ("user", "assistant")
IMAGE_PLACEHOLDER = "[image]"


@dataclass
class _Assistant:
    line: int
    message_id: str | None
    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)


def _block_text(value: Any, line: int, where: str) -> str:
    """Text of a tool_result's content: a string or a list of text/image blocks."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list[str] = []
        for i, block in enumerate(value):
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and block.get("type") == "image":
                parts.append(IMAGE_PLACEHOLDER)
            else:
                raise TranscriptError(line, f"{where}[{i}] is not a text or image block")
        return "\n".join(parts)
    raise TranscriptError(line, f"{where} must be a string or a list of blocks, got {type(value).__name__}")


def _blocks(content: Any, line: int) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise TranscriptError(line, f"message.content must be a string or a list of blocks, got {type(content).__name__}")
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise TranscriptError(line, f"message.content[{i}] must be an object with a type")
    return content


def parse_lines(lines: Iterable[str | bytes], source: str = "<input>") -> Transcript:
    """Parse and validate every record; raises :class:`TranscriptError` at the first problem."""
    out: list[TranscriptMessage] = []
    tool_names: dict[str, str] = {}
    answered_on: dict[str, int] = {}  # tool_use id -> line of the tool_result that answered it
    group = -1
    pending: _Assistant | None = None

    def flush() -> None:
        nonlocal pending, group
        if pending is None:
            return
        if group < 0:
            group = 0
        text = "\n\n".join(t for t in pending.text if t)
        if text or pending.calls:
            out.append(TranscriptMessage(line=pending.line, group=group, role="assistant", content=text,
                                         tool_calls=tuple(pending.calls), parsing_strategy=STRATEGY))
        pending = None

    for number, record in json_objects(lines, "record"):
        kind = record.get("type")
        if not isinstance(kind, str):
            raise TranscriptError(number, "record has no type")
        if kind not in MESSAGE_TYPES or record.get("isSidechain") or record.get("isMeta"):
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            raise TranscriptError(number, f"{kind} record has no message object")
        blocks = _blocks(message.get("content"), number)

        if kind == "assistant":
            message_id = message.get("id") if isinstance(message.get("id"), str) else None
            if pending is None or message_id is None or pending.message_id != message_id:
                flush()
                pending = _Assistant(line=number, message_id=message_id)
            for i, block in enumerate(blocks):
                btype = block["type"]
                if btype == "text":
                    if not isinstance(block.get("text"), str):
                        raise TranscriptError(number, f"message.content[{i}].text must be a string")
                    pending.text.append(block["text"])
                elif btype == "tool_use":
                    call_id, name = block.get("id"), block.get("name")
                    if not isinstance(call_id, str) or not call_id:
                        raise TranscriptError(number, f"message.content[{i}] tool_use has no id")
                    if not isinstance(name, str) or not name:
                        raise TranscriptError(number, f"message.content[{i}] tool_use has no name")
                    arguments = json.dumps(block.get("input", {}), sort_keys=True, ensure_ascii=False)
                    pending.calls.append(ToolCall(call_id, name, arguments))
                    tool_names[call_id] = name
                    answered_on.pop(call_id, None)
                # thinking, redacted_thinking and others are not part of the replayable history
            continue

        # a user record: tool results, or the user's own words
        flush()
        results = [b for b in blocks if b["type"] == "tool_result"]
        texts: list[str] = []
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                if not isinstance(block.get("text"), str):
                    raise TranscriptError(number, f"message.content[{i}].text must be a string")
                texts.append(block["text"])
            elif block["type"] == "image":
                texts.append(IMAGE_PLACEHOLDER)
        if results:
            if group < 0:
                group = 0
            for i, block in enumerate(results):
                use_id = block.get("tool_use_id")
                if not isinstance(use_id, str) or not use_id:
                    raise TranscriptError(number, f"tool_result {i} has no tool_use_id")
                if use_id not in tool_names:  # as the OpenAI importer: a result must answer a call
                    raise TranscriptError(number, f"tool_result {i} answers tool_use_id {use_id!r}, which no "
                                                  "earlier assistant message called")
                if use_id in answered_on:
                    raise TranscriptError(number, f"tool_result {i} answers tool_use_id {use_id!r}, which was "
                                                  f"already answered on line {answered_on[use_id]}")
                answered_on[use_id] = number
                body = _block_text(block.get("content"), number, f"tool_result {i} content")
                if block.get("is_error"):
                    body = "[error] " + body
                if i == len(results) - 1 and texts:
                    body = body + "\n\n" + "\n".join(texts)
                out.append(TranscriptMessage(line=number, group=group, role="tool", content=body,
                                             tool_call_id=use_id, tool_name=tool_names.get(use_id),
                                             parsing_strategy=STRATEGY))
            continue
        text = "\n".join(texts)
        if not text.strip():
            continue
        group += 1
        uuid, stamp = record.get("uuid"), record.get("timestamp")
        out.append(TranscriptMessage(line=number, group=group, role="user", content=text, parsing_strategy=STRATEGY,
                                     external_id=uuid if isinstance(uuid, str) else "",
                                     created_at=stamp if isinstance(stamp, str) else ""))
    flush()
    if not out:
        raise TranscriptError(0, f"{source}: no user or assistant messages (is this a Claude Code session file?)")
    return Transcript(source=source, format=FORMAT, messages=tuple(out))


def parse_file(path: Path | str) -> Transcript:
    lines, name = read_lines(path)
    return parse_lines(lines, source=name)
