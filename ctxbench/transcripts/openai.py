"""OpenAI chat messages as JSONL (one message object a line) → a :class:`Transcript`.

Each line holds ``role`` and ``content`` and, as the role needs, ``tool_calls`` (assistant),
``tool_call_id`` and optionally ``name`` (tool). Two optional extra keys are understood:
``parsing_strategy`` (the provider format that made the line; default ``openai``) and
``flags`` (importance flags such as ``instruction``). Two more are kept with the message: ``id`` (its id in
the source, a string or a number, carried by the plan items that include it) and ``created_at`` (when it was
written, ISO 8601). Other keys are ignored.

Turns (groups): a user message starts a new group; a system message is a group of its own;
assistant and tool messages join the open group. Blank lines are skipped.

Tool calls are answered as providers demand it: the tool messages answering every call of an
assistant message come directly after it, before any other user, assistant or system message and
before the end of the file. A call left unanswered, or a tool message that answers no call of the
assistant message just before it, is an error naming its line.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from ctxbench.records.messages import ToolCall
from ctxbench.records.vocab import ROLES
from ctxbench.records.transcripts import Transcript, TranscriptError, TranscriptMessage, json_objects, read_lines

FORMAT = "openai"
DEFAULT_STRATEGY = "openai"


def _text_content(value: Any, role: str, line: int) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        if role == "assistant":
            return ""
        raise TranscriptError(line, f"{role} message has no content (expected a string)")
    if isinstance(value, list):
        parts: list[str] = []
        for i, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise TranscriptError(line, f"content part {i} is not a text part ({{'type': 'text', 'text': ...}})")
            parts.append(part["text"])
        return "\n".join(parts)
    raise TranscriptError(line, f"content must be a string, null or a list of text parts, got {type(value).__name__}")


def _tool_calls(value: Any, role: str, line: int) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    if role != "assistant":
        raise TranscriptError(line, f"only assistant messages carry tool_calls, not {role}")
    if not isinstance(value, list):
        raise TranscriptError(line, f"tool_calls must be a list, got {type(value).__name__}")
    calls: list[ToolCall] = []
    for i, call in enumerate(value):
        where = f"tool_calls[{i}]"
        if not isinstance(call, dict):
            raise TranscriptError(line, f"{where} must be an object, got {type(call).__name__}")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise TranscriptError(line, f"{where}.id must be a non-empty string")
        if call.get("type", "function") != "function":
            raise TranscriptError(line, f"{where}.type must be 'function', got {call.get('type')!r}")
        function = call.get("function")
        if not isinstance(function, dict):
            raise TranscriptError(line, f"{where}.function must be an object")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise TranscriptError(line, f"{where}.function.name must be a non-empty string")
        arguments = function.get("arguments", "")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
        elif not isinstance(arguments, str):
            raise TranscriptError(line, f"{where}.function.arguments must be a JSON string or an object")
        calls.append(ToolCall(call_id, name, arguments))
    return tuple(calls)


def _optional_str(obj: dict[str, Any], key: str, line: int) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TranscriptError(line, f"{key} must be a string, got {type(value).__name__}")
    return value


def _external_id(value: Any, line: int) -> str:
    """A message's own id in the source: a string, or a number written as one; absent is empty."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TranscriptError(line, f"id must be a string or a number, got {type(value).__name__}")
    return str(value)


def _check_answered(pending: dict[str, int], where: str) -> None:
    """Raise naming the assistant message's line when one of its tool calls has no tool message yet."""
    if pending:
        call_id, line = next(iter(pending.items()))
        others = f" (and {len(pending) - 1} more)" if len(pending) > 1 else ""
        raise TranscriptError(line, f"tool call {call_id!r}{others} is not answered by a tool message {where}")


def parse_lines(lines: Iterable[str | bytes], source: str = "<input>") -> Transcript:
    """Parse and validate every line; raises :class:`TranscriptError` at the first problem."""
    out: list[TranscriptMessage] = []
    tool_names: dict[str, str] = {}  # tool call id -> function name, from earlier assistant messages
    answered_on: dict[str, int] = {}  # tool call id -> line of the tool message that answered it
    pending: dict[str, int] = {}  # calls of the last assistant message not answered yet -> its line
    group = -1
    group_is_system = False
    for number, obj in json_objects(lines, "message"):
        role = obj.get("role")
        if not isinstance(role, str):
            raise TranscriptError(number, "missing role" if role is None else f"role must be a string, got {type(role).__name__}")
        if role not in ROLES:
            raise TranscriptError(number, f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
        content = _text_content(obj.get("content"), role, number)
        calls = _tool_calls(obj.get("tool_calls"), role, number)
        strategy = _optional_str(obj, "parsing_strategy", number) or DEFAULT_STRATEGY
        flags_value = obj.get("flags", [])
        if not isinstance(flags_value, list) or not all(isinstance(f, str) for f in flags_value):
            raise TranscriptError(number, "flags must be a list of strings")
        name = _optional_str(obj, "name", number)
        external_id = _external_id(obj.get("id"), number)
        created_at = _optional_str(obj, "created_at", number) or ""
        tool_call_id = None
        tool_name = None
        if role == "tool":
            tool_call_id = _optional_str(obj, "tool_call_id", number)
            if not tool_call_id:
                raise TranscriptError(number, "tool message has no tool_call_id")
            if tool_call_id not in tool_names:
                raise TranscriptError(
                    number, f"tool message answers tool_call_id {tool_call_id!r}, which no earlier assistant message called"
                )
            if tool_call_id not in pending:
                where = (f"it was already answered on line {answered_on[tool_call_id]}" if tool_call_id in answered_on
                         else "a tool message must follow the assistant message that made the call")
                raise TranscriptError(
                    number, f"tool message answers tool_call_id {tool_call_id!r}, which is not a call of the "
                            f"assistant message before it ({where})"
                )
            del pending[tool_call_id]
            answered_on[tool_call_id] = number
            tool_name = name or tool_names[tool_call_id]
        else:
            if obj.get("tool_call_id") is not None:
                raise TranscriptError(number, f"only tool messages carry a tool_call_id, not {role}")
            _check_answered(pending, f"before this {role} message (line {number})")
        for call in calls:  # some servers reuse ids (call_0, ...) turn after turn: the latest call owns it
            tool_names[call.id] = call.name
            answered_on.pop(call.id, None)
            pending[call.id] = number

        if role in ("user", "system") or group < 0 or group_is_system:
            group += 1
        group_is_system = role == "system"
        out.append(
            TranscriptMessage(
                line=number,
                group=group,
                role=role,
                content=content,
                tool_calls=calls,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                parsing_strategy=strategy,
                flags=tuple(flags_value),
                external_id=external_id,
                created_at=created_at,
            )
        )
    if not out:
        raise TranscriptError(0, f"{source}: no messages (empty transcript)")
    _check_answered(pending, "before the end of the file")
    return Transcript(source=source, format=FORMAT, messages=tuple(out))


def parse_file(path: Path | str) -> Transcript:
    lines, name = read_lines(path)
    return parse_lines(lines, source=name)
