"""A proxied request as a ContextPlan, and steering: the user's drops, pins and mode applied to it.

Every request through the proxy becomes a plan whose items are what the client sent, one by one, with
their tokens and the bytes of the body they hold (every byte in exactly one item): the system blocks
(``system``), each tool definition (``tools``), the assistant's scaffolding — reminder blocks, memory files,
skills and todo lists, environment context, few-shot examples, a repository map (``scaffold``, one item per
block of its kind, :mod:`service.proxy.anatomy`) — each turn's own words (``history``), each tool call with
its result (``tool_results``, one atom), each attached file and each image (``files``; an image counted as its
provider bills it, :mod:`.images`), and the body's model, options and JSON syntax (``request_options``: bytes, no
tokens). With steering on, the user's controls for the conversation change the outgoing request:

- a dropped turn leaves with everything in it; a dropped atom leaves whole (the call and its result), so the
  upstream never sees a result without its call or a call without its result; the turn in progress (the
  last one) is never dropped;
- a pinned item the request carries is kept whole; a sticky pin the request no longer carries (the client
  compacted its history) is added back to the system prompt;
- the Context Mode picks the truncation tiers (``proxy.truncate_tiers``) that cut long tool results as the
  planner's tiers do (the newest results of the turn in progress, its older ones, past turns' results), but
  only once the user has set the conversation's mode: the default mode is nobody's request, and steering
  changes only what the user asked for. With nothing asked, the request goes upstream byte for byte.

Every change is an excluded item or an item's detail in the plan, with its reason, and a line in the
exchange's ``changes``. Pure: no store, no I/O. The items come from :mod:`.plan_items`; the passes that drop, cut,
pin and budget them are :mod:`.steer_passes`.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ctxbench.config import ProxyConfig, TruncationConfig
from ctxbench.records.item_refs import tool_name
from ctxbench.records.plans import ContextPlan, Pin, PlanItem, plan_id_of
from ctxbench.records.proxy import WireRequest
from ctxbench.records.retrieval import EMPTY_RETRIEVAL_SET
from ctxbench.records.vocab import PROXY_SECTIONS
from ctxbench.service.proxy.edits import Edits
from ctxbench.service.proxy.plan_items import ItemBuilder, plan_item
from ctxbench.service.proxy.rules import called_tool, item_rule, remove_parts
from ctxbench.service.proxy.steer_passes import (dropped_tool, keep_results_within, pinned_items, readd_pins,
                                                 tiers_by_atom, truncate_result)
from ctxbench.tokens import Tokenizer

PROXY_STRATEGY = "proxy"  # a proxied plan's strategy: the client chose the history, not a planner
STEERING_NOTE = "proxy steering: on"  # a plan's note when the proxy ran with --steer


@dataclass(frozen=True)
class SteerControls:
    """The user's controls for one proxied conversation."""

    steer: bool  # the proxy runs with --steer and the conversation is not switched to pass-through
    mode: str
    budget: int
    dropped_groups: frozenset[int] = frozenset()
    dropped_items: frozenset[str] = frozenset()
    pins: tuple[Pin, ...] = ()
    proxy_steers: bool = False  # the proxy runs with --steer (``steer`` is off while the user switched it off)
    mode_set: bool = False  # the user set this conversation's mode (only then does the mode cut tool results)
    drop_rules: tuple[str, ...] = ()  # the policy's drops by what an item is (kind:…, result:…, system:…)
    result_budget: int = 0  # the policy's most tokens of tool results a request (0: no such rule)


# what the proxy's start-up line says --steer does
STEER_SCOPE = ("steering on: only what you ask changes a request (your drops, your pins, a Context Mode you set "
               "for a conversation, the rules of `ctxbench policy`); nothing asked, nothing changed")


