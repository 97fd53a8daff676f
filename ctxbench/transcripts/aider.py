"""aider's ``.aider.chat.history.md`` → a :class:`Transcript`.

The file is Markdown that aider appends to as it runs:

- ``# aider chat started at <time>`` opens a run (several runs may share the file);
- ``#### <text>`` lines are what the user typed (a multi-line input is several such lines);
- ``> <text>`` lines (and a bare ``>``) are aider's own output: command results, "Applied edit to
  ...", commits, warnings;
- every other line is the model's reply, Markdown as it was streamed.

Each user input starts a Turn. Reply text becomes assistant messages; each run of ``> `` lines
becomes a tool-call atom, an assistant message calling ``aider_command`` (when the user's input
was a ``/command``, with that command as its argument) or ``aider_output``, followed by the tool
message holding the output, so the planner keeps output and call together and isolates them
under the ``aider`` parsing strategy. Output before the first user input (the start-up banner) is
not part of any Turn and is skipped.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable

from ctxbench.records.messages import ToolCall
from ctxbench.records.stamps import parse_stamp
from ctxbench.records.transcripts import Transcript, TranscriptError, TranscriptMessage, decode_line, read_lines

FORMAT = "aider"
STRATEGY = "aider"
COMMAND_TOOL = "aider_command"
OUTPUT_TOOL = "aider_output"

_RUN_START = re.compile(r"^# aider chat started at\b")
_USER = re.compile(r"^#### ?(.*)$")
_OUTPUT = re.compile(r"^>(?: (.*))?$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def parse_lines(lines: Iterable[str | bytes], source: str = "<input>") -> Transcript:
    out: list[TranscriptMessage] = []
    group = -1
    mode = "banner"  # banner (outside any turn) | user | assistant | output
    buf: list[str] = []
    start = 0
    command = ""  # the current turn's /command, if its input is one
    in_fence = False  # inside a ``` block of the reply, '> ' lines are reply text

    started = ""  # when the current run started (its "# aider chat started at ..." line), ISO 8601

    def flush(next_mode: str, line: int) -> None:
        nonlocal buf, mode, start
        text = "\n".join(buf).strip("\n")
        if mode == "user":
            out.append(TranscriptMessage(line=start, group=group, role="user", content=text, parsing_strategy=STRATEGY,
                                         created_at=started))
        elif mode == "assistant" and text.strip():
            out.append(TranscriptMessage(line=start, group=group, role="assistant", content=text,
                                         parsing_strategy=STRATEGY, created_at=started))
        elif mode == "output":
            call_id = f"aider_{start}"
            name = COMMAND_TOOL if command else OUTPUT_TOOL
            arguments = json.dumps({"command": command} if command else {}, ensure_ascii=False)
            out.append(TranscriptMessage(line=start, group=group, role="assistant", content="",
                                         tool_calls=(ToolCall(call_id, name, arguments),), parsing_strategy=STRATEGY,
                                         created_at=started))
            out.append(TranscriptMessage(line=start, group=group, role="tool", content=text, tool_call_id=call_id,
                                         tool_name=name, parsing_strategy=STRATEGY, created_at=started))
        buf, mode, start = [], next_mode, line

    for number, raw in enumerate(lines, start=1):
        line = decode_line(number, raw).rstrip("\r\n")
        if _RUN_START.match(line):
            flush("banner", number)  # a new run: its start-up output belongs to no turn
            started = parse_stamp(line)
            continue
        user = _USER.match(line)
        if user:
            in_fence = False
            if mode != "user":
                flush("user", number)
                group += 1
                command = ""
            if not buf:
                first = (user.group(1) or "").strip()
                command = first if first.startswith("/") else ""
            buf.append(user.group(1) or "")
            continue
        if mode == "banner":
            continue
        if mode == "assistant" and _FENCE.match(line):
            in_fence = not in_fence
        output = None if (mode == "assistant" and in_fence) else _OUTPUT.match(line)
        if output:
            if mode != "output":
                flush("output", number)
            buf.append(output.group(1) or "")
        elif mode == "output" and not line.strip():
            buf.append("")  # blank lines inside output; trailing ones are stripped
        else:
            if mode != "assistant":
                flush("assistant", number)
                in_fence = bool(_FENCE.match(line))
            if not buf and not line.strip():
                start = number + 1  # the reply starts at its first non-blank line
                continue
            buf.append(line)
    flush("banner", 0)
    if not any(m.role == "user" for m in out):
        raise TranscriptError(0, f"{source}: no user input found (aider writes it on lines starting with '#### ')")
    return Transcript(source=source, format=FORMAT, messages=tuple(out))


def parse_file(path: Path | str) -> Transcript:
    lines, name = read_lines(path)
    return parse_lines(lines, source=name)
