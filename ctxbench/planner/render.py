"""Rendering candidates to OpenAI-style chat messages.

Context layers (state, scratchpad, memos, scaffold, pins, symbol cards) each render to ONE system
message, so an item's token count is exactly ``count_message`` of that message and a plan's count
is the sum of its items plus the reply priming. History renders message by message with
``Message.to_openai`` (tool results possibly truncated).
"""
from __future__ import annotations

from typing import Any

from ctxbench.records.capsules import CapsuleHit
from ctxbench.records.compaction import Summary
from ctxbench.records.messages import Message
from ctxbench.records.plans import Memo, Pin
from ctxbench.records.retrieval import RetrievalHit

STATE_HEADER = "### STATE"
SCRATCHPAD_HEADER = "### SCRATCHPAD"
MEMO_HEADER = "### MEMO"
SCAFFOLD_HEADER = "### ORIENTATION"
PIN_HEADER = "### PINNED"
CARD_HEADER = "### SYMBOL CARD"
SUMMARY_HEADER = "### SUMMARY"
CAPSULE_HEADER = "### CAPSULE"
LABEL_CHARS = 72
# the reply a tool call gets in the payload when none was stored (an import or a turn cut off mid-tool):
# providers reject an assistant tool call that no tool message answers
MISSING_TOOL_RESULT = "[no result recorded for this tool call]"


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def state_message(state_block: str) -> dict[str, Any]:
    text = state_block.strip("\n")
    if not text.lstrip().startswith(STATE_HEADER):
        text = f"{STATE_HEADER}\n{text}"
    return system(text)


def scratchpad_message(scratchpad: str) -> dict[str, Any]:
    return system(f"{SCRATCHPAD_HEADER}\n{scratchpad.strip(chr(10))}")


def memo_message(memo: Memo) -> dict[str, Any]:
    tags = f" [{', '.join(memo.tags)}]" if memo.tags else ""
    return system(f"{MEMO_HEADER} {memo.id}{tags}\n{memo.content}")


def scaffold_message(scaffold: str) -> dict[str, Any]:
    return system(f"{SCAFFOLD_HEADER}\n{scaffold.strip(chr(10))}")


def pin_message(pin: Pin, content: str) -> dict[str, Any]:
    title = pin.label or pin.target
    body = content if content else title
    return system(f"{PIN_HEADER} ({pin.kind}) {title}\n{body}")


def card_text(hit: RetrievalHit, with_excerpt: bool) -> str:
    """The card as the model sees it: thin, or (Heavy) its head and the excerpt chosen for the query."""
    text = hit.card_text or hit.symbol
    if with_excerpt and hit.excerpt:
        text = f"{hit.card_head or text}\n{hit.excerpt}"
    return text


def card_message(hit: RetrievalHit, with_excerpt: bool) -> dict[str, Any]:
    where = f" ({hit.path}:{hit.line})" if hit.path else ""
    return system(f"{CARD_HEADER} {hit.symbol}{where}\n{card_text(hit, with_excerpt)}")


def capsule_message(hit: CapsuleHit) -> dict[str, Any]:
    """A capsule of code as one system message: what it covers, who wrote it, how sure, and (stale) which
    file changed since. Always marked as a retrieval aid, not ground truth."""
    c = hit.capsule
    made = f"{c.source} summary, confidence {c.confidence:.2f}, generated {c.generated_at[:10]}"
    if c.stale:
        note = f"STALE: {c.stale_note()}; it may no longer match the code, check it"
    else:
        note = "a retrieval aid, not ground truth: check the code before relying on it"
    return system(f"{CAPSULE_HEADER} {c.title} ({made}; {note})\n{c.text.strip(chr(10))}")


def summary_message(summary: Summary) -> dict[str, Any]:
    """A summary of earlier turns as one system message (its header names the turns it stands in for)."""
    return system(f"{SUMMARY_HEADER} of {summary.span} (earlier conversation, {summary.source})\n"
                  f"{summary.text.strip(chr(10))}")


def history_message(message: Message, content: str | None = None) -> dict[str, Any]:
    return message.to_openai(content)


def missing_tool_result(call_id: str) -> dict[str, Any]:
    """A synthetic tool message answering a call that has no stored result."""
    return {"role": "tool", "content": MISSING_TOOL_RESULT, "tool_call_id": call_id}


def answer_tool_calls(rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rendered`` with every tool call answered right after the message that makes it.

    Providers accept an assistant message with ``tool_calls`` only when tool messages answering each
    call id follow it directly. A result stored further down the same run is moved up to its call;
    a call with no result at all gets a :func:`missing_tool_result`. Well-formed input is returned
    unchanged (same list).
    """
    if not any(m.get("tool_calls") for m in rendered):
        return rendered
    out: list[dict[str, Any]] = []
    moved: set[int] = set()
    n = len(rendered)
    for i, msg in enumerate(rendered):
        if i in moved:
            continue
        out.append(msg)
        calls = msg.get("tool_calls") if msg.get("role") == "assistant" else None
        if not calls:
            continue
        call_ids = [c["id"] for c in calls]
        answered: set[str] = set()
        j = i + 1
        while j < n and rendered[j].get("role") == "tool" and j not in moved:
            answered.add(rendered[j].get("tool_call_id") or "")
            out.append(rendered[j])
            moved.add(j)
            j += 1
        for k in range(j, n):
            late = rendered[k]
            cid = late.get("tool_call_id")
            if k not in moved and late.get("role") == "tool" and cid in call_ids and cid not in answered:
                answered.add(cid)
                out.append(late)
                moved.add(k)
        for cid in call_ids:
            if cid not in answered:
                answered.add(cid)
                out.append(missing_tool_result(cid))
    return out


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """One line of at most ``limit`` characters, for labels. Only as much of ``text`` is read as the label needs
    (a 30 MB message was split into all its words to label it: ~200 MB for a moment)."""
    size = 4 * limit + 64
    while size < len(text):
        head = text[:size]
        words = head.split()
        if not head[-1].isspace():
            words = words[:-1]  # the last word may go on past the head
        line = " ".join(words)
        if len(line) > limit:
            return line[: limit - 1] + "…"
        size *= 4
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
