"""One policy across clients, and drops that wait for the prompt cache.

:func:`with_policy` adds the rules set once for every proxied conversation (``proxy_policy``) to one
conversation's controls, whatever assistant sends it: dropped tool definitions (by name or a ``*`` pattern; a
tool the conversation calls is still kept), drops of any other item by what it is (a tool's results, an anatomy
kind such as the skills list, a system block: :mod:`service.proxy.rules`), a budget for tool results, sticky pins (added back to the system prompt of any request that
does not carry them — after a client compacts its history too), a Context Mode where the conversation has
none of its own, and the budget where the conversation keeps the proxy's default.

:func:`due_deferred` says which of a conversation's deferred drops are due: a drop the user held back so as
not to break the provider's prompt cache applies once the request breaks the cache anyway before the item
(it differs from the previous answered request in an earlier block) or once the cache has expired (no
answered request for ``proxy.cache_ttl_s`` seconds).
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from ctxbench.records.item_refs import AtomRef, FileRef, ItemRef, ToolRef
from ctxbench.records.plans import Pin
from ctxbench.records.proxy import ProxyExchange, WireRequest
from ctxbench.records.proxy_cost import PolicyRule
from ctxbench.service.proxy.plan import SteerControls
from ctxbench.service.proxy.plan_items import LABEL_CHARS
from ctxbench.service.proxy.rules import check_drop_target
from ctxbench.service.proxy.cache_view import cache_blocks, shared_prefix
from ctxbench.service.workbench import Workbench

POLICY_PIN_ID = "policy{n}"  # the id of a policy pin (its plan item is ``pin:policy{n}``)
TEXT_PIN = "text:{label}"  # the target of a pinned text that no request's item holds (added to every request)
RULE_KINDS = "drop TARGET | pin ITEM | mode MODE | budget N | results N | remove N"


def add_rule(wb: Workbench, kind: str, target: str) -> PolicyRule:
    """Add a rule for every proxied conversation: ``drop`` (:data:`service.proxy.rules.DROP_TARGETS`), ``mode``,
    ``budget`` (the meter's limit) or ``results`` (the most tokens of tool results a request carries); ValueError
    with a one-line reason for anything else. (Pins: :func:`pin_text`, or a watch's ``everywhere pin``.)"""
    if kind == "drop":
        return wb.proxy_policy.add("drop", check_drop_target(target))
    if kind == "mode":
        if target not in wb.config.planner.mode_names:
            raise ValueError(f"unknown mode {target!r}; known: {', '.join(wb.config.planner.mode_names)}")
        return wb.proxy_policy.add("mode", target)
    if kind in ("budget", "results"):
        if not target.isdigit() or int(target) <= 0:
            raise ValueError(f"{kind} is a number of tokens, got {target!r}")
        return wb.proxy_policy.add(kind, str(int(target)))
    raise ValueError(f"expected {RULE_KINDS}")


def pin_text(wb: Workbench, text: str, label: str) -> PolicyRule:
    """Pin ``text`` in every proxied request of every client: it is added to each request's system prompt."""
    if not text.strip():
        raise ValueError("a pinned text needs some text")
    label = label or " ".join(text.split())[:LABEL_CHARS]
    return wb.proxy_policy.add("pin", TEXT_PIN.format(label=label), label=label, content=text)


def with_policy(wb: Workbench, controls: SteerControls, session_id: str) -> SteerControls:
    """``controls`` of conversation ``session_id`` with the policy's rules added (its own mode and budget win). A
    pinned item of one conversation is carried there by its id; in any other, only a file's path names the same
    thing, so its text is added back to every request."""
    rules = wb.proxy_policy.rules()
    if not rules:
        return controls
    drops = frozenset(r.target for r in rules if r.kind == "drop" and r.target.startswith("tool:"))
    drop_rules = tuple(r.target for r in rules if r.kind == "drop" and not r.target.startswith("tool:"))
    own = {p.target for p in controls.pins}
    pins = tuple(Pin(POLICY_PIN_ID.format(n=r.n), _pin_target(r.n, r.target, r.origin, session_id), "sticky",
                     label=r.label or r.target, content=r.content, source="policy")
                 for r in rules if r.kind == "pin" and r.target not in own)
    mode, mode_set = controls.mode, controls.mode_set
    budget, result_budget = controls.budget, controls.result_budget
    for rule in rules:
        if rule.kind == "mode" and not controls.mode_set:
            mode, mode_set = rule.target, True
        elif rule.kind == "budget" and controls.budget == wb.config.proxy.budget:
            budget = int(rule.target)
        elif rule.kind == "results":
            result_budget = int(rule.target)
    return replace(controls, dropped_items=controls.dropped_items | drops, pins=(*controls.pins, *pins), mode=mode,
                   mode_set=mode_set, budget=budget, drop_rules=(*controls.drop_rules, *drop_rules),
                   result_budget=result_budget)


def _pin_target(n: int, target: str, origin: str, session_id: str) -> str:
    return target if target.startswith("path:") or origin == session_id else f"policy:{n}"


def _item_block(request: WireRequest, blocks: tuple[tuple[str, int], ...], item_id: str) -> tuple[int, str] | None:
    """The first block (cache order) of ``item_id`` in ``request`` (whose blocks are ``blocks``) and the hash of
    that block, or None."""
    ref = ItemRef.parse(item_id)
    if isinstance(ref, ToolRef):
        n = next((k for k, t in enumerate(request.tools) if t.name == ref.name), None)
        return (n, blocks[n][0]) if n is not None else None
    head = len(blocks) - len(request.messages)
    for k, m in enumerate(request.messages):
        if isinstance(ref, AtomRef):
            if any(p.tool_call_id == ref.part for p in m.parts):
                return head + k, m.hash
        elif isinstance(ref, FileRef) and m.index == ref.message:
            return head + k, m.hash
    return None


def due_deferred(wb: Workbench, session_id: str, sent: WireRequest, previous: tuple[tuple[str, int], ...] | None,
                 previous_exchange: ProxyExchange | None, ttl_s: float) -> tuple[str, ...]:
    """The deferred drops of the conversation that apply to the request ``sent`` (as steered without them)."""
    deferred = wb.proxy_policy.deferred(session_id)
    if not deferred:
        return ()
    expired = previous is None or previous_exchange is None or _age_s(previous_exchange) > ttl_s
    blocks = cache_blocks(sent)  # hashed once, not again for each deferred drop
    shared, _tokens = shared_prefix(previous, blocks)
    due = []
    for item_id in deferred:
        found = _item_block(sent, blocks, item_id)
        if found is None:
            wb.proxy_policy.undefer(session_id, item_id)  # the client no longer sends it: nothing left to drop
            continue
        if expired or found[0] >= shared:
            due.append(item_id)
    return tuple(due)


def _age_s(exchange: ProxyExchange) -> float:
    stamp = exchange.finished_at or exchange.created_at
    try:
        then = datetime.fromisoformat(stamp)
    except ValueError:
        return float("inf")
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    return (datetime.now(timezone.utc) - then).total_seconds()
