"""What every transcript parser returns: provider-neutral messages with their Turn index,
or a :class:`TranscriptError` naming the line and what is wrong. Parsers never touch the store."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.messages import ToolCall


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


@dataclass(frozen=True)
class Transcript:
    source: str  # file name or a description of the input
    format: str
    messages: tuple[TranscriptMessage, ...]

    @property
    def group_count(self) -> int:
        return len({m.group for m in self.messages})
