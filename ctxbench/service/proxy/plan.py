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
exchange's ``changes``. Pure: no store, no I/O.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from dataclasses import dataclass, field

from ctxbench.config import ProxyConfig, TruncationConfig
from ctxbench.planner.truncation import TIER_INACTIVE, active_tiers, tier_limit
from ctxbench.records.item_refs import atom_call_id, tool_name
from ctxbench.records.plans import ContextPlan, Pin, PlanItem, plan_id_of
from ctxbench.records.proxy import WireMessage, WirePart, WireRequest
from ctxbench.records.retrieval import EMPTY_RETRIEVAL_SET
from ctxbench.records.vocab import PROXY_SECTIONS
from ctxbench.service.proxy.rules import called_tool, item_rule, remove_parts, result_budget_drops
from ctxbench.service.proxy.edits import Edits
from ctxbench.tokens import Tokenizer

PROXY_STRATEGY = "proxy"  # a proxied plan's strategy: the client chose the history, not a planner
PROXY_TRUNCATION_HINT = "\n... [cut by ctxbench: {kept} of {total} characters kept ({tier} tier)]"
STEERING_NOTE = "proxy steering: on"  # a plan's note when the proxy ran with --steer
CUT_DETAIL = "tool result cut to"  # how a cut tool result's detail starts
PINNED_BLOCK = "[pinned by the user in ctxbench: {label}]\n{content}"
LABEL_CHARS = 60


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


@dataclass
class _Item:
    id: str
    kind: str
    section: str
    label: str
    order: int
    group: int = 0
    parts: list[tuple[WireMessage | None, WirePart]] = field(default_factory=list)  # None: a system block
    message_ids: set[int] = field(default_factory=set)
    tokens: int = 0
    bytes: int = 0


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    # from the text's start when that gives enough words (splitting a pasted 30 MB log took ten times its size)
    head = text[: limit * 16]
    line = " ".join(head.split())
    if len(line) <= limit and len(head) < len(text):
        line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


_MEMORY_PATH = re.compile(r"Contents of (\S+)|([\w./-]*(?:CLAUDE|AGENTS|GEMINI)\.md)")
SCAFFOLD_LABELS = {"memory_file": "memory file", "skill_list": "skills list", "todo_list": "todo reminder",
                   "environment": "environment", "reminder": "reminder", "few_shot": "few-shot examples",
                   "repo_map": "repository map", "chat_files": "files in the chat",
                   "deferred_tools": "deferred tools", "agent_types": "agent types"}


def _scaffold_label(kind: str, text: str) -> str:
    name = SCAFFOLD_LABELS.get(kind, kind)
    if kind == "memory_file":
        match = _MEMORY_PATH.search(text)
        if match:
            return f"{name} {match.group(1) or match.group(2)}"
    body = re.sub(r"</?[\w -]+>", " ", text)
    return f"{name}: {_short(body, 40)}"


