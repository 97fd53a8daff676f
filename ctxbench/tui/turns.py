"""One turn, as the workbench runs it: store the user's message, plan, ask the model, store the reply.

``run_turn`` is the single seam between the workbench and the model loop. When the LLM
layer's tool loop exists (``ctxbench.llm.loop.TurnRunner``) it runs the turn; otherwise the
client from ``ctxbench.llm.providers`` (the offline model by default) streams one reply; and
if neither is installed, a small deterministic reply that describes the plan stands in.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Iterator

from ctxbench.tui.bridge import TurnOutcome, TurnSink

if TYPE_CHECKING:  # pragma: no cover
    from ctxbench.planner.records import ContextPlan
    from ctxbench.tui.bridge import Bridge


def _optional(module: str, attr: str) -> Any:
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None


def run_turn(bridge: "Bridge", text: str, sink: TurnSink, cancel: Any) -> TurnOutcome:
    runner_cls = _optional("ctxbench.llm.loop", "TurnRunner")
    if runner_cls is not None:
        return run_with_loop(bridge, runner_cls, text, sink, cancel)
    wb, sid = bridge.wb, bridge.session_id
    with bridge.lock:
        family = wb.settings(sid).provider_family
        user = wb.append_message(sid, "user", text, parsing_strategy=family)
    sink.user_stored(user)
    with bridge.lock:
        view = bridge.plan(store=True, group_id=user.group_id)
    sink.planned(view)
    return stream_reply(bridge, view.plan, user.group_id, sink, cancel)


def run_with_loop(bridge: "Bridge", runner_cls: Any, text: str, sink: TurnSink, cancel: Any) -> TurnOutcome:
    """The LLM layer's tool loop (Intent → Context → Action → Feedback → Reflection), event by event."""
    from ctxbench.llm import events as ev
    from ctxbench.llm.providers import make_client, resolve_llm_config

    wb = bridge.wb
    client = make_client(resolve_llm_config(bridge.config.llm))
    runner = runner_cls(wb, client, bridge.config, code=getattr(bridge, "code_context", None))
    reply = None
    error = ""
    cancelled = False
    group_id = None
    for event in runner.run(bridge.session_id, text, cancel=cancel):
        if isinstance(event, ev.TurnStarted):
            group_id = event.group_id
            sink.user_stored(event.user_message)
        elif isinstance(event, ev.PlanReady):
            with bridge.lock:
                sink.planned(bridge.view_of(event.plan, group_id))
        elif isinstance(event, ev.ReplyDelta):
            sink.text(event.text)
        elif isinstance(event, ev.AssistantStored):
            reply = event.message
            if event.message.tool_calls:
                sink.tool(event.message)
        elif isinstance(event, ev.ToolStarted):
            sink.status(f"running {event.call.name}…")
        elif isinstance(event, ev.ToolFinished):
            sink.tool(event.message)
        elif isinstance(event, ev.Retrying):
            sink.status(f"retrying in {event.wait_s:.0f}s: {event.reason}")
        elif isinstance(event, ev.ReflectionDone):
            bridge.reflection = event.reflection
        elif isinstance(event, ev.TurnFailed):
            error = event.reason
        elif isinstance(event, ev.TurnCancelled):
            cancelled = True
        elif isinstance(event, ev.TurnFinished):
            error = error or (event.error if event.status == "failed" else "")
            cancelled = cancelled or event.status == "cancelled"
    return TurnOutcome(reply, error, cancelled)


def stream_reply(bridge: "Bridge", plan: "ContextPlan", group_id: int, sink: TurnSink, cancel: Any) -> TurnOutcome:
    """Ask the configured model for a reply to ``plan`` and store it in ``group_id``."""
    wb, sid = bridge.wb, bridge.session_id
    chunks: list[str] = []
    error = ""
    cancelled = False
    try:
        for fragment in _reply_stream(bridge, plan, cancel):
            chunks.append(fragment)
            sink.text(fragment)
    except Exception as exc:  # noqa: BLE001 - the model's failure is shown in the chat, not raised
        kind = getattr(exc, "kind", "")
        partial = getattr(exc, "partial", "")
        if partial and not chunks:
            chunks.append(partial)
        cancelled = kind == "cancelled"
        error = "" if cancelled else (getattr(exc, "reason", "") or f"{type(exc).__name__}: {exc}")
    if not cancelled and cancel is not None and getattr(cancel, "cancelled", False):
        cancelled = True
    reply = None
    content = "".join(chunks)
    if content or not error:
        with bridge.lock:
            reply = wb.append_message(sid, "assistant", content, group_id=group_id,
                                      partial=bool(cancelled or error))
    return TurnOutcome(reply, error, cancelled)


def _reply_stream(bridge: "Bridge", plan: "ContextPlan", cancel: Any) -> Iterator[str]:
    make_client = _optional("ctxbench.llm.providers", "make_client")
    resolve = _optional("ctxbench.llm.providers", "resolve_llm_config")
    request_cls = _optional("ctxbench.llm.client", "ChatRequest")
    client = None
    if make_client and resolve and request_cls:
        try:
            client = make_client(resolve(bridge.config.llm))
        except ImportError:  # the offline model is not there yet
            client = None
    if client is None:
        yield from _describe_plan(plan, cancel)
        return
    text_delta = _optional("ctxbench.llm.client", "TextDelta")
    request = request_cls(messages=tuple(plan.messages()), plan=plan)
    for event in client.stream(request, cancel):
        if text_delta is not None and isinstance(event, text_delta):
            yield event.text


def _describe_plan(plan: "ContextPlan", cancel: Any) -> Iterator[str]:
    """A deterministic stand-in reply: what the plan holds (replaced by the offline model)."""
    included = plan.included
    cards = [i.label for i in included if i.kind == "symbol_card"]
    history = [i for i in included if i.section == "history"]
    sections = ", ".join(f"{name} {tokens:,}" for name, tokens in plan.sections if tokens)
    lines = [
        f"**Offline reply** for plan `{plan.plan_id}` ({plan.mode}, {plan.used_tokens:,} / {plan.budget:,} tokens).",
        "",
        f"- sections: {sections or 'none'}",
        f"- history items: {len(history)}; excluded candidates: {len(plan.excluded)}",
    ]
    if cards:
        lines.append(f"- symbol cards: {', '.join(cards[:6])}" + (" …" if len(cards) > 6 else ""))
    if plan.over_budget:
        lines.append(f"- over budget: {plan.over_budget_reason}")
    text = "\n".join(lines)
    for word in text.split(" "):
        if cancel is not None and getattr(cancel, "cancelled", False):
            return
        yield word + " "
