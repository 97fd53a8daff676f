"""Findings: waste in a proxied conversation, flagged as it happens, each with the steer that would remove it
and what that steer saves and costs (:func:`steer_cost.preview_steer` with the steer weighed, nothing
stored):

- ``repeated_result``: a large tool result of a past turn sent in each of the latest requests;
- ``unused_tools``: tool definitions sent with every request that the conversation has never called;
- ``repeated_block``: the same tool result or file sent twice in one request (the older copies can go);
- ``overflow``: at the recent growth a request, the request outgrows the budget (the context window) within
  ``proxy.overflow_requests`` requests; the largest past tool results are the steer.

Only what steering may drop is suggested: never the turn in progress, never a tool the conversation calls.
"""
from __future__ import annotations

import hashlib
import math

from ctxbench.records.item_refs import tool_name
from ctxbench.records.plans import ContextPlan, PlanItem
from ctxbench.records.proxy_cost import Finding
from ctxbench.service.proxy.calibration import calibrated_items, calibration_for
from ctxbench.service.proxy.steer_cost import preview_steer
from ctxbench.service.proxy.wire import parse_request
from ctxbench.service.proxy.wire_parts import WireError
from ctxbench.service.workbench import Workbench

OVERFLOW_STEER_ITEMS = 3  # past tool results an overflow finding suggests dropping, largest first


def _droppable(item: PlanItem) -> bool:
    """A past turn's item the client sent (not the turn in progress, not pinned)."""
    return item.included and item.reason == "client_sent" and item.kind in ("tool_atom", "attached_file")


def _content(item: PlanItem) -> str:
    if item.kind == "tool_atom":
        return "\n".join(str(m.get("content", "")) for m in item.messages if m.get("role") == "tool")
    return "\n".join(str(m.get("content", "")) for m in item.messages)


def findings(wb: Workbench, session_id: str, *, proxy_steers: bool) -> tuple[Finding, ...]:
    """The waste in the conversation's latest request, with what each suggested steer saves and costs."""
    p = wb.config.proxy
    exchanges = wb.proxy.exchanges(session_id)
    if not exchanges or not exchanges[-1].plan_id:
        return ()
    latest = exchanges[-1]
    plan = wb.plans.get(latest.plan_id)
    dropped = wb.proxy.drops(session_id)
    recent = [wb.plans.get(e.plan_id) for e in exchanges[-p.finding_repeats:] if e.plan_id]
    found: list[tuple[str, tuple[str, ...], str, int]] = []

    # a large past tool result sent again and again
    if len(recent) >= p.finding_repeats:
        sent_in_all = set.intersection(*({i.id for i in r.included} for r in recent))
        for item in plan.included:
            if _droppable(item) and item.kind == "tool_atom" and item.tokens >= p.finding_result_tokens \
                    and item.id in sent_in_all and item.id not in dropped:
                found.append(("repeated_result", (item.id,),
                              f"{item.label} ({item.tokens:,} tok) sent in each of the last {len(recent)} requests",
                              item.tokens))

    # tool definitions never called
    if len(exchanges) >= p.finding_unused_requests:
        body, _upstream = wb.proxy.bodies(latest.id)
        try:
            request = parse_request(latest.provider, body, wb.tokenizer, latest.path)
        except WireError:
            request = None
        if request is not None:
            called = {q.tool_name for m in request.messages for q in m.parts if q.kind == "tool_call"}
            unused = [i for i in plan.included if i.section == "tools" and tool_name(i.id) not in called
                      and i.id not in dropped]
            if unused:
                tokens = sum(i.tokens for i in unused)
                found.append(("unused_tools", tuple(i.id for i in unused),
                              f"{len(unused)} tool definition{'s' if len(unused) != 1 else ''} never called in "
                              f"{len(exchanges)} requests ({tokens:,} tok each request)", tokens))

    # the same tool result or file twice in one request
    seen: dict[str, PlanItem] = {}
    for item in sorted(plan.included, key=lambda i: i.order, reverse=True):  # the newest copy is kept
        if item.kind not in ("tool_atom", "attached_file") or item.tokens < p.finding_block_tokens:
            continue
        text = _content(item)
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        if not text.strip():
            continue
        if key in seen and _droppable(item) and item.id not in dropped:
            found.append(("repeated_block", (item.id,),
                          f"{item.label} repeats {seen[key].label} in the same request ({item.tokens:,} tok)",
                          item.tokens))
        seen.setdefault(key, item)

    # an overflow coming
    overflow = _overflow(wb, exchanges, plan)
    if overflow is not None:
        message, ids = overflow
        found.append(("overflow", ids, message, sum(i.tokens for i in plan.included if i.id in ids)))

    out = []
    for kind, ids, message, tokens in found:
        steer = f"drop {', '.join(ids)}" if ids else ""
        saved = 0
        if ids:
            preview = preview_steer(wb, session_id, proxy_steers=proxy_steers, extra_drops=frozenset(ids))
            if preview is not None and preview.cost.changed:
                saved = preview.cost.saved_tokens
                steer = f"{steer}: " + "; ".join(preview.cost.lines()[:2])
        out.append(Finding(kind, ids, message, tokens, saved, steer))
    return tuple(out)


def _overflow(wb: Workbench, exchanges, plan: ContextPlan) -> tuple[str, tuple[str, ...]] | None:
    """When the request outgrows the budget within ``proxy.overflow_requests`` requests at its recent growth: the
    finding's words and the past tool results it suggests dropping (largest first)."""
    p = wb.config.proxy
    window = [e for e in exchanges[-(p.overflow_window + 1):] if e.plan_id]
    if len(window) < 2:
        return None
    sizes = [wb.plans.get(e.plan_id).used_tokens for e in window]
    growth = (sizes[-1] - sizes[0]) / (len(sizes) - 1)
    calibration = calibration_for(wb, exchanges[-1].model, before=None)
    ratio = calibration.ratio if calibration is not None else 1.0
    # the meter's calibrated figure (images as the provider counts them, the rest scaled)
    used = sum(calibrated_items(plan, calibration).values()) if calibration is not None else plan.used_tokens
    left = plan.budget - used
    if growth <= 0:
        return None
    requests = max(0, math.ceil(left / (growth * ratio)))
    if requests > p.overflow_requests:
        return None
    largest = sorted((i for i in plan.included if _droppable(i) and i.kind == "tool_atom"),
                     key=lambda i: i.tokens, reverse=True)[:OVERFLOW_STEER_ITEMS]
    counted = f"{used:,} tok{' (calibrated)' if calibration is not None else ''}"
    when = "now" if left <= 0 else f"in ~{requests} request{'s' if requests != 1 else ''}"
    return (f"overflow {when}: {counted} of {plan.budget:,}, growing {round(growth * ratio):,} tok a request",
            tuple(i.id for i in largest))
