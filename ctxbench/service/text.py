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


def diff_lines(diff) -> list[str]:
    """A plan diff (``records.diffs.PlanDiff``) as lines: what entered, what left, what changed, each with its
    section, tokens and the reason on both sides."""
    out = [f"{diff.before_id} → {diff.after_id}: {diff.summary} ({diff.tokens_before:,} → {diff.tokens_after:,} tok)"]
    for title, items in (("entered", diff.entered), ("left", diff.left), ("changed", diff.changed)):
        if items:
            out.append(f"{title} ({len(items)}):")
            out.extend("  " + _diff_item(title, item) for item in items)
    if diff.empty:
        out.append("the two plans include the same items with the same tokens")
    return out


def _diff_item(title: str, item) -> str:
    before, after = item.before, item.after
    if title == "entered":
        was = f"was {before.reason}" if before is not None else "was not a candidate"
        return f"{item.label} [{after.section}, {after.tokens:,} tok] — {after.reason} ({was})"
    if title == "left":
        now = after.reason if after is not None else "no longer a candidate"
        why = f" — {item.why}" if item.why else ""
        return f"{item.label} [{before.section}, {before.tokens:,} tok] — {now} (was {before.reason}){why}"
    moved = f"{before.section} → {after.section}, " if before.section != after.section else ""
    return f"{item.label} [{moved}{before.tokens:,} → {after.tokens:,} tok] — {after.reason}"