class _Builder:
    def __init__(self, request: WireRequest, groups: tuple[int, ...], message_ids: tuple[tuple[int, ...], ...],
                 tokenizer: Tokenizer) -> None:
        self.request = request
        self.tok = tokenizer
        self.items: dict[str, _Item] = {}
        self.owner: dict[tuple[object, ...], _Item] = {}  # (location, segment) -> the item holding that part
        history = request.history
        self.last_group = groups[-1] if groups else 0
        self.group_of = {m.index: g for m, g in zip(history, groups)}
        self.ids_of = {m.index: ids for m, ids in zip(history, message_ids)}
        for n, part in enumerate(request.system):
            self._add(f"system:{n}" if len(request.system) > 1 else "system", "system_prompt", "system",
                      f"system prompt{f' block {n + 1}' if len(request.system) > 1 else ''}: {_short(part.text)}",
                      n, None, part)
        self.tool_locations: dict[str, tuple[object, ...]] = {}
        for n, tool in enumerate(request.tools):
            item = self._item(f"tool:{tool.name}", "tool_definitions", "tools", f"tool {tool.name}", 10_000 + n)
            item.tokens += tool.tokens
            item.bytes += tool.bytes
            self.tool_locations[item.id] = tool.location or ("tools", tool.index)
        self._scaffold_before: _Item | None = None  # the item of the scaffolding message just before
        for m in request.messages:
            if m.scaffold:
                self._scaffold_message(m)
                continue
            self._scaffold_before = None
            if m.index in self.group_of:
                self._message(m)
        self._overheads()
        if request.envelope_bytes:
            keys = [k for k in request.body if k not in (request.list_key, "system", "tools", "instructions")]
            self._item("request", "request_options", "system", f"request options: {', '.join(keys) or 'none'}",
                       -1).bytes += request.envelope_bytes

    def _item(self, item_id: str, kind: str, section: str, label: str, order: int, group: int = 0) -> _Item:
        item = self.items.get(item_id)
        if item is None:
            item = self.items[item_id] = _Item(item_id, kind, section, label, order, group)
        return item

    def _add(self, item_id: str, kind: str, section: str, label: str, order: int, message: WireMessage | None,
             part: WirePart, group: int = 0) -> _Item:
        item = self._item(item_id, kind, section, label, order, group)
        item.parts.append((message, part))
        if message is not None:
            item.message_ids.update(self.ids_of.get(message.index, ()))
        item.tokens += part.tokens
        item.bytes += part.bytes
        self.owner[(part.location, part.segment)] = item
        return item

    def _scaffold_message(self, m: WireMessage) -> None:
        """A message that is the assistant's scaffolding: few-shot examples make one item, any other one each."""
        order = 100_000 + m.index * 1000
        text = "\n".join(p.text for p in m.parts)
        before = self._scaffold_before
        if m.role in ("system", "developer"):  # a system message among the messages: an item per section
            for j, part in enumerate(m.parts):
                kind = part.scaffold or m.scaffold
                self._add(f"{kind}:{m.index}:{j}", kind, "scaffold", _scaffold_label(kind, part.text), order + j,
                          m, part)
            self._scaffold_before = None
            return
        if m.scaffold == "few_shot":
            item_id, label = "few_shot", "few-shot examples"
        elif m.role == "assistant" and before is not None and before.kind == m.scaffold:
            item_id, label = before.id, before.label  # the assistant's "Ok." goes with what it acknowledges
        else:
            item_id, label = f"{m.scaffold}:{m.index}", _scaffold_label(m.scaffold, text)
        for part in m.parts:
            self._add(item_id, m.scaffold, "scaffold", label, order, m, part)
        self._scaffold_before = self.items.get(item_id)

    def _message(self, m: WireMessage) -> None:
        g = self.group_of[m.index]
        order = 100_000 + m.index * 1000
        group_item = self._item(f"group:{g}", "current_turn" if g == self.last_group else "history_atom", "history",
                                f"turn {g}", order, g)
        for j, part in enumerate(m.parts):
            if part.kind in ("tool_call", "tool_result") and part.tool_call_id:
                self._add(f"atom:{g}:{part.tool_call_id}", "tool_atom", "tool_results", "", order + j, m, part, g)
            elif part.kind == "file":
                self._add(f"file:{m.index}:{j}", "attached_file", "files", f"file {part.label}", order + j, m, part, g)
            elif part.kind == "image":  # droppable as a file is; counted by the provider's image rule
                self._add(f"file:{m.index}:{j}", "image", "files", part.label, order + j, m, part, g)
            elif part.scaffold:
                self._add(f"{part.scaffold}:{m.index}:{j}", part.scaffold, "scaffold",
                          _scaffold_label(part.scaffold, part.text), order + j, m, part, g)
            else:
                item = self._add(f"group:{g}", group_item.kind, "history", "", order, m, part, g)
                if m.role == "user" and part.kind == "text" and item.label == f"turn {g}":
                    item.label = f"turn {g}: {_short(part.text)}"

    def _overheads(self) -> None:
        """Each message's own tokens and bytes (its role, its keys, its braces) go to the item that holds all of
        its parts, or to its turn when its parts went to several items (a system message's to its first)."""
        for m in self.request.messages:
            owners = {id(self.owner[(p.location, p.segment)]): self.owner[(p.location, p.segment)]
                      for p in m.parts if (p.location, p.segment) in self.owner}
            if len(owners) == 1:
                item = next(iter(owners.values()))
            elif m.index in self.group_of:
                item = self.items[f"group:{self.group_of[m.index]}"]
            elif owners:
                item = next(iter(owners.values()))
            else:
                item = self._item("request", "request_options", "system", "request options", -1)
            item.tokens += m.tokens - sum(p.tokens for p in m.parts)
            item.bytes += m.bytes
            if m.index in self.ids_of:
                item.message_ids.update(self.ids_of[m.index])

    def finish_labels(self) -> None:
        calls = {p.tool_call_id: p for m in self.request.history for p in m.parts if p.kind == "tool_call"}
        for item in self.items.values():
            if item.kind != "tool_atom":
                continue
            call = calls.get(atom_call_id(item.id))
            result = next((p for _m, p in item.parts if p.kind == "tool_result"), None)
            name = call.tool_name if call is not None else "tool"
            args = _short(call.text, 40) if call is not None else ""
            size = f" → {len(result.text):,} chars" if result is not None else " (no result yet)"
            images = f" + {result.label}" if result is not None and result.label else ""  # images in the result
            item.label = f"{name}({args}){size}{images}"


