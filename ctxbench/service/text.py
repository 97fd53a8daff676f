"""Messages as readable text (the payload viewer, a turn's messages, an item's preview)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping


def render_messages(messages: Iterable[Mapping[str, Any]]) -> str:
    """OpenAI-style messages as readable text: a header per message, then its content."""
    out: list[str] = []
    for n, m in enumerate(messages, 1):
        head = f"── {n} · {m.get('role', '?')}"
        if m.get("tool_call_id"):
            head += f" · answers {m['tool_call_id']}"
        out.append(head + " " + "─" * max(3, 60 - len(head)))
        if m.get("content"):
            out.append(str(m["content"]))
        for call in m.get("tool_calls") or ():
            fn = call.get("function", {})
            out.append(f"⚙ {fn.get('name')}({fn.get('arguments')})  [{call.get('id')}]")
        out.append("")
    return "\n".join(out)
