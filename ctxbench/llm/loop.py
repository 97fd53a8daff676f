"""The turn runner: Intent → Context → Action → Feedback → Reflection, as a generator of events.

One turn:

1. **Intent** — the user's message is stored first (so a failure loses nothing) and starts a group.
2. **Context** — a ContextPlan is built for the group and stored; the request's ``messages`` are
   exactly ``plan.messages()``. Each round of the tool loop is its own plan (the current turn
   then holds the tool calls and results so far), built with the turn's first RetrievalSet, so
   ``ctxbench show PLAN_ID --messages`` is the exact payload of every call. The tool definitions
   the call offers are a mandatory item of its plan (their tokens, no messages), so the budget and
   the estimate (``plan.used_tokens``) cover the whole prompt the provider counts.
3. **Action** — the model streams its reply (text deltas as events); tool calls are collected.
4. **Feedback** — the assistant message (with its tool calls) and each tool result are stored in
   the group with the client's parsing strategy; estimated vs reported prompt tokens are
   recorded per plan; a ``### STATE`` block in a reply becomes the session's state. The loop
   goes on while the model calls tools, up to ``llm.max_tool_rounds`` rounds; the call after
   the last round offers no tools, so the model has to answer.
5. **Reflection** — activation, leases, promotions and suggestions (see :mod:`.reflection`).

A failure stores any partial reply (``partial=True``) and ends the turn with ``TurnFailed``; a
cancel (the token, or the consumer closing the generator) stores it the same way. One call's streaming, and the
reply saved as it arrives, is :mod:`.streamed_call`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from ctxbench.config import Config
from ctxbench.llm import reflection
from ctxbench.llm.anthropic_wire import PreviousRequest
from ctxbench.llm.client import CancelToken, ChatClient, ChatRequest
from ctxbench.records.errors import StoreError, UnknownPlan
from ctxbench.records.vocab import UNANSWERED_FLAG
from ctxbench.records.turns import (
    AssistantStored,
    CallStarted,
    PlanReady,
    ReflectionDone,
    StateUpdated,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnEvent,
    TurnFailed,
    TurnFinished,
    TurnRecovered,
    TurnStarted,
    TurnWaiting,
    recovered_note,
    UsageCheck,
    UsageRecorded,
)
from ctxbench.llm.prompts import REBUILD_PROMPT
from ctxbench.records.compaction import task_from_goal
from ctxbench.records.state import extract_state, state_fields
from ctxbench.llm.tools import CodeContext, ToolBox, offered_tools, tools_tokens
from ctxbench.llm.ports import UnitOfWork
from ctxbench.llm.streamed_call import CallResult, stream_call
from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.plan_request import PlanRequest, StoredTurn

CAP_REACHED_RESULT = "not run: the tool round limit of this turn was reached"
CANCELLED_RESULT = "not run: the turn was cancelled by the user"


@dataclass
class TurnRunner:
    """Runs turns of one Workbench against one chat client.

    ``run(session_id, text)`` and ``rebuild_state(session_id)`` are generators of
    :mod:`ctxbench.records.turns`; iterate them in a worker thread and set ``cancel`` from the UI.
    """

    workbench: UnitOfWork
    client: ChatClient
    config: Config | None = None
    code: CodeContext | None = None
    offer_tools: bool = True
    # per session, the last request that got a reply (for a client that places prompt-cache breakpoints)
    _previous: dict[str, PreviousRequest] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.config is None:
            self.config = self.workbench.config

    @property
    def traces(self) -> Any:
        """Where model calls, tool traces and suggestions are recorded: the workbench's ``traces``."""
        return self.workbench.traces

    def tools_for_round(self, round_no: int) -> tuple[dict[str, Any], ...]:
        """The tool schemas the call of ``round_no`` offers (none after the cap or with tools off)."""
        return offered_tools(self.config.llm, round_no, self.offer_tools)

    def tools_tokens(self, round_no: int = 0) -> int:
        """Tokens of the tool definitions the call of ``round_no`` sends (round 0: the next turn's first
        call). Plans count them, so a meter planned with them shows the whole prompt."""
        return tools_tokens(self.tools_for_round(round_no), self.workbench.tokenizer)

    # -- public -------------------------------------------------------------------------------

    def run(
        self,
        session_id: str,
        text: str,
        *,
        cancel: CancelToken | None = None,
        mode: str | None = None,
        budget: int | None = None,
        strategy: str | None = None,
    ) -> Iterator[TurnEvent]:
        """One user turn with the tool loop; ends with one TurnFinished.

        Turns of one session never interleave: while another one runs (another process, another window)
        this one says so (``TurnWaiting``) and waits, before its message is stored. A turn that ends with
        no reply at all is dropped from plans and its user message flagged ``unanswered``, so the next
        turn never sends two user messages in a row.
        """
        cancel = cancel or CancelToken()
        lock = self.workbench.turn_lock(session_id)
        if not lock.try_acquire():
            yield TurnWaiting(session_id, lock.holder())
            if not lock.acquire(give_up=lambda: cancel.cancelled):
                yield TurnCancelled(None)
                yield TurnFinished(session_id, 0, "cancelled", "", (), None, None,
                                   "cancelled while waiting for the session's turn in progress")
                return
        try:
            if lock.left_by:  # the last turn's process ended without releasing the lock: it died mid-turn
                settled = self.workbench.messages.settle_last_turn(session_id)
                if settled is not None:
                    yield TurnRecovered(session_id, f"process {lock.left_by}", settled,
                                        recovered_note(session_id, f"process {lock.left_by}", settled))
            # Intent: stored before anything can fail
            user = self.workbench.messages.append(session_id, "user", text,
                                                  parsing_strategy=self.client.parsing_strategy)
            group_id = user.group_id
            try:
                yield TurnStarted(session_id, group_id, user)
                yield from self._turn(session_id, text, group_id, cancel, mode, budget, strategy)
            except StoreError:  # the store cannot take the turn (a full disk): the front end's one line says so
                raise
            except Exception as exc:  # a bug must not leave the UI waiting: say so, end the turn
                reason = f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())}"
                yield TurnFailed(reason, "internal", None)
                yield TurnFinished(session_id, group_id, "failed", "", (), None, None, reason)
            finally:
                self._mark_unanswered(session_id, group_id, user)
        finally:
            lock.release()

    def _mark_unanswered(self, session_id: str, group_id: int, user: Message) -> None:
        """A turn with no assistant message (not even a partial one) is dropped and its message flagged."""
        messages = self.workbench.messages
        if any(m.role == "assistant" for m in messages.group(session_id, group_id)):
            return
        with self.workbench.transaction():
            messages.set_flags(session_id, user.id, tuple(dict.fromkeys((*user.flags, UNANSWERED_FLAG))))
            messages.drop(session_id, group_id)

    def _turn(self, session_id: str, text: str, group_id: int, cancel: CancelToken, mode: str | None,
              budget: int | None, strategy: str | None) -> Iterator[TurnEvent]:
        wb = self.workbench
        llm = self.config.llm
        strategy_tag = self.client.parsing_strategy
        toolbox = ToolBox(wb, session_id, llm, code=self.code)
        plan_ids: list[str] = []
        plans: list[Any] = []
        usage_checks: list[UsageCheck] = []
        assistant_texts: list[str] = []
        state_block: str | None = None
        retrieval = None
        reply = ""
        status, error_line = "ok", ""
        refused = False  # nothing was sent: no reflection (no activation, no lease counts down)

        for round_no in range(llm.max_tool_rounds + 1):
            # Context
            # the tool definitions are part of the prompt: the plan budgets them with the messages
            tools = self.tools_for_round(round_no)
            settings = wb.settings(session_id).with_choices(mode=mode, budget=budget, strategy=strategy)
            plan = wb.planning.plan(PlanRequest(session_id, None, settings, StoredTurn(group_id),
                                                tools_tokens(tools, wb.tokenizer), retrieval, store=True))
            if retrieval is None:
                retrieval = wb.plans.retrieval_set(plan.retrieval_set_id)
            plans.append(plan)
            plan_ids.append(plan.plan_id)
            yield PlanReady(plan, round_no)

            estimated = plan.used_tokens
            refusal = None
            if round_no == 0 and plan.over_budget:
                # the budget does not even hold what every call must send: refuse, never send it silently
                refusal = (f"not sent: {plan.over_budget_reason}; raise the budget (/budget N, --budget N) to at "
                           f"least {plan.used_tokens:,} tokens", "over_budget")
            elif estimated > llm.context_limit:
                refusal = (f"the plan needs about {estimated:,} prompt tokens, more than the model's context "
                           f"limit of {llm.context_limit:,}; lower the budget or switch mode", "context_limit")
            if refusal is not None:
                status, (error_line, kind) = "failed", refusal
                self.traces.record_call(plan_id=plan.plan_id, session_id=session_id, group_id=group_id,
                                        round=round_no, provider=self.client.provider, model=self.client.model,
                                        status="failed", error=error_line, tools_offered=len(tools))
                yield TurnFailed(error_line, kind, None)
                refused = kind == "over_budget"
                break

            # Action
            yield CallStarted(plan.plan_id, round_no, self.client.model, bool(tools))
            request = ChatRequest(messages=tuple(plan.messages()), tools=tuple(tools), plan=plan,
                                  max_tokens=self._reply_cap(estimated), previous=self._previous_request(session_id))
            result = CallResult()
            yield from stream_call(self.client, wb.messages, llm, request, cancel, result, group_id)
            if result.completion is not None:
                self._previous[session_id] = PreviousRequest(request.messages, request.tools)

            if result.completion is None:  # failed or cancelled: keep what arrived
                partial = None
                if result.text:
                    partial = result.saver.store(result.text) if result.saver is not None else \
                        wb.messages.append(session_id, "assistant", result.text, group_id=group_id,
                                           parsing_strategy=strategy_tag, partial=True)
                    yield AssistantStored(plan.plan_id, partial)
                    assistant_texts.append(result.text)
                reply = result.text
                if result.cancelled:
                    status, error_line = "cancelled", "cancelled by the user"
                else:
                    status, error_line = "failed", result.error.reason if result.error else "the call failed"
                self.traces.record_call(
                    plan_id=plan.plan_id, session_id=session_id, group_id=group_id, round=round_no,
                    provider=self.client.provider, model=self.client.model,
                    status=("cancelled" if result.cancelled else "partial" if partial else "failed"),
                    error=error_line, assistant_message_id=partial.id if partial else None, tools_offered=len(tools))
                if result.cancelled:
                    yield TurnCancelled(partial)
                else:
                    yield TurnFailed(error_line, result.error.kind if result.error else "connection", partial)
                break

            completion = result.completion
            # Feedback
            check = self._record_usage(plan.plan_id, estimated, completion)
            usage_checks.append(check)
            yield UsageRecorded(check)

            if result.saver is not None and result.saver.message is not None:  # saved while it streamed: now whole
                message = result.saver.store(completion.content, partial=False, tool_calls=completion.tool_calls)
            else:
                message = wb.messages.append(session_id, "assistant", completion.content, group_id=group_id,
                                            tool_calls=completion.tool_calls, parsing_strategy=strategy_tag)
            yield AssistantStored(plan.plan_id, message)
            self.traces.record_call(plan_id=plan.plan_id, session_id=session_id, group_id=group_id, round=round_no,
                                    provider=self.client.provider, model=completion.model, status="ok",
                                    finish_reason=completion.finish_reason, assistant_message_id=message.id,
                                    tools_offered=len(tools))
            if completion.content:
                assistant_texts.append(completion.content)
                reply = completion.content
                block = extract_state(completion.content)
                if block:
                    wb.memory.set_state(session_id, block)
                    state_block = block
                    yield StateUpdated(session_id, block)
                    opens = task_from_goal(wb.tasks.current(session_id), state_fields(block).get("Goal", ""))
                    if opens is not None:  # the model's goal names the task from this turn on
                        wb.tasks.start(session_id, opens, first_group=group_id, opened_by="state")

            if not completion.tool_calls:
                if round_no and not tools and not completion.content.strip():
                    status = "failed"  # the last call offered no tools and the model still said nothing
                    error_line = (f"the model gave no answer after {llm.max_tool_rounds} tool rounds "
                                  "(llm.max_tool_rounds); ask a narrower question or raise the limit")
                    yield TurnFailed(error_line, "tool_limit", None)
                break
            run_tools = bool(tools) and not cancel.cancelled
            for call in completion.tool_calls:
                if not run_tools or cancel.cancelled:
                    note = CANCELLED_RESULT if cancel.cancelled else CAP_REACHED_RESULT
                    stored = wb.messages.append(session_id, "tool", note, group_id=group_id, tool_call_id=call.id,
                                               tool_name=call.name, parsing_strategy=strategy_tag)
                    self._trace_tool(plan.plan_id, session_id, group_id, call, False, message, stored, 0.0)
                    yield ToolFinished(plan.plan_id, call, False, stored, 0.0)
                    continue
                yield ToolStarted(plan.plan_id, call)
                started = time.perf_counter()
                outcome = toolbox.run(call)
                elapsed = (time.perf_counter() - started) * 1000.0
                stored = wb.messages.append(session_id, "tool", outcome.content, group_id=group_id,
                                           tool_call_id=call.id, tool_name=call.name, parsing_strategy=strategy_tag)
                self._trace_tool(plan.plan_id, session_id, group_id, call, outcome.ok, message, stored, elapsed)
                for suggestion in outcome.suggestions:
                    self.traces.add_suggestion(session_id, suggestion.target, suggestion.reason, suggestion.source,
                                               plan.plan_id)
                yield ToolFinished(plan.plan_id, call, outcome.ok, stored, elapsed)
            if cancel.cancelled:
                status, error_line = "cancelled", "cancelled by the user"
                yield TurnCancelled(None)
                break
            if not run_tools:
                if not completion.content.strip():  # the rounds ran out before the model answered
                    status = "failed"
                    error_line = (f"the model was still calling tools after {llm.max_tool_rounds} tool rounds "
                                  "(llm.max_tool_rounds) and gave no answer; ask a narrower question or raise "
                                  "the limit")
                    yield TurnFailed(error_line, "tool_limit", None)
                break

        # Reflection
        if not refused:
            result_reflection = reflection.reflect(
                wb, session_id, group_id,
                plans=tuple(plans),
                user_text=text,
                assistant_texts=tuple(assistant_texts),
                usage=tuple(usage_checks),
                config=self.config,
                code=self.code,
            )
            yield ReflectionDone(result_reflection)
        yield TurnFinished(session_id, group_id, status, reply, tuple(plan_ids),
                           usage_checks[-1] if usage_checks else None, state_block, error_line)

    def rebuild_state(self, session_id: str, *, cancel: CancelToken | None = None) -> Iterator[TurnEvent]:
        """``/context rebuild``: ask the model for a fresh ``### STATE`` from the current window.

        The request is a plan for the rebuild prompt as a pending user turn (not stored in the
        history); the plan and its usage are stored, and the reply's state block replaces the
        session's. No tools are offered.
        """
        cancel = cancel or CancelToken()
        wb = self.workbench
        plan = wb.planning.plan(PlanRequest(session_id, REBUILD_PROMPT, store=True))
        yield PlanReady(plan, 0)
        yield CallStarted(plan.plan_id, 0, self.client.model, False)
        result = CallResult()
        request = ChatRequest(messages=tuple(plan.messages()), plan=plan, max_tokens=self._reply_cap(plan.used_tokens),
                              previous=self._previous_request(session_id))
        yield from stream_call(self.client, wb.messages, self.config.llm, request, cancel, result)
        if result.completion is not None:
            self._previous[session_id] = PreviousRequest(request.messages, request.tools)
        check = None
        block = None
        status, error_line = "ok", ""
        if result.completion is None:
            status = "cancelled" if result.cancelled else "failed"
            error_line = "cancelled by the user" if result.cancelled else (result.error.reason if result.error else "")
            if result.cancelled:
                yield TurnCancelled(None)
            else:
                yield TurnFailed(error_line, result.error.kind if result.error else "connection", None)
        else:
            completion = result.completion
            check = self._record_usage(plan.plan_id, plan.used_tokens, completion)
            yield UsageRecorded(check)
            block = extract_state(completion.content)
            if block:
                wb.memory.set_state(session_id, block)
                yield StateUpdated(session_id, block)
            else:
                status, error_line = "failed", "the model's reply had no ### STATE block; the state is unchanged"
                yield TurnFailed(error_line, "request", None)
        self.traces.record_call(plan_id=plan.plan_id, session_id=session_id, group_id=0, round=0,
                                provider=self.client.provider, model=self.client.model,
                                status=status,
                                error=error_line)
        yield TurnFinished(session_id, 0, status, result.completion.content if result.completion else result.text,
                           (plan.plan_id,), check, block, error_line)

    # -- internals ----------------------------------------------------------------------------

    def _previous_request(self, session_id: str) -> PreviousRequest | None:
        """The session's last request that got a reply, for a client that places prompt-cache breakpoints
        (``uses_previous_request``): this runner's, or the last one the store records (its plan's messages and the
        tools that round offered)."""
        if not getattr(self.client, "uses_previous_request", False):
            return None
        if session_id not in self._previous:
            call = self.traces.last_call(session_id)
            if call is None:
                return None
            try:
                plan = self.workbench.plans.get(call.plan_id)
            except UnknownPlan:  # the plan went with what was deleted since: nothing to share
                return None
            tools = offered_tools(self.config.llm, call.round, True) if call.tools_offered else ()
            self._previous[session_id] = PreviousRequest(tuple(plan.messages()), tuple(tools))
        return self._previous[session_id]

    def _reply_cap(self, prompt_tokens: int) -> int:
        """``max_tokens`` for a call: ``llm.max_reply_tokens``, or what the context window has left after the
        prompt when that is less (an endpoint refuses a request whose prompt and cap exceed its window)."""
        llm = self.config.llm
        return max(1, min(llm.max_reply_tokens, llm.context_limit - prompt_tokens))

    def _record_usage(self, plan_id: str, estimated: int, completion: Any) -> UsageCheck:
        """Store the provider's prompt tokens against the plan's estimate and say whether they disagree."""
        usage = completion.usage
        reported = usage.prompt_tokens
        self.workbench.plans.record_usage(plan_id, estimated, reported, completion.model,
                                          completion=usage.completion_tokens, cache_read=usage.cache_read_tokens,
                                          cache_write=usage.cache_write_tokens)
        llm = self.config.llm
        return reflection.check_usage(plan_id, estimated, reported, completion.model, llm.usage_mismatch_ratio,
                                      completion=usage.completion_tokens,
                                      price=llm.price_for_model(self.client.model, completion.model),
                                      cache_read=usage.cache_read_tokens, cache_write=usage.cache_write_tokens)


    def _trace_tool(self, plan_id: str, session_id: str, group_id: int, call: ToolCall, ok: bool,
                    call_message: Message, result_message: Message, elapsed_ms: float) -> None:
        self.traces.record_tool(plan_id=plan_id, session_id=session_id, group_id=group_id, tool_call_id=call.id,
                                name=call.name, arguments=call.arguments, ok=ok, call_message_id=call_message.id,
                                result_message_id=result_message.id, result_chars=len(result_message.content),
                                duration_ms=elapsed_ms)
