"""Slim tool definitions on request: which tool definitions a proxied conversation sends and has never called,
and what leaving them out saves and costs the prompt cache, worked out before anything is set (the preview of
:func:`service.proxy.steer_cost.preview_steer`, with those drops weighed). Nothing here drops anything: the
user sets the drop (``ctxbench policy slim --yes``: the policy's ``drop tool:*``, which keeps every tool a
conversation calls)."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.service.proxy.steer_cost import SteerPreview, preview_steer
from ctxbench.service.proxy.wire import parse_request
from ctxbench.service.proxy.wire_parts import WireError
from ctxbench.service.workbench import Workbench

SLIM_RULE = "tool:*"  # the policy drop that slims every conversation's tool list (a called tool is kept)


@dataclass(frozen=True)
class SlimOffer:
    """The tool definitions a conversation's latest request sent and never called, and what dropping them does."""

    session_id: str
    tools: tuple[str, ...]  # their item ids (tool:NAME)
    tokens: int  # their tokens in each request
    preview: SteerPreview | None  # the next request without them (None: the latest request cannot be read)

    def text(self) -> str:
        if not self.tools:
            return f"{self.session_id}: every tool definition it sends has been called; nothing to slim"
        names = ", ".join(t.partition(":")[2] for t in self.tools)
        lines = [f"{self.session_id}: {len(self.tools)} tool definition{'s' if len(self.tools) != 1 else ''} never "
                 f"called ({self.tokens:,} tok each request): {names}"]
        if self.preview is not None:
            lines.extend(f"  {line}" for line in self.preview.cost.lines())
        return "\n".join(lines)


def slim_offer(wb: Workbench, session_id: str, *, proxy_steers: bool = True) -> SlimOffer | None:
    """What slimming the tool list of conversation ``session_id`` would do, or None before its first request."""
    latest = wb.proxy.latest_exchange(session_id)
    if latest is None or not latest.plan_id:
        return None
    body, _upstream = wb.proxy.bodies(latest.id)
    try:
        request = parse_request(latest.provider, body, wb.tokenizer, latest.path)
    except WireError:
        return None
    called = {f"tool:{p.tool_name}" for m in request.messages for p in m.parts if p.kind == "tool_call"}
    plan = wb.plans.get(latest.plan_id)
    unused = [i for i in plan.included if i.section == "tools" and i.id not in called]
    ids = tuple(i.id for i in unused)
    preview = preview_steer(wb, session_id, proxy_steers=proxy_steers, extra_drops=frozenset(ids)) if ids else None
    return SlimOffer(session_id, ids, sum(i.tokens for i in unused), preview)
