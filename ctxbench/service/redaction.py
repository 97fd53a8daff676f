"""Secrets never reach the model: transcripts are masked as they are imported, every plan's inputs as
they are sent, and each plan item says how many secrets it holds masked (``redacted: N``).

Masking happens before the planner counts tokens, so the counts are those of what is sent. Masking is
remembered per text (:func:`ctxbench.redaction.redact_cached`), so planning a long session again costs
a dictionary look-up per message.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.plans import ContextPlan, PlanInputs
from ctxbench.redaction import count_masks, redact_cached


def redact_arguments(arguments: str) -> str:
    """A tool call's JSON arguments with every string value masked (the JSON stays valid)."""
    if not arguments:
        return arguments
    masked, count = redact_cached(arguments)
    if not count:
        return arguments
    try:
        data = json.loads(arguments)
    except ValueError:
        return masked  # not JSON: masked as text
    return json.dumps(_mask_json(data), ensure_ascii=False)


def _mask_json(value: Any) -> Any:
    if isinstance(value, str):
        return redact_cached(value)[0]
    if isinstance(value, list):
        return [_mask_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _mask_json(v) for k, v in value.items()}
    return value


def redact_calls(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    if not calls:
        return calls
    masked = tuple(redact_arguments(c.arguments) for c in calls)
    if all(m is c.arguments or m == c.arguments for m, c in zip(masked, calls)):
        return calls  # the usual case: nothing to mask, no copies (a long session has tens of thousands of calls)
    return tuple(c if m == c.arguments else dataclasses.replace(c, arguments=m) for m, c in zip(masked, calls))


def redact_message(message: Message) -> Message:
    content = redact_cached(message.content)[0]
    calls = redact_calls(message.tool_calls)
    if content is message.content and calls is message.tool_calls:
        return message
    return dataclasses.replace(message, content=content, tool_calls=calls)


def redact_inputs(inputs: PlanInputs, *, history: bool = True) -> PlanInputs:
    """The plan inputs with every secret in the history, the current turn, pins, state, scratchpad and memos masked
    (``history=False``: the history is masked already, as the workbench's history cache keeps it)."""
    return dataclasses.replace(
        inputs,
        history=tuple(redact_message(m) for m in inputs.history) if history else inputs.history,
        current_turn=tuple(redact_message(m) for m in inputs.current_turn),
        pins=tuple(dataclasses.replace(p, content=redact_cached(p.content)[0]) if p.content else p
                   for p in inputs.pins),
        state_block=redact_cached(inputs.state_block)[0],
        scratchpad=redact_cached(inputs.scratchpad)[0],
        memos=tuple(dataclasses.replace(m, content=redact_cached(m.content)[0]) for m in inputs.memos),
    )


def _message_masks(message: dict[str, Any]) -> int:
    n = count_masks(str(message.get("content") or ""))
    for call in message.get("tool_calls") or ():
        n += count_masks(str((call.get("function") or {}).get("arguments") or ""))
    return n


def mark_redactions(plan: ContextPlan) -> ContextPlan:
    """``plan`` with ``redacted`` set on every included item whose messages hold masked secrets (excluded items
    send nothing; a deferred plan's excluded history is not made for this)."""
    changed = False
    included = []
    for item in plan.included:
        n = sum(_message_masks(m) for m in item.messages)
        if n != item.redacted:
            item = dataclasses.replace(item, redacted=n)
            changed = True
        included.append(item)
    return plan.with_included(tuple(included)) if changed else plan


def redacted_total(plan: ContextPlan) -> int:
    return sum(i.redacted for i in plan.items)