def steering_summary(controls: SteerControls, proxy: ProxyConfig) -> str:
    """What steering will change in the conversation's next request, in one line."""
    if not controls.proxy_steers:
        return "steering off (the proxy runs without --steer): requests go upstream as sent"
    if not controls.steer:
        return "pass-through for this conversation: requests go upstream as sent"
    asked = []
    drops = sum(1 for d in controls.dropped_items if "*" not in d) + len(controls.dropped_groups)
    if drops:
        asked.append(f"leaves out {drops} dropped item{'s' if drops != 1 else ''}")
    patterns = sum(1 for d in controls.dropped_items if "*" in d)
    if patterns:
        asked.append(f"leaves out tool definitions matching {patterns} pattern{'s' if patterns != 1 else ''}")
    if controls.drop_rules:
        asked.append(f"leaves out what the policy drops ({', '.join(controls.drop_rules)})")
    if controls.result_budget:
        asked.append(f"keeps tool results within {controls.result_budget:,} tok a request (the policy's; oldest "
                     "left out first)")
    pins = sum(1 for p in controls.pins if p.kind == "sticky" and p.content)
    if pins:
        asked.append(f"adds back {pins} sticky pin{'s' if pins != 1 else ''} the client stops sending")
    tiers = proxy.tiers_for(controls.mode) if controls.mode_set else ()
    if tiers:
        asked.append(f"cuts long tool results ({', '.join(tiers)} tiers: mode {controls.mode}, set by you)")
    if not asked:
        return "steering on, nothing asked: requests go upstream as sent"
    return "steering " + "; ".join(asked)


@dataclass(frozen=True)
class SteeredPlan:
    plan: ContextPlan
    edits: Edits = field(compare=False)
    changes: tuple[str, ...]


def steer_plan(request: WireRequest, session_id: str, groups: tuple[int, ...],
               message_ids: tuple[tuple[int, ...], ...], controls: SteerControls, *, proxy: ProxyConfig,
               truncation: TruncationConfig, tokenizer: Tokenizer) -> SteeredPlan:
    """The plan of ``request`` and, when ``controls.steer``, the edits that apply the user's controls."""
    b = ItemBuilder(request, groups, message_ids, tokenizer)
    b.finish_labels()
    edits = Edits()
    changes: list[str] = []
    pinned = pinned_items(b, controls.pins)
    tiers = set(proxy.tiers_for(controls.mode)) if controls.steer and controls.mode_set else set()
    tier_of = tiers_by_atom(b, truncation)
    out: list[PlanItem] = []
    called = {p.tool_name for m in request.messages for p in m.parts if p.kind == "tool_call"}
    held: list[str] = []  # drops steering did not make, and why
    for item in sorted(b.items.values(), key=lambda i: i.order):
        pin = pinned.get(item.id)
        if controls.steer and item.section == "tools" and dropped_tool(item.id, controls.dropped_items):
            name = tool_name(item.id) or ""
            if name in called:  # the upstream must know a tool the conversation has called
                held.append(f"kept {item.id}: you dropped it, but the conversation calls {name}")
            else:
                edits.remove.add(b.tool_locations[item.id])
                changes.append(f"left out {item.id} ({item.tokens:,} tok): a tool definition you dropped")
                out.append(plan_item(item, included=False, reason="dropped_by_user", pin=None,
                                     detail="tool definition dropped by the user"))
                continue
        rule = item_rule(controls.drop_rules, item.id, item.kind, called_tool(item.parts)) \
            if controls.steer and pin is None else ""
        if rule and rule.startswith("result:") and item.group == b.last_group:
            held.append(f"kept {item.id}: the policy drops {rule}, but the turn in progress works with it")
        elif rule:
            remove_parts(item.parts, edits)
            changes.append(f"left out {item.id} ({item.label}, {item.tokens:,} tok): the policy drops {rule}")
            out.append(plan_item(item, included=False, reason="dropped_by_user", pin=None,
                                 detail=f"dropped by the policy ({rule})"))
            continue
        dropped = controls.steer and pin is None and item.group and item.group != b.last_group and (
            item.group in controls.dropped_groups or item.id in controls.dropped_items)
        if dropped and item.kind != "history_atom" and item.group in controls.dropped_groups:
            why = f"turn {item.group} dropped"
        else:
            why = "dropped by the user"
        if dropped:
            remove_parts(item.parts, edits)
            changes.append(f"left out {item.id} ({item.label}, {item.tokens:,} tok): {why}")
            out.append(plan_item(item, included=False, reason="dropped_by_user", pin=pin, detail=why))
            continue
        tokens, detail = item.tokens, ""
        if item.kind == "tool_atom" and pin is None and tier_of.get(item.id) in tiers:
            tokens, detail = truncate_result(item, tier_of[item.id], truncation, tokenizer, edits, changes)
        reason = "pinned_sticky" if pin == "sticky" else f"pinned_{pin}" if pin else (
            "mandatory" if item.section in ("system", "tools") or item.group == b.last_group else "client_sent")
        out.append(plan_item(item, included=True, reason=reason, pin=pin, detail=detail, tokens=tokens,
                             replaced=edits.replace))
    if controls.steer and controls.result_budget:
        keep_results_within(b, controls.result_budget, out, edits, changes, held)
    notes = [f"proxied {request.provider} request to {request.model or 'the upstream'}"]
    if controls.steer:
        out.extend(readd_pins(b, controls.pins, pinned, edits, changes, tokenizer))
        mode = f"mode {controls.mode}, set by you" if controls.mode_set else "mode not set: no cuts"
        notes.append(f"steered ({len(changes)} change{'s' if len(changes) != 1 else ''}, {mode})"
                     if changes else f"steered: nothing to change ({mode})")
    else:
        notes.append("pass-through: forwarded as the client sent it"
                     + (" (switched off for this conversation)" if controls.proxy_steers else ""))
    if controls.proxy_steers:
        notes.append(STEERING_NOTE)
    notes.extend(changes)
    notes.extend(held)
    plan = _plan(request, session_id, controls, out, notes, edits, tokenizer.name)
    return SteeredPlan(plan, edits, tuple(changes))


