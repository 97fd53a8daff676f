"""Messages as the planner sees them: frozen, provider-neutral, tagged with their parsing strategy."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ctxbench.records.vocab import STRATEGY_FAMILIES

def strategy_family(parsing_strategy: str) -> str:
    return STRATEGY_FAMILIES.get(parsing_strategy, parsing_strategy)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def text_key(text: str) -> bytes:
    """The key what is derived from a text alone is remembered by (its token count, its masking): 16 bytes of
    blake2b, in memory and in the store (``store.derived_texts``)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as providers send it

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Message:
    id: int
    session_id: str
    branch_id: str
    group_id: int  # a Turn: user message + tool calls + replies until control returns
    role: str  # system | user | assistant | tool
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # for role == "tool"
    tool_name: str | None = None  # for role == "tool"
    parsing_strategy: str = "openai"
    status: str = "active"  # active | dropped
    created_at: str = ""
    tokens: int = 0
    flags: tuple[str, ...] = field(default=())  # importance flags: instruction, error, solution, ...
    partial: bool = False  # a reply cut off mid-stream
    external_id: str = ""  # the message's id in the transcript it was imported from (e.g. LoCoMo's ``D3:12``)

    @property
    def is_tool_message(self) -> bool:
        """Tool-call or tool-result message: isolated by parsing strategy (seed 001)."""
        return self.role == "tool" or bool(self.tool_calls)

    @property
    def hash(self) -> str:
        payload = json.dumps(
            [self.role, self.content, [(t.id, t.name, t.arguments) for t in self.tool_calls], self.tool_call_id],
            ensure_ascii=False,
        )
        return content_hash(payload)

    def to_openai(self, content: str | None = None) -> dict[str, Any]:
        """The OpenAI chat message for this record; ``content`` overrides (truncation)."""
        text = self.content if content is None else content
        out: dict[str, Any] = {"role": self.role, "content": text}
        if self.role == "assistant" and self.tool_calls:
            out["tool_calls"] = [t.to_openai() for t in self.tool_calls]
            if not text:
                out["content"] = None
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id or ""
        return out