def _tier_of(builder: _Builder, truncation: TruncationConfig) -> dict[str, str]:
    """The truncation tier of every tool result, by atom id: the turn in progress's newest results are
    ``active_recent``, its older ones ``active_older``, past turns' ``inactive``."""
    current = [item.id for item in sorted(builder.items.values(), key=lambda i: i.order)
               if item.kind == "tool_atom" and item.group == builder.last_group]
    tiers = active_tiers(list(range(len(current))), truncation)
    out = {atom: tiers[n] for n, atom in enumerate(current)}
    for item in builder.items.values():
        if item.kind == "tool_atom" and item.group != builder.last_group:
            out[item.id] = TIER_INACTIVE
    return out


def steer_plan(request: WireRequest, session_id: str, groups: tuple[int, ...],
               message_ids: tuple[tuple[int, ...], ...], controls: SteerControls, *, proxy: ProxyConfig,
               truncation: TruncationConfig, tokenizer: Tokenizer) -> SteeredPlan:
    """The plan of ``request`` and, when ``controls.steer``, the edits that apply the user's controls."""
    b = _Builder(request, groups, message_ids, tokenizer)
    b.finish_labels()
    edits = Edits()
    changes: list[str] = []
    pinned = _pinned(b, controls.pins)
    tiers = set(proxy.tiers_for(controls.mode)) if controls.steer and controls.mode_set else set()
    tier_of = _tier_of(b, truncation)
    out: list[PlanItem] = []
    called = {p.tool_name for m in request.messages for p in m.parts if p.kind == "tool_call"}
    held: list[str] = []  # drops steering did not make, and why
    for item in sorted(b.items.values(), key=lambda i: i.order):
        pin = pinned.get(item.id)
        if controls.steer and item.section == "tools" and _dropped_tool(item.id, controls.dropped_items):
            name = tool_name(item.id) or ""
            if name in called:  # the upstream must know a tool the conversation has called
                held.append(f"kept {item.id}: you dropped it, but the conversation calls {name}")
            else:
                edits.remove.add(b.tool_locations[item.id])
                changes.append(f"left out {item.id} ({item.tokens:,} tok): a tool definition you dropped")
                out.append(_plan_item(item, included=False, reason="dropped_by_user", pin=None,
                                      detail="tool definition dropped by the user"))
                continue
        rule = item_rule(controls.drop_rules, item.id, item.kind, called_tool(item.parts)) \
            if controls.steer and pin is None else ""
        if rule and rule.startswith("result:") and item.group == b.last_group:
            held.append(f"kept {item.id}: the policy drops {rule}, but the turn in progress works with it")
        elif rule:
            remove_parts(item.parts, edits)
            changes.append(f"left out {item.id} ({item.label}, {item.tokens:,} tok): the policy drops {rule}")
            out.append(_plan_item(item, included=False, reason="dropped_by_user", pin=None,
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
            out.append(_plan_item(item, included=False, reason="dropped_by_user", pin=pin, detail=why))
            continue
        tokens, detail = item.tokens, ""
        if item.kind == "tool_atom" and pin is None and tier_of.get(item.id) in tiers:
            tokens, detail = _truncate(item, tier_of[item.id], truncation, tokenizer, edits, changes)
        reason = "pinned_sticky" if pin == "sticky" else f"pinned_{pin}" if pin else (
            "mandatory" if item.section in ("system", "tools") or item.group == b.last_group else "client_sent")
        out.append(_plan_item(item, included=True, reason=reason, pin=pin, detail=detail, tokens=tokens,
                              replaced=edits.replace))
    if controls.steer and controls.result_budget:
        _keep_results_within(b, controls.result_budget, out, edits, changes, held)
    notes = [f"proxied {request.provider} request to {request.model or 'the upstream'}"]
    if controls.steer:
        out.extend(_readd_pins(b, controls.pins, pinned, edits, changes, tokenizer))
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


def _keep_results_within(b: _Builder, budget: int, out: list[PlanItem], edits: Edits, changes: list[str],
                         held: list[str]) -> None:
    """The policy's budget for tool results: whole tool calls with their results left out, oldest first, until
    the results sent come to ``budget`` tokens (none of the turn in progress, none pinned)."""
    atoms = sorted((i for i in out if i.included and i.kind == "tool_atom"), key=lambda i: i.order)
    gone, total = result_budget_drops([(i.id, i.tokens, not i.pin and b.items[i.id].group != b.last_group)
                                       for i in atoms], budget)
    where = {planned.id: n for n, planned in enumerate(out)}
    for atom_id in gone:
        item, planned = b.items[atom_id], out[where[atom_id]]
        for _m, part in item.parts:
            edits.replace.pop(part.location, None)
        remove_parts(item.parts, edits)
        why = f"tool results over the policy's {budget:,} tok a request (oldest left out first)"
        changes.append(f"left out {atom_id} ({item.label}, {planned.tokens:,} tok): {why}")
        out[where[atom_id]] = _plan_item(item, included=False, reason="over_budget", pin=None, detail=why,
                                         tokens=planned.tokens)
    if total > budget:
        held.append(f"tool results {total:,} tok, over the policy's {budget:,}: the rest are the turn in "
                    "progress's or pinned")


def _dropped_tool(item_id: str, dropped: frozenset[str]) -> bool:
    """Whether a tool definition's item is dropped: by its id, or by a pattern (``tool:mcp__*``, the policy's)."""
    return item_id in dropped or any("*" in d and fnmatch.fnmatchcase(item_id, d) for d in dropped)


def _pinned(b: _Builder, pins: tuple[Pin, ...]) -> dict[str, str]:
    """Items the user pinned, by item id, with the pin's kind (a ``path:`` pin pins the files of that path)."""
    live = [p for p in pins if not (p.kind == "leased" and p.ttl <= 0)]
    out: dict[str, str] = {}
    for item in b.items.values():
        for pin in live:
            path = item.label[5:] if item.kind == "attached_file" else None
            if pin.target == item.id or (path and pin.target == f"path:{path}"):
                out[item.id] = pin.kind
    return out


def _truncate(item: _Item, tier: str, truncation: TruncationConfig, tokenizer: Tokenizer, edits: Edits,
              changes: list[str]) -> tuple[int, str]:
    limit = tier_limit(tier, truncation)
    tokens = item.tokens
    for _m, part in item.parts:
        if part.kind != "tool_result" or not part.replaceable or len(part.text) <= limit:
            continue
        cut = part.text[:limit] + PROXY_TRUNCATION_HINT.format(kept=limit, total=len(part.text), tier=tier)
        edits.replace[part.location] = cut
        tokens += tokenizer.count(cut) - part.tokens
        changes.append(f"cut {item.id} ({item.label}) to {limit:,} of {len(part.text):,} chars: {tier} tier")
        item.label = item.label.replace(f" → {len(part.text):,} chars", f" → {len(cut):,} of {len(part.text):,} chars sent")
        return tokens, f"{CUT_DETAIL} {limit:,} of {len(part.text):,} chars ({tier} tier)"
    return tokens, ""


def _readd_pins(b: _Builder, pins: tuple[Pin, ...], present: dict[str, str], edits: Edits, changes: list[str],
                tokenizer: Tokenizer) -> list[PlanItem]:
    """Sticky pins with text that the request does not carry, added back to the system prompt."""
    out: list[PlanItem] = []
    carried = set(present)
    for n, pin in enumerate(p for p in pins if p.kind == "sticky" and p.content):
        if pin.target in carried or any(pin.target == f"path:{b.items[i].label[5:]}" for i in carried
                                        if b.items[i].kind == "attached_file"):
            continue
        block = PINNED_BLOCK.format(label=pin.label or pin.target, content=pin.content)
        edits.system_append.append(block)
        tokens = tokenizer.count(block)
        changes.append(f"added pin {pin.target} ({tokens:,} tok): pinned sticky, and the request no longer carries it")
        out.append(PlanItem(id=f"pin:{pin.id}", kind="pin", section="pins", label=f"pinned {pin.label or pin.target}",
                            tokens=tokens, included=True, reason="pinned_sticky", pin="sticky", order=5_000 + n,
                            messages=({"role": "system", "content": block},),
                            detail="added back: the client no longer sends it"))
    return out


def _plan_item(item: _Item, *, included: bool, reason: str, pin: str | None, detail: str = "",
               tokens: int | None = None, replaced: dict | None = None) -> PlanItem:
    messages = _render(item, replaced or {}) if included else ()
    return PlanItem(id=item.id, kind=item.kind, section=item.section, label=item.label,
                    tokens=item.tokens if tokens is None else tokens, included=included, reason=reason,
                    pin=pin or "", order=item.order if included else -1, message_ids=tuple(sorted(item.message_ids)),
                    messages=messages, detail=detail, bytes=item.bytes)


def _render(item: _Item, replaced: dict) -> tuple[dict[str, object], ...]:
    """The item as OpenAI-style messages as they went upstream (a cut tool result cut), for the payload view
    and the preview; the exact bodies are stored with the exchange."""
    if item.section == "tools":
        return ()
    out: list[dict[str, object]] = []
    for m, part in item.parts:
        role = "system" if m is None else {"developer": "system"}.get(m.role, m.role)
        if part.kind == "tool_call":
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": part.tool_call_id, "type": "function",
                 "function": {"name": part.tool_name, "arguments": part.text}}]})
        elif part.kind == "tool_result":
            out.append({"role": "tool", "tool_call_id": part.tool_call_id,
                        "content": replaced.get(part.location, part.text)})
        else:
            out.append({"role": role if role in ("system", "user", "assistant") else "user", "content": part.text})
    return tuple(out)


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

