"""Small builders for planner tests: sessions written turn by turn."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxbench.records.messages import Message, ToolCall


@dataclass
class SessionBuilder:
    session_id: str = "s1"
    messages: list[Message] = field(default_factory=list)
    next_id: int = 1
    group: int = 0

    def add(self, role: str, content: str, **kw: Any) -> Message:
        msg = Message(id=self.next_id, session_id=self.session_id, branch_id="main", group_id=self.group,
                      role=role, content=content, **kw)
        self.next_id += 1
        self.messages.append(msg)
        return msg

    def turn(self, user: str, reply: str = "ok", *, tools: tuple[tuple[str, str], ...] = (),
             strategy: str = "openai", flags: tuple[str, ...] = (), system: str = "") -> int:
        """A whole turn: [system], user, one tool call per (name, result), reply. Returns its group id."""
        gid = self.group
        if system:
            self.add("system", system)
        self.add("user", user, flags=flags)
        for name, result in tools:
            call_id = f"call{self.next_id}"
            self.add("assistant", "", tool_calls=(ToolCall(call_id, name, '{"x": 1}'),), parsing_strategy=strategy)
            self.add("tool", result, tool_call_id=call_id, tool_name=name, parsing_strategy=strategy)
        if reply:
            self.add("assistant", reply)
        self.group += 1
        return gid

    def split_current(self) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
        """(history, current turn): the last group is the current turn."""
        last = self.messages[-1].group_id
        history = tuple(m for m in self.messages if m.group_id != last)
        current = tuple(m for m in self.messages if m.group_id == last)
        return history, current
