"""A proxied conversation opened in the workbench (``ctxbench open --watch``).

:class:`ProxyWatchSession` is a :class:`~ctxbench.service.session.WorkbenchSession` whose plans are the
requests the proxy recorded, not the planner's: :meth:`poll` hands the newest exchange with its stored
plan and the diff from the previous request's plan; :meth:`plan` is the latest request as the user's
controls would steer it now (so a drop, a pin or a mode change shows at once, before the next request).
Drops of single items (a tool call with its result, a file) are the proxy's own; drops of whole turns are
the session's, as everywhere. Pins of proxied items keep their text, so a pin can be added back after the
client stops sending it. :meth:`toggle_passthrough` is the switch back to pass-through.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ctxbench.records.item_refs import atom_call_id
from ctxbench.records.plans import ContextPlan, Pin
from ctxbench.records.proxy import CacheReport, ProxyExchange, WatchUpdate
from ctxbench.records.proxy_cost import BilledUsage, Finding, RequestCost
from ctxbench.records.retrieval import EMPTY_RETRIEVAL_SET
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.views import PlanView, SessionSnapshot
from ctxbench.service.proxy.plan import PROXY_STRATEGY, STEERING_NOTE, steer_plan, steering_summary
from ctxbench.service.proxy.steer_passes import CUT_DETAIL, PINNED_BLOCK
from ctxbench.service.proxy.calibration import calibration_line, plan_counts
from ctxbench.service.proxy.policy import add_rule
from ctxbench.service.proxy.findings import findings
from ctxbench.service.proxy.pricing import cost_line, request_cost, usage_line
from ctxbench.service.proxy.service import ProxyService, plan_diff
from ctxbench.service.proxy.steer_cost import SteerPreview, cache_estimate_line, preview_steer, readd_cost
from ctxbench.service.proxy.wire import parse_request
from ctxbench.service.proxy.wire_parts import WireError
from ctxbench.service.session import WorkbenchSession
from ctxbench.service.text import render_messages


@dataclass(frozen=True)
class WatchPoll:
    """A new (or newly finished) exchange: its update, the plan view to show and the session's history."""

    update: WatchUpdate
    view: PlanView
    snapshot: SessionSnapshot
    steering: str = ""  # what steering will change in the next request (the watch's status line)
    # per stored tool result message: what the upstream received of it in the latest request (the chat pane's
    # note: its size, cut by steering or sent whole, or left out), never the planner's tiers
    sent: dict[int, str] = field(default_factory=dict)
    cache: CacheReport | None = None  # the request's prompt-cache figures, estimated and reported
    cost: str = ""  # the request's price from its billed usage (or the billed tokens where the model has no price)
    counts: str = ""  # whether the request's token counts are calibrated for its model, and against the bill
    findings: tuple[Finding, ...] = ()  # waste in the request, each with what a steer would save and cost
    cached: str = ""  # the request's cached tokens by the provider's rule (breakpoints, prefix), beside the reported


