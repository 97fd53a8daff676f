"""Rendering candidates to OpenAI-style chat messages.

Context layers (state, scratchpad, memos, scaffold, pins, symbol cards) each render to ONE system
message, so an item's token count is exactly ``count_message`` of that message and a plan's count
is the sum of its items plus the reply priming. History renders message by message with
``Message.to_openai`` (tool results possibly truncated).
"""
from __future__ import annotations

from typing import Any

from ctxbench.messages import Message
from ctxbench.planner.records import Memo, Pin
from ctxbench.retrieval.retrieval_set import RetrievalHit

STATE_HEADER = "### STATE"
SCRATCHPAD_HEADER = "### SCRATCHPAD"
MEMO_HEADER = "### MEMO"
SCAFFOLD_HEADER = "### ORIENTATION"
PIN_HEADER = "### PINNED"
CARD_HEADER = "### SYMBOL CARD"
LABEL_CHARS = 72


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
    text = hit.card_text or hit.symbol
    if with_excerpt and hit.excerpt:
        text = f"{text}\n{hit.excerpt}"
    return text


def card_message(hit: RetrievalHit, with_excerpt: bool) -> dict[str, Any]:
    where = f" ({hit.path}:{hit.line})" if hit.path else ""
    return system(f"{CARD_HEADER} {hit.symbol}{where}\n{card_text(hit, with_excerpt)}")


def history_message(message: Message, content: str | None = None) -> dict[str, Any]:
    return message.to_openai(content)


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """One line of at most ``limit`` characters, for labels."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
