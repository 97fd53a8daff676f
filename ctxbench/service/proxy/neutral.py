"""The store's view of a wire message: the provider-neutral messages it becomes."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.records.messages import ToolCall
from ctxbench.records.proxy import WireMessage


@dataclass(frozen=True)
class NeutralMessage:
    role: str  # user | assistant | tool | system
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None


def neutral_messages(message: WireMessage, tool_names: dict[str, str]) -> list[NeutralMessage]:
    """The provider-neutral messages a wire message becomes: an Anthropic user message holding tool results
    becomes one ``tool`` message per result (then a user message for any text beside them). ``tool_names``
    maps tool call ids seen so far to their tools (filled as calls are met)."""
    out: list[NeutralMessage] = []
    role = "system" if message.role == "developer" else message.role
    texts = [p.text for p in message.parts if p.kind in ("text", "file", "image", "other") and not p.scaffold]
    calls = [ToolCall(p.tool_call_id, p.tool_name, p.text) for p in message.parts if p.kind == "tool_call"]
    for call in calls:
        tool_names[call.id] = call.name
    for p in message.parts:
        if p.kind == "tool_result":
            out.append(NeutralMessage("tool", p.text, tool_call_id=p.tool_call_id or "?",
                                      tool_name=tool_names.get(p.tool_call_id) or p.tool_name or None))
    if role == "tool":
        return out
    if texts or calls or not out:
        out.append(NeutralMessage(role if role in ("system", "user", "assistant") else "user", "\n\n".join(texts),
                                  tool_calls=tuple(calls)))
    return out
