"""The offline model: no network, deterministic, and honest about what it was given.

It answers by describing the ContextPlan behind the request (mode, budget, sections, what was
included and excluded and why) and ends with a ``### STATE`` block, so the state, usage and
reflection steps all run without an endpoint. It streams its reply in small pieces like a real
model and reports usage counted with the same tokenizer.

It can also exercise the tools deterministically: every line of the user's message of the form
``!tool NAME {json arguments}`` becomes a tool call in the first round of the turn; once the
results are back it summarises them. A request whose last user message is the state-rebuild
prompt gets a fresh ``### STATE`` block only.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Iterator

from ctxbench.config import LLMConfig
from ctxbench.llm.client import (
    CancelToken,
    ChatRequest,
    Completed,
    Completion,
    LLMCancelled,
    StreamEvent,
    TextDelta,
    ToolCallStarted,
    Usage,
)
from ctxbench.llm.prompts import REBUILD_PROMPT
from ctxbench.records.state import STATE_HEADING
from ctxbench.llm.tools import tools_tokens
from ctxbench.records.messages import ToolCall
from ctxbench.tokens import count_messages, get_tokenizer
from ctxbench.records.item_refs import card_symbol
from ctxbench.records.vocab import NO_MODE

TOOL_DIRECTIVE = re.compile(r"^\s*!tool\s+([A-Za-z_][\w]*)\s*(\{.*\})?\s*$")
OFFLINE_MODEL = "offline"
_CARD_LIST_MAX = 6  # symbol names listed in the description before "and N more"


class OfflineClient:
    provider = "offline"
    parsing_strategy = "openai"  # it speaks the OpenAI tool-call format

    def __init__(self, config: LLMConfig | None = None) -> None:
        self.config = config or LLMConfig()
        self.model = OFFLINE_MODEL

    def stream(self, request: ChatRequest, cancel: CancelToken | None = None) -> Iterator[StreamEvent]:
        messages = [dict(m) for m in request.messages]
        text, calls = self._answer(messages, request)
        step = max(1, self.config.offline_chunk_chars)
        sent: list[str] = []
        for start in range(0, len(text), step):
            if cancel is not None and cancel.cancelled:
                raise LLMCancelled("".join(sent))
            piece = text[start:start + step]
            sent.append(piece)
            yield TextDelta(piece)
        for index, call in enumerate(calls):
            yield ToolCallStarted(index, call.name)
        if cancel is not None and cancel.cancelled:
            raise LLMCancelled(text)
        tok = get_tokenizer()
        prompt = count_messages(tok, messages) + tools_tokens(request.tools, tok)
        completion = tok.count(text) + sum(tok.count(c.arguments) for c in calls)
        yield Completed(Completion(
            content=text,
            tool_calls=tuple(calls),
            finish_reason="tool_calls" if calls else "stop",
            usage=Usage(prompt, completion, prompt + completion),
            model=self.model,
        ))

    # -- the answer ---------------------------------------------------------------------------

    def _answer(self, messages: list[dict[str, Any]], request: ChatRequest) -> tuple[str, list[ToolCall]]:
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        question = str(messages[last_user].get("content") or "") if last_user >= 0 else ""
        after = messages[last_user + 1:] if last_user >= 0 else []
        results = [m for m in after if m.get("role") == "tool"]
        if question.strip() == REBUILD_PROMPT:
            return self._state(messages, question, rebuilt=True), []
        if not results:
            offered = {t.get("function", {}).get("name") for t in request.tools}
            calls = self._directives(question, offered)
            if calls:
                names = ", ".join(c.name for c in calls)
                return f"Offline model: calling {names} as your message asks.", calls
        parts = [self._describe(messages, request.plan, question)]
        if results:
            parts.append(self._summarise_results(after))
        parts.append(self._state(messages, question, plan=request.plan))
        return "\n\n".join(parts), []

    @staticmethod
    def _directives(question: str, offered: set[Any]) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for line in question.splitlines():
            match = TOOL_DIRECTIVE.match(line)
            if not match or match.group(1) not in offered:
                continue
            raw = match.group(2) or "{}"
            try:
                arguments = json.dumps(json.loads(raw), sort_keys=True, ensure_ascii=False)
            except json.JSONDecodeError:
                arguments = raw  # passed on as sent: the tool reports the bad JSON to the "model"
            calls.append(ToolCall(f"offline_call_{len(calls) + 1}", match.group(1), arguments))
        return calls

    @staticmethod
    def _describe(messages: list[dict[str, Any]], plan: Any, question: str) -> str:
        lines = ["Offline model (no network): here is the context I was given."]
        if plan is not None:
            lines.append(
                f"Plan {plan.plan_id} · mode {plan.mode or NO_MODE} · strategy {plan.strategy} · "
                f"{plan.used_tokens:,} / {plan.budget:,} tokens" + (" · OVER BUDGET" if plan.over_budget else "")
            )
            sections = " · ".join(f"{name} {tokens:,}" for name, tokens in plan.sections)
            if sections:
                lines.append(f"Sections: {sections}")
            kinds = Counter(item.kind for item in plan.included)
            lines.append("Included: " + (", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "nothing"))
            cards = [card_symbol(item.id) or item.id for item in plan.included if item.kind == "symbol_card"]
            if cards:
                shown = ", ".join(f"`{c}`" for c in cards[:_CARD_LIST_MAX])
                more = f" and {len(cards) - _CARD_LIST_MAX} more" if len(cards) > _CARD_LIST_MAX else ""
                lines.append(f"Symbol cards: {shown}{more}")
            reasons = Counter(item.reason for item in plan.excluded)
            if reasons:
                lines.append("Excluded: " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())))
        else:
            roles = Counter(str(m.get("role")) for m in messages)
            lines.append(f"{len(messages)} messages: " + ", ".join(f"{n} {r}" for r, n in sorted(roles.items())))
        if question:
            first = question.strip().splitlines()[0] if question.strip() else ""
            lines.append(f"You asked: {first[:200]}")
        # a Markdown list, so a chat pane keeps one fact per line
        return lines[0] + "\n\n" + "\n".join(f"- {line}" for line in lines[1:])

    @staticmethod
    def _summarise_results(after: list[dict[str, Any]]) -> str:
        names: dict[str, str] = {}
        for m in after:
            for call in m.get("tool_calls") or ():
                names[call.get("id", "")] = call.get("function", {}).get("name", "")
        lines = ["Tool results:", ""]
        for m in after:
            if m.get("role") != "tool":
                continue
            content = str(m.get("content") or "")
            first = content.strip().splitlines()[0] if content.strip() else "(empty)"
            name = names.get(str(m.get("tool_call_id")), "tool")
            lines.append(f"- {name}: {first[:160]} ({len(content)} chars)")
        return "\n".join(lines)

    @staticmethod
    def _state(messages: list[dict[str, Any]], question: str, rebuilt: bool = False, plan: Any = None) -> str:
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        if rebuilt:
            users = [u for u in users if u.strip() != REBUILD_PROMPT]
        goal_source = (users[-1] if users else question).strip()
        goal = goal_source.splitlines()[0][:120] if goal_source else "(none yet)"
        named = {p for m in messages for p in re.findall(r"`([\w./-]+\.\w+|[\w]+(?:\.[\w]+)+)`",
                                                         str(m.get("content") or ""))}
        if plan is not None:
            named |= {card_symbol(item.id) or item.id for item in plan.included if item.kind == "symbol_card"}
        context = sorted(named)[:_CARD_LIST_MAX]
        return "\n".join([
            STATE_HEADING,
            f"Goal: {goal}",
            f"Context: {', '.join(context) if context else '(no files or symbols in view)'}",
            f"Resolved: {max(0, len(users) - 1)} earlier user turns in the window",
            "Technical Anchors: offline model, deterministic replies",
        ])
