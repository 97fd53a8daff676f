"""What every transcript parser returns: provider-neutral messages with their Turn index,
or a :class:`TranscriptError` naming the line and what is wrong. Parsers never touch the store."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from ctxbench.records.messages import ToolCall


class TranscriptError(ValueError):
    """Malformed transcript input; ``line`` is 1-based (0 when the problem is the whole file)."""

    def __init__(self, line: int, problem: str) -> None:
        self.line = line
        self.problem = problem
        super().__init__(f"line {line}: {problem}" if line > 0 else problem)


@dataclass(frozen=True)
class TranscriptMessage:
    line: int  # 1-based source line
    group: int  # 0-based Turn index within the transcript
    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    parsing_strategy: str = "openai"
    flags: tuple[str, ...] = ()
    external_id: str = ""  # the message's own id in the source, kept through the import
    created_at: str = ""  # when the source says the message was written (ISO 8601), else ""


@dataclass(frozen=True)
class Transcript:
    source: str  # file name or a description of the input
    format: str
    messages: tuple[TranscriptMessage, ...]

    @property
    def group_count(self) -> int:
        return len({m.group for m in self.messages})


def read_lines(path: Path | str) -> tuple[list[bytes], str]:
    """A transcript file's lines as bytes (so a bad byte is reported with its line) and its name."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(0, f"cannot read {path}: {exc.strerror or exc}") from None
    return data.splitlines(), path.name


def decode_line(number: int, raw: str | bytes) -> str:
    """One input line as text: UTF-8 checked, a leading byte-order mark dropped."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TranscriptError(number, f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    return raw.lstrip("\ufeff") if number == 1 else raw


# a \uD800-\uDFFF escape: a surrogate, valid only as the half of a pair (the raw bytes are checked UTF-8 already)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")


def _check_text(number: int, obj: Any) -> None:
    """A lone surrogate escape (``"\\ud800"``) decodes to text that can be neither stored nor sent."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end]
        raise TranscriptError(number, f"a lone surrogate escape (\\u{ord(bad[0]):04x}) is not text; "
                                      "was the file cut inside an emoji?") from None


def json_objects(lines: Iterable[str | bytes], what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank JSONL line; bad JSON or a non-object names its line."""
    for number, raw in enumerate(lines, start=1):
        text = decode_line(number, raw)
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TranscriptError(number, f"bad JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:
            raise TranscriptError(number, "JSON nested too deeply to be a message") from None
        if "\\u" in text and _SURROGATE_ESCAPE.search(text):
            _check_text(number, obj)
        if not isinstance(obj, dict):
            raise TranscriptError(number, f"expected a JSON object (one {what}), got {type(obj).__name__}")
        yield number, obj
