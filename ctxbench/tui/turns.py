"""One turn, as the workbench runs it, and ``/context rebuild``: the seam to the LLM layer's turn runner.

``run_turn`` drives ``ctxbench.llm.loop.TurnRunner.run`` (Intent → Context → Action → Feedback →
Reflection) and ``rebuild_state`` drives ``TurnRunner.rebuild_state``; both turn the runner's
events into the sink's callbacks, which the main screen turns into UI messages. Both run in a
worker thread; the runner is the session's one (``Bridge.runner``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from ctxbench.tui.bridge import TurnOutcome, TurnSink

if TYPE_CHECKING:  # pragma: no cover
    from ctxbench.tui.bridge import Bridge


def run_turn(bridge: "Bridge", text: str, sink: TurnSink, cancel: Any) -> TurnOutcome:
    """The user's turn with the tool loop, event by event."""
    return _drive(bridge, bridge.runner.run(bridge.session_id, text, cancel=cancel), sink)


def rebuild_state(bridge: "Bridge", sink: TurnSink, cancel: Any) -> TurnOutcome:
    """``/context rebuild``: the model writes the ``### STATE`` afresh from the current window.

    The reply streams to the sink; the new block is stored by the runner and reported through
    ``sink.state``. The rebuild prompt is not a turn of the history, so nothing else changes.
    """
    # its plan is the rebuild prompt's, not the session's next turn: the meter keeps the turn's plan
    outcome = _drive(bridge, bridge.runner.rebuild_state(bridge.session_id, cancel=cancel), sink, show_plans=False)
    return TurnOutcome(None, outcome.error, outcome.cancelled)


def _drive(bridge: "Bridge", events: Iterable[Any], sink: TurnSink, *, show_plans: bool = True) -> TurnOutcome:
    """Turn the runner's events into the sink's callbacks; the outcome is the last stored reply."""
    from ctxbench.records import turns as ev

    reply = None
    error = ""
    cancelled = False
    group_id = None
    for event in events:
        if isinstance(event, ev.TurnStarted):
            group_id = event.group_id
            sink.user_stored(event.user_message)
        elif isinstance(event, ev.PlanReady) and show_plans:
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
        elif isinstance(event, ev.UsageRecorded):
            sink.usage(event.usage)
        elif isinstance(event, ev.StateUpdated):
            sink.state(event.state_block)
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