class ProxyWatchSession(WorkbenchSession):
    """A proxied conversation, followed live."""

    def open(self) -> SessionSnapshot:
        snapshot = super().open()
        if self.wb.proxy.conversation(self.session_id) is None:
            raise ValueError(f"session {self.session_id} is not a proxied conversation (ctxbench proxy makes them)")
        self._seen: tuple[int, str] = (0, "")
        return snapshot

    @property
    def service(self) -> ProxyService:
        return ProxyService(self.wb, steer=self.proxy_steers())

    def proxy_steers(self) -> bool:
        latest = self.wb.proxy.latest_exchange(self.session_id)
        if latest is None or not latest.plan_id:
            return False
        return STEERING_NOTE in self.wb.plans.get(latest.plan_id).notes

    # -- following the proxy ----------------------------------------------------------------------------
    def poll(self) -> WatchPoll | None:
        """The newest exchange when it is new, or has finished since the last poll; else None."""
        latest = self.wb.proxy.latest_exchange(self.session_id)
        if latest is None or (latest.id, latest.outcome) == self._seen:
            return None
        self._seen = (latest.id, latest.outcome)
        plan = self.wb.plans.get(latest.plan_id)
        before = self.wb.proxy.latest_exchange(self.session_id, before=latest.id)
        diff = plan_diff(self.wb.plans.get(before.plan_id) if before is not None and before.plan_id else None, plan)
        view = self.view_of(plan, None)
        snapshot = self.snapshot()
        return WatchPoll(WatchUpdate(latest, diff), view, snapshot, self.steering(), sent_notes(plan, snapshot.history),
                         self.wb.proxy_cache.get(latest.id), self.cost_text(latest),
                         calibration_line(self.wb, latest, plan) if latest.outcome != "pending" else "",
                         self.findings() if latest.outcome != "pending" else (),
                         cache_estimate_line(self.wb, latest.id, self.session_id, latest.provider,
                                             self.config.proxy.cache_min_tokens))

    def view_of(self, plan: ContextPlan, group_id: int | None, *, draft: bool = False) -> PlanView:
        """The plan with its counts as shown: calibrated for the latest request's model from the usage the provider
        reported for the requests before it (the same calibration whether the plan is the request as sent or as
        the user's controls would steer it now, and the one the watch's note compares with its bill)."""
        view = super().view_of(plan, group_id, draft=draft)
        latest = self.wb.proxy.latest_exchange(self.session_id)
        if latest is None or not plan.plan_id:
            return view
        model = self.wb.proxy_billing.model(latest.id) or latest.model
        return replace(view, counts=plan_counts(self.wb, plan, model, before=latest.id))

    def findings(self) -> tuple[Finding, ...]:
        """Waste in the conversation's latest request, each with what the steer it suggests saves and costs."""
        return findings(self.wb, self.session_id, proxy_steers=self.proxy_steers())

    def findings_text(self) -> str:
        found = self.findings()
        if not found:
            return "no waste found in the latest request"
        return "\n\n".join(f"{f.kind}: {f.message}\n  steer: {f.steer}" for f in found)

    def cost(self, exchange: ProxyExchange) -> RequestCost | None:
        """The price of ``exchange`` from its billed usage and the price table, or None (no usage, no price)."""
        return self._cost(exchange, self.wb.proxy_billing.usage(exchange.id))

    def _cost(self, exchange: ProxyExchange, usage: BilledUsage | None) -> RequestCost | None:
        if usage is None:
            return None
        price = self.config.llm.price_for_model(exchange.model, self.wb.proxy_billing.model(exchange.id))
        return request_cost(usage, price) if price is not None else None

    def cost_text(self, exchange: ProxyExchange) -> str:
        """The watch's cost line of ``exchange``: its price in parts, or its billed tokens without a price."""
        usage = self.wb.proxy_billing.usage(exchange.id)
        if usage is None:
            return ""
        cost = self._cost(exchange, usage)  # the usage just read, not read again
        if cost is None:
            return usage_line(usage)
        priced = [(self.config.llm.price_for_model(model), u)
                  for model, u in self.wb.proxy_billing.session_usages(self.session_id, upto=exchange.id)]
        total = sum(request_cost(u, price).total_usd for price, u in priced if price is not None)
        unpriced = sum(1 for price, _u in priced if price is None)
        return (f"{cost_line(cost)} · conversation ${total:.4f} over {len(priced) - unpriced} priced "
                f"request{'s' if len(priced) - unpriced != 1 else ''}")

    def steering(self) -> str:
        """What steering will change in the conversation's next request, in one line."""
        return steering_summary(self.service.controls(self.session_id), self.config.proxy)

    def exchanges(self) -> tuple[ProxyExchange, ...]:
        return self.wb.proxy.exchanges(self.session_id)

    def passthrough(self) -> bool:
        state = self.wb.proxy.conversation(self.session_id)
        return bool(state and state.passthrough)

    def toggle_passthrough(self) -> str:
        """Switch the conversation between steering and pass-through; says which it is now."""
        now = not self.passthrough()
        self.wb.proxy.set_passthrough(self.session_id, now)
        if now:
            return "pass-through: the next requests go upstream as the client sends them"
        if not self.proxy_steers():
            return "steering on for this conversation (it applies when the proxy runs with --steer)"
        return "steering on: your drops, pins and mode apply to the next request"

    # -- the plan shown ------------------------------------------------------------------------------------
    def plan(self, draft: str = "", settings: SessionSettings | None = None, *, store: bool = False,
             group_id: int | None = None) -> PlanView:
        """The latest request as the user's controls would steer it now (nothing stored)."""
        if settings is not None:
            self.use_settings(settings)
        latest = self.wb.proxy.latest_exchange(self.session_id)
        if latest is None:
            return self.view_of(self._empty(), None)
        body, _upstream = self.wb.proxy.bodies(latest.id)
        state = self.wb.proxy.conversation(self.session_id)
        try:
            request = parse_request(latest.provider, body, self.wb.tokenizer, latest.path)
        except WireError:
            return self.view_of(self.wb.plans.get(latest.plan_id), None)
        assert state is not None
        service = self.service
        controls = service.controls(self.session_id, state)
        n = len(request.history)
        # the latest request's messages are the state's last (a chained Responses request sends only what is new)
        steered = steer_plan(request, self.session_id, state.groups[len(state.groups) - n:],
                             state.message_ids[len(state.message_ids) - n:], controls,
                             proxy=self.config.proxy, truncation=self.config.planner.truncation,
                             tokenizer=self.wb.tokenizer)
        return self.view_of(steered.plan, None, draft=True)

    def _empty(self) -> ContextPlan:
        s = self.stored_settings()
        return ContextPlan(plan_id="", session_id=self.session_id, query="", mode=s.mode, strategy=PROXY_STRATEGY,
                           budget=s.budget, used_tokens=0, over_budget=False, over_budget_reason="", sections=(),
                           items=(), retrieval_set_id=EMPTY_RETRIEVAL_SET.id, tokenizer=self.wb.tokenizer.name,
                           estimated=False, notes=("waiting for the first proxied request",))

    # -- the user's controls ---------------------------------------------------------------------------------
    def drop(self, item_id: str, plan: ContextPlan | None = None) -> str:
        if item_id.startswith(("atom:", "file:", "tool:")):
            self.wb.proxy.drop(self.session_id, item_id)
            preview = self.preview()
            cost = " · ".join(preview.cost.lines()[:2]) if preview is not None and preview.cost.changed else ""
            if preview is not None and preview.cost.changed and not preview.cost.tail:
                cost += f" · to keep the cache: /steer defer {item_id} (drops it once the cache breaks anyway)"
            if item_id.startswith("tool:"):
                return (f"dropped the definition {item_id} from the next requests (kept while the conversation "
                        f"calls it){': ' + cost if cost else ''}")
            return f"dropped {item_id} from the next requests{': ' + cost if cost else ''}"
        return super().drop(item_id, plan)

    def preview(self) -> SteerPreview | None:
        """The next request as the user's controls would steer it: a diff against what the client sent, with
        what the steer costs and saves given the prompt cache (None before the first request)."""
        return preview_steer(self.wb, self.session_id, proxy_steers=self.proxy_steers(), config=self.config)

    def preview_text(self) -> str:
        preview = self.preview()
        if preview is None:
            return "no proxied request to preview yet"
        return preview.text(self.config.proxy.preview_diff_lines)

    def pin_note(self, target: str) -> str:
        """What a sticky pin of ``target`` costs: nothing while the client sends the item; once it stops, the
        proxy adds it back to the system prompt, and this is what that does to the prompt cache."""
        pins = [p for p in self.wb.pins.list(self.session_id) if p.kind == "sticky" and p.content
                and (p.target == target or p.target.startswith("path:"))]
        if not pins:
            return ""
        pin = pins[-1]
        cost = readd_cost(self.wb, self.session_id, PINNED_BLOCK.format(label=pin.label or pin.target,
                                                                         content=pin.content), self.config)
        if cost is None or not cost.changed:
            return ""
        return (f"nothing changes while the client sends it; once it stops, adding it back "
                f"{cost.lines()[0]} · {cost.lines()[1]}")

    def defer(self, item_id: str) -> str:
        """Hold a drop back until it keeps the prompt cache: it applies once a request breaks the cache before
        the item anyway, or the cache has expired."""
        if not item_id.startswith(("atom:", "file:", "tool:")):
            raise ValueError("a tool call with its result (atom:…), a file (file:…) or a tool definition (tool:…)")
        self.wb.proxy.restore(self.session_id, item_id)  # dropped already: it waits now
        self.wb.proxy_policy.defer(self.session_id, item_id)
        return (f"{item_id} is dropped once the prompt cache breaks before it anyway, or expires "
                f"({self.config.proxy.cache_ttl_s:,.0f} s without a request); the cache is kept until then")

    # -- one policy for every proxied conversation ---------------------------------------------------------
    def policy_text(self) -> str:
        rules = self.wb.proxy_policy.rules()
        if not rules:
            return "no policy: each conversation has only its own drops, pins and mode"
        return "\n".join(r.describe() for r in rules)

    def everywhere(self, kind: str, target: str, plan: ContextPlan | None = None) -> str:
        """Add a rule for every proxied conversation (``drop TARGET``: tool:NAME, result:TOOL, kind:KIND,
        system:N; ``pin ITEM``; ``mode M``; ``budget N``; ``results N``), or ``remove N``."""
        policy = self.wb.proxy_policy
        if kind == "remove":
            if not target.lstrip("#").isdigit() or not policy.remove(int(target.lstrip("#"))):
                raise LookupError(f"no policy rule {target} (/steer policy lists them)")
            return f"removed policy rule {target}"
        if kind != "pin":
            return add_rule(self.wb, kind, target).describe()
        item = next((i for i in plan.items if i.id == target), None) if plan is not None else None
        if item is None or not item.messages:
            raise LookupError(f"{target} is not an item of the latest request with text to pin")
        if item.kind == "attached_file":
            rule_target = f"path:{item.label.removeprefix('file ')}"
            content = "\n".join(str(m.get("content", "")) for m in item.messages)
        else:
            rule_target, content = target, render_messages(item.messages)
        return policy.add("pin", rule_target, label=item.label, content=content, origin=self.session_id).describe()

    def restore_item(self, item_id: str) -> bool:
        return self.wb.proxy.restore(self.session_id, item_id)

    def pin_item(self, item_id: str, kind: str, *, scope: str = "turn", label: str = "",
                 plan: ContextPlan | None = None) -> Pin:
        """Pin a proxied item with its text (a file is pinned by its path), so it can be sent again after the
        client stops sending it."""
        item = next((i for i in plan.items if i.id == item_id), None) if plan is not None else None
        if item is None or item_id.startswith("pin:"):
            return super().pin_item(item_id, kind, scope=scope, label=label, plan=plan)
        content = render_messages(item.messages) if item.messages else item.label
        target = item_id
        if item.kind == "attached_file":
            target = f"path:{item.label.removeprefix('file ')}"
            content = "\n".join(str(m.get("content", "")) for m in item.messages)
        elif item_id.startswith("tool:") or item_id.startswith("system"):
            raise ValueError(f"{item_id} is sent with every request; there is nothing to pin")
        return self.wb.pins.add(self.session_id, target, kind, scope=scope, label=label or item.label,
                                content=content)


