"""Records of what happened at each model call: the call, its tool traces, the pins it suggested."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelCall:
    id: int
    plan_id: str
    session_id: str
    group_id: int
    round: int
    provider: str
    model: str
    status: str
    finish_reason: str
    error: str
    assistant_message_id: int | None
    tools_offered: int
    created_at: str


@dataclass(frozen=True)
class ToolTrace:
    id: int
    plan_id: str
    session_id: str
    group_id: int
    tool_call_id: str
    name: str
    arguments: str
    ok: bool
    call_message_id: int | None
    result_message_id: int | None
    result_chars: int
    duration_ms: float
    created_at: str


@dataclass(frozen=True)
class StoredSuggestion:
    id: int
    session_id: str
    target: str
    reason: str
    source: str
    plan_id: str
    status: str
    created_at: str