def _plan(request: WireRequest, session_id: str, controls: SteerControls, items: list[PlanItem], notes: list[str],
          edits: Edits, tokenizer_name: str) -> ContextPlan:
    included = [i for i in items if i.included]
    excluded = [i for i in items if not i.included]
    ordered = sorted(included, key=lambda i: i.order)
    sections = {name: 0 for name in PROXY_SECTIONS}
    for i in ordered:
        sections[i.section] = sections.get(i.section, 0) + i.tokens
    used = sum(sections.values())
    pid = plan_id_of(canonical_proxy_inputs(request, session_id, controls, edits, tokenizer_name))
    over = used > controls.budget
    return ContextPlan(
        plan_id=pid, session_id=session_id, query=_query(request),
        mode=steered_mode(controls), strategy=PROXY_STRATEGY, budget=controls.budget, used_tokens=used,
        over_budget=over,
        over_budget_reason=(f"the client's request is {used - controls.budget:,} tokens over the budget "
                            "(the proxy never cuts a request to fit)") if over else "",
        sections=tuple(sections.items()), items=tuple(ordered + excluded), retrieval_set_id=EMPTY_RETRIEVAL_SET.id,
        tokenizer=tokenizer_name, estimated=tokenizer_name == "estimate", notes=tuple(notes))


def steered_mode(controls: SteerControls) -> str:
    """The Context Mode that shaped a proxied plan: the one the user set for the conversation while steering is
    on, else none (``""``) — the session's default mode is nobody's choice and changes nothing the proxy sends."""
    return controls.mode if controls.steer and controls.mode_set else ""


def canonical_proxy_inputs(request: WireRequest, session_id: str, controls: SteerControls, edits: Edits,
                           tokenizer_name: str) -> dict[str, object]:
    """The canonical form of every input of a proxied request's plan, for :func:`records.plans.plan_id_of` (the
    planner's recipe): the request body (as a digest), the conversation, the tokenizer that counted it, and the
    user's controls with the edits they made (the proxy's truncation settings enter through the edits)."""
    body = json.dumps(request.body, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return {
        "strategy": PROXY_STRATEGY, "session": session_id, "provider": request.provider,
        "body": hashlib.sha256(body).hexdigest(), "tokenizer": tokenizer_name,
        "steer": controls.steer, "proxy_steers": controls.proxy_steers, "mode": steered_mode(controls),
        "budget": controls.budget,
        "drops": sorted(controls.dropped_items), "dropped_groups": sorted(controls.dropped_groups),
        "pins": sorted([p.target, p.kind, p.content] for p in controls.pins),
        "edits": [sorted(map(str, edits.remove)), sorted([str(k), v] for k, v in edits.replace.items()),
                  list(edits.system_append)],
        # the policy's drops by kind and its budget for tool results, where set (inputs without them keep their id)
        **({"drop_rules": sorted(controls.drop_rules)} if controls.drop_rules else {}),
        **({"result_budget": controls.result_budget} if controls.result_budget else {}),
        **({"cuts": sorted([str(k), sorted(v)] for k, v in edits.cut.items())} if edits.cut else {}),
    }


def _query(request: WireRequest) -> str:
    for m in reversed(request.history):
        if m.role == "user":
            texts = [p.text for p in m.parts if p.kind == "text" and not p.scaffold]
            if texts:
                return texts[-1]
    return ""
