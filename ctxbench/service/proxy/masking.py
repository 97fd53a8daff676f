"""Secrets in proxied requests are masked before anything is stored; what goes upstream is not touched.

The proxy forwards a request as the client sent it (the upstream needs the key the user pasted to run the
command the user asked for), but the store keeps only masked text, with the scanner ``import`` uses
(:mod:`ctxbench.redaction`): the messages and their search index, the session's title, the plan (item
labels, details, messages, notes, query, system prompt), the stored request bodies, the exchange's
changes, reply and error, and the conversation's last reply.

A stored body keeps its JSON shape: every string value is masked in place (a tool call's JSON arguments
stay JSON), and a body with nothing to mask is kept byte for byte. Masking is remembered per text
(:func:`ctxbench.redaction.redact_cached`), so the history a client resends with every request costs a
look-up per message; texts longer than ``CACHED_TEXT_CHARS`` are remembered for one request only.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from ctxbench.records.plans import ContextPlan, PlanInputs, PlanItem
from ctxbench.redaction import mask_text, redact_cached
from ctxbench.service.proxy.neutral import NeutralMessage
from ctxbench.service.redaction import mark_redactions, redact_arguments, redact_calls

CACHED_TEXT_CHARS = 1_000_000  # a longer text is not kept in the process-wide cache (see :class:`Masker`)


class Masker:
    """Masks the texts of one request. A text too long for the process-wide cache is remembered here, for
    the request only: the same long message is its body's string, its stored message, its plan item and
    the plan's query, and the scanner takes seconds over tens of megabytes."""

    def __init__(self) -> None:
        self._long: dict[str, str] = {}

    def mask(self, text: str) -> str:
        """``text`` with every secret replaced by ``[REDACTED]``."""
        if not text:
            return text
        if len(text) <= CACHED_TEXT_CHARS:
            return redact_cached(text)[0]
        found = self._long.get(text)
        if found is None:
            masked = mask_text(text).text
            found = self._long[text] = text if masked == text else masked  # no second copy of a clean text
        return found

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, list):
            return [self._value(v) for v in value]
        if isinstance(value, dict):
            return {k: self._value(v) for k, v in value.items()}
        return value

    def json(self, value: Any) -> Any:
        """A parsed JSON value with every string in it masked (the same object when nothing was masked)."""
        masked = self._value(value)
        return value if masked == value else masked

    def body(self, body: bytes, parsed: Any = None) -> bytes:
        """A request body as it may be stored: a JSON body with each string value masked (the same bytes when
        nothing is), anything else masked as text. ``parsed``: the body already read, if it was."""
        if parsed is None:
            try:
                parsed = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                text = body.decode("utf-8", "replace")
                masked_text = self.mask(text)
                return body if masked_text == text else masked_text.encode("utf-8")
        masked = self.json(parsed)
        if masked is parsed:
            return body
        return json.dumps(masked, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")

    def neutral(self, message: NeutralMessage) -> NeutralMessage:
        """A message as the store keeps it: its text and its tool calls' arguments masked."""
        content = self.mask(message.content)
        calls = redact_calls(message.tool_calls)
        if content is message.content and calls is message.tool_calls:
            return message
        return dataclasses.replace(message, content=content, tool_calls=calls)

    def _message(self, m: dict[str, Any]) -> dict[str, Any]:
        out = dict(m)
        if isinstance(out.get("content"), str):
            out["content"] = self.mask(out["content"])
        calls = out.get("tool_calls")
        if calls:
            out["tool_calls"] = [
                dict(c, function=dict(c["function"],
                                      arguments=redact_arguments(str(c["function"].get("arguments") or ""))))
                if isinstance(c, dict) and isinstance(c.get("function"), dict) else c for c in calls]
        return out

    def _item(self, item: PlanItem) -> PlanItem:
        return dataclasses.replace(item, label=self.mask(item.label), detail=self.mask(item.detail),
                                   messages=tuple(self._message(m) for m in item.messages))

    def plan(self, plan: ContextPlan) -> ContextPlan:
        """A proxied request's plan as it may be stored: its texts masked (its PlanId, tokens and choices are
        those of what was sent), each item marked with the secrets it holds (``redacted: N``)."""
        masked = dataclasses.replace(plan, query=self.mask(plan.query), items=tuple(self._item(i) for i in plan.items),
                                     notes=tuple(self.mask(n) for n in plan.notes))
        return mark_redactions(masked)

    def inputs(self, inputs: PlanInputs) -> PlanInputs:
        return dataclasses.replace(inputs, query=self.mask(inputs.query),
                                   system_prompt=self.mask(inputs.system_prompt))


def mask(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED]`` (a short text's masking is remembered)."""
    return Masker().mask(text)
