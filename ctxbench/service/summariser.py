"""Summaries written by the configured model: the call is planned, stored and traced like any other.

The turns to summarise are the plan's history (the ``window`` strategy over them alone, truncation tiers
applied to their tool results), ``[compaction] prompt`` is the user turn, Context Mode ``off`` (no code).
The plan is stored, the call recorded in the traces with its usage, and the preview names its tokens.
"""
from __future__ import annotations

from typing import Any, Sequence

from ctxbench.compaction import Summariser
from ctxbench.config import Config
from ctxbench.records.compaction import MODEL_SOURCE_PREFIX
from ctxbench.records.errors import ProviderError
from ctxbench.records.messages import Message
from ctxbench.records.plans import PlanInputs
from ctxbench.service.workbench import Workbench

SYSTEM_PROMPT = "You write faithful, compact summaries of conversations between a user and a coding assistant."


def model_summariser(wb: Workbench, config: Config, session_id: str, *, cancel: Any = None,
                     client: Any = None) -> Summariser:
    """A summariser that asks the configured model (``client``: another ChatClient, for tests)."""

    def run(groups: Sequence[Sequence[Message]], max_tokens: int) -> tuple[str, str, str]:
        from ctxbench.llm.client import CancelToken, ChatRequest, Completed, LLMError
        from ctxbench.llm.providers import make_client
        from ctxbench.planner import build_plan

        chat = client or make_client(config.llm)
        history = tuple(m for turn in groups for m in turn)
        prompt = config.compaction.prompt.format(max_tokens=max_tokens)
        budget = max(1, config.llm.context_limit - config.compaction.model_reply_tokens)
        inputs = PlanInputs(session_id=session_id, query=prompt, history=history, current_turn=(), budget=budget,
                            mode="off", strategy="window", provider_family=wb.settings(session_id).provider_family,
                            system_prompt=SYSTEM_PROMPT, tokenizer=wb.tokenizer.name)
        plan = build_plan(inputs, config.planner, wb.tokenizer)
        if plan.over_budget:
            raise ProviderError(f"the turns to summarise need {plan.used_tokens:,} tokens, more than the model's "
                                f"context limit of {config.llm.context_limit:,}: summarise fewer turns at a time")
        wb.plans.save(inputs, plan)
        last_group = history[-1].group_id if history else 0
        completion = None
        try:
            for event in chat.stream(ChatRequest(messages=tuple(plan.messages()), plan=plan), cancel or CancelToken()):
                if isinstance(event, Completed):
                    completion = event.completion
        except LLMError as exc:
            wb.traces.record_call(plan_id=plan.plan_id, session_id=session_id, group_id=last_group, round=0,
                                  provider=chat.provider, model=getattr(chat, "model", ""), status="failed",
                                  error=str(exc))
            raise ProviderError(f"the model could not write the summary: {exc}") from exc
        if completion is None:
            raise ProviderError("the model's reply ended without a summary")
        reported = completion.usage.prompt_tokens
        wb.plans.record_usage(plan.plan_id, plan.used_tokens, reported, completion.model,
                              completion=completion.usage.completion_tokens,
                              cache_read=completion.usage.cache_read_tokens,
                              cache_write=completion.usage.cache_write_tokens)
        wb.traces.record_call(plan_id=plan.plan_id, session_id=session_id, group_id=last_group, round=0,
                              provider=chat.provider, model=completion.model, status="ok",
                              finish_reason=completion.finish_reason)
        reply = completion.usage.completion_tokens
        cost = (f"model call {plan.plan_id}: {reported if reported is not None else plan.used_tokens:,} prompt tokens"
                f"{'' if reported is not None else ' (estimated)'}"
                f"{f', {reply:,} reply tokens' if reply is not None else ''}")
        return completion.content.strip(), MODEL_SOURCE_PREFIX + completion.model, cost

    return run