def sent_notes(plan: ContextPlan, history: tuple) -> dict[int, str]:
    """For each stored tool result in ``history``: what the upstream received of it in the request ``plan``
    was made for, from the plan's own items (so the note is what went out, never a tier the planner would
    apply): ``12,089 chars · sent whole``, ``12,089 chars · 368 sent (cut by steering)``, or left out."""
    by_call: dict[tuple[int, str], tuple[bool, int | None]] = {}
    for item in plan.items:
        if item.kind != "tool_atom":
            continue
        call_id = atom_call_id(item.id)
        sent = next((str(m.get("content", "")) for m in item.messages if m.get("role") == "tool"), "")
        cut = len(sent) if item.detail.startswith(CUT_DETAIL) else None
        for message_id in item.message_ids:
            by_call[(message_id, call_id)] = (item.included, cut)
    out: dict[int, str] = {}
    for m in history:
        if m.role != "tool":
            continue
        found = by_call.get((m.id, m.tool_call_id or ""))
        size = f"{len(m.content):,} chars"
        if found is None:
            out[m.id] = f"{size} · not in the latest request"
        elif not found[0]:
            out[m.id] = f"{size} · left out of the latest request (dropped)"
        elif found[1] is None:
            out[m.id] = f"{size} · sent whole"
        else:
            out[m.id] = f"{size} · {found[1]:,} sent (cut by steering)"
    return out


def open_session_class(watch: bool) -> type[WorkbenchSession]:
    """The session a front end opens: a followed proxied conversation, or a session of the workbench."""
    return ProxyWatchSession if watch else WorkbenchSession
