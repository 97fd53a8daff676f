"""Every candidate a plan could include, built from PlanInputs.

Candidates other than history atoms are ``Cand`` records (mutable while the plan is assembled,
turned into frozen ``PlanItem`` at the end). History atoms come from ``atoms.GroupView`` and are
decided through ``budget.HistorySelection``.

Structural exclusions are decided here, before any budgeting, and keep their reason whatever the
budget: ``mode_off`` (scaffold and cards when the mode never auto-retrieves), ``below_threshold`` (a card
whose retrieval hit is under the relevance floor), ``stale`` (a capsule whose covered files changed, while
``[capsules] include_stale`` is off), ``duplicate`` (a second
card for a symbol, a second pin on a target, a pin on the current turn, the pin item of a pinned
group), ``lease_expired``, ``dropped_by_user``, ``isolated_strategy``, ``outside_window`` (a pinned
group that is not in the active branch's history), ``summarised`` (a turn a summary stands in for; a pin
on it still brings it back).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ctxbench.config import ModeProfile, PlannerConfig
from ctxbench.records.item_refs import CardRef, GroupRef, ItemRef, OtherRef
from ctxbench.records.messages import Message
from ctxbench.planner import render, truncation
from ctxbench.planner.atoms import GroupView, HistoryLayout, exclusion_of, render_atom_messages, split_atoms
from ctxbench.records.plans import PlanInputs, Pin
from ctxbench.tokens import Tokenizer, count_message

# Payload categories, in payload order.
CAT_SYSTEM = 0
CAT_TOOLS = 0  # the tool definitions render nothing into the payload; listed after the system prompt
CAT_SYSTEM_MESSAGE = 1
CAT_STATE = 2
CAT_SCRATCHPAD = 3
CAT_MEMO = 4
CAT_SCAFFOLD = 5
CAT_PIN = 6
CAT_CARD = 7
CAT_CAPSULE = 7  # capsules of code: listed before the cards, so they come first among them (orientation, then detail)
CAT_SUMMARY = 8  # summaries of earlier turns: before the history atoms they stand in front of
CAT_HISTORY = 9
CAT_CURRENT = 10

PIN_ORDER = {"sticky": 0, "leased": 1, "ephemeral": 2}


def pin_sort_key(pin: Pin) -> tuple:
    """Pins in a fixed order whatever order they came in: sticky, leased, ephemeral, then by id."""
    return (PIN_ORDER.get(pin.kind, len(PIN_ORDER)), pin.id, pin.target, pin.kind, pin.label, pin.content,
            pin.scope, pin.ttl, pin.created_turn, pin.source)


class Cand:
    __slots__ = (
        "id", "kind", "section", "label", "tokens", "messages", "message_ids", "score", "pin", "detail",
        "reason", "included", "category", "alt_messages", "alt_tokens", "intent",
    )

    def __init__(
        self,
        id: str,
        kind: str,
        section: str,
        label: str,
        messages: Sequence[dict[str, Any]],
        tokenizer: Tokenizer,
        category: int,
        *,
        message_ids: tuple[int, ...] = (),
        score: float = 0.0,
        pin: str = "",
        detail: str = "",
        reason: str = "",
        tokens: int | None = None,
    ) -> None:
        self.id = id
        self.kind = kind
        self.section = section
        self.label = label
        self.messages = tuple(messages)
        self.tokens = tokens if tokens is not None else sum(count_message(tokenizer, m) for m in self.messages)
        self.message_ids = message_ids
        self.score = score
        self.pin = pin
        self.detail = detail
        self.reason = reason  # set once decided
        self.included = False
        self.category = category
        self.alt_messages: tuple[dict[str, Any], ...] = ()  # a smaller rendering (card without excerpt)
        self.alt_tokens = 0
        self.intent = ""  # the reason it gets when included (cards: by provenance)

    @property
    def decided(self) -> bool:
        return bool(self.reason)

    def include(self, reason: str) -> None:
        self.included = True
        self.reason = reason

    def exclude(self, reason: str, detail: str = "") -> None:
        self.included = False
        self.reason = reason
        if detail:
            self.detail = detail


@dataclass
class PinCand:
    pin: Pin
    cand: Cand
    group_index: int = -1  # for group pins: index into the history views


@dataclass
class Candidates:
    system: Cand
    tools: Cand | None  # the tool definitions sent with the call (tokens only, no messages)
    system_messages: list[Cand]
    state: Cand | None
    scratchpad: Cand | None
    memos: list[Cand]
    scaffold: Cand | None
    pins: list[PinCand]
    cards: list[Cand]  # in fill order (score, then retrieval order)
    views: Sequence[GroupView]
    dropped: dict[int, tuple[str, str]]  # view index -> (reason, detail)
    current: list[Cand]  # the current turn item first, then its isolated atoms
    notes: list[str] = field(default_factory=list)
    summaries: list[Cand] = field(default_factory=list)  # oldest covered turn first
    summary_kept: dict[str, tuple[int, ...]] = field(default_factory=dict)  # summary id -> protected view indices
    capsules: list[Cand] = field(default_factory=list)  # fresh ones first, by score; stale ones after
    # view index -> (the label of the summary that stands in for the turn, "s1"; why it is left out)
    summarised: dict[int, tuple[str, str]] = field(default_factory=dict)

    def layer_cands(self) -> list[Cand]:
        out = [self.system]
        if self.tools is not None:
            out.append(self.tools)
        out += self.system_messages
        out += [c for c in (self.state, self.scratchpad) if c is not None]
        out += self.memos
        if self.scaffold is not None:
            out.append(self.scaffold)
        out += [p.cand for p in self.pins]
        out += self.capsules
        out += self.cards
        out += self.summaries
        return out


def _target_name(target: ItemRef) -> str:
    """What a pin's target names after its kind, as the plan's labels write it: a card's symbol, a turn's id, or
    what follows the kind of an id without a type of its own ("" for any other)."""
    if isinstance(target, CardRef):
        return target.symbol
    if isinstance(target, GroupRef):
        return str(target.group)
    return target.value if isinstance(target, OtherRef) else ""


def _unique(ids: set[str], base: str) -> str:
    if base not in ids:
        ids.add(base)
        return base
    n = 2
    while f"{base}#{n}" in ids:
        n += 1
    ids.add(f"{base}#{n}")
    return f"{base}#{n}"


def _current_turn(inputs: PlanInputs, config: PlannerConfig, tokenizer: Tokenizer, family: str) -> list[Cand]:
    msgs: tuple[Message, ...] = inputs.current_turn
    if not msgs:
        synthetic = {"role": "user", "content": inputs.query}
        return [
            Cand("current", "current_turn", "history", "current turn: " + render.short(inputs.query), [synthetic],
                 tokenizer, CAT_CURRENT, reason="mandatory")
        ]
    raw_atoms, systems = split_atoms(msgs)
    isolated: list[tuple[list[Message], str]] = []
    keep: set[int] = {m.id for m in systems}
    for kind, run in raw_atoms:
        reason, why = exclusion_of(run, family)
        if reason == "isolated_strategy":
            isolated.append((run, why))
        else:
            keep.update(m.id for m in run)
    kept = [m for m in msgs if m.id in keep]
    tool_ids = [m.id for m in kept if m.role == "tool"]
    tiers = truncation.active_tiers(tool_ids, config.truncation)
    rendered, tokens, detail = render_atom_messages(kept, tiers, config.truncation, tokenizer)
    first_user = next((m for m in msgs if m.role == "user"), msgs[0])
    out = [
        Cand("current", "current_turn", "history", "current turn: " + render.short(first_user.content or inputs.query),
             rendered, tokenizer, CAT_CURRENT, message_ids=tuple(m.id for m in kept), detail=detail,
             reason="mandatory", tokens=tokens)
    ]
    for run, why in isolated:
        r_msgs, r_tokens, _ = render_atom_messages(run, tiers, config.truncation, tokenizer)
        cand = Cand(f"current:{run[0].id}", "current_turn", "history",
                    "current turn tool call " + ", ".join(c.name for m in run for c in m.tool_calls),
                    r_msgs, tokenizer, CAT_CURRENT, message_ids=tuple(m.id for m in run), tokens=r_tokens)
        cand.exclude("isolated_strategy", why)
        out.append(cand)
    return out


def build_candidates(
    inputs: PlanInputs,
    config: PlannerConfig,
    tokenizer: Tokenizer,
    profile: ModeProfile,
    layout: HistoryLayout,
    family: str,
) -> Candidates:
    ids: set[str] = set()
    notes: list[str] = []

    system_text = inputs.system_prompt or config.system_prompt
    system = Cand("system", "system_prompt", "system", "system prompt", [render.system(system_text)], tokenizer,
                  CAT_SYSTEM, reason="mandatory")
    ids.add("system")
    tools = None
    if inputs.tools_tokens > 0:
        tools = Cand("tools", "tool_definitions", "system", "tool definitions", [], tokenizer, CAT_TOOLS,
                     reason="mandatory", tokens=inputs.tools_tokens,
                     detail="function schemas sent with the call; they render no message")
        ids.add("tools")

    views = layout.views
    view_index = layout.view_index
    dropped_ids = set(inputs.dropped_groups)
    dropped: dict[int, tuple[str, str]] = {}
    for gid in sorted(dropped_ids):
        gi = view_index.get(gid)
        if gi is not None:
            dropped[gi] = ("dropped_by_user", f"turn {gid} dropped by the user")
    system_messages: list[Cand] = []
    for gi in layout.system_groups:
        view = views[gi]
        is_dropped = view.group_id in dropped_ids
        for sm in view.system_messages:
            cand = Cand(_unique(ids, sm.id), "system_message", "system", sm.label, [sm.rendered], tokenizer,
                        CAT_SYSTEM_MESSAGE, message_ids=(sm.message_id,), tokens=sm.tokens)
            if is_dropped or sm.exclusion:
                cand.exclude("dropped_by_user", f"message {sm.message_id} dropped")
            else:
                cand.reason = "mandatory"
            system_messages.append(cand)

    state = None
    if inputs.state_block.strip():
        state = Cand(_unique(ids, "state"), "state", "system", "state block", [render.state_message(inputs.state_block)],
                     tokenizer, CAT_STATE)
    scratchpad = None
    if inputs.scratchpad.strip():
        scratchpad = Cand(_unique(ids, "scratchpad"), "scratchpad", "system", "scratchpad",
                          [render.scratchpad_message(inputs.scratchpad)], tokenizer, CAT_SCRATCHPAD)
    memos = [
        Cand(_unique(ids, f"memo:{memo.id}"), "memo", "system", "memo: " + render.short(memo.content),
             [render.memo_message(memo)], tokenizer, CAT_MEMO)
        for memo in sorted(inputs.memos, key=lambda m: (m.id, m.content, m.tags))
    ]

    retrieval = inputs.retrieval
    scaffold = None
    if retrieval.scaffold.strip():
        scaffold = Cand(_unique(ids, "scaffold"), "scaffold", "scaffold", "orientation scaffold",
                        [render.scaffold_message(retrieval.scaffold)], tokenizer, CAT_SCAFFOLD)
        if not profile.auto_retrieve:
            scaffold.exclude("mode_off", f"mode {profile.name} never auto-retrieves")

    # Pins ---------------------------------------------------------------------------------
    current_gid = inputs.current_turn[0].group_id if inputs.current_turn else None
    hits_by_symbol = {}
    for hit in retrieval.hits:
        hits_by_symbol.setdefault(hit.symbol, hit)
    pins: list[PinCand] = []
    seen_targets: dict[str, str] = {}
    pinned_symbols: dict[str, str] = {}
    for pin in sorted(inputs.pins, key=pin_sort_key):
        if pin.kind not in PIN_ORDER:
            raise ValueError(f"pin {pin.id}: unknown kind {pin.kind!r}")
        cid = _unique(ids, f"pin:{pin.id}")
        label = f"{pin.kind} pin: {pin.label or pin.target}"
        group_index = -1
        content = pin.content
        target = ItemRef.parse(pin.target)
        target_kind, target_name = target.kind, _target_name(target)
        pin_detail = ""
        if target_kind == "card" and not content:  # a pin that holds no text of its own (made before it could)
            hit = hits_by_symbol.get(target_name)
            if hit is not None:
                content = render.card_text(hit, profile.excerpts)
                shape = "with its excerpt" if profile.excerpts and hit.excerpt else "thin"
                pin_detail = f"no text stored with the pin: the card as retrieved for this turn ({shape})"
            else:
                pin_detail = ("no text stored with the pin and retrieval did not find the card this turn: only its "
                              "name is sent (pin it again to keep its text)")
        if isinstance(target, GroupRef):
            gid = target.group
            if gid in view_index:
                group_index = view_index[gid]
            view = views[group_index] if group_index >= 0 else None
            tokens = view.eligible_tokens if view is not None else None
            cand = Cand(cid, "pin", "pins", label, [] if view is not None else [render.pin_message(pin, content)],
                        tokenizer, CAT_PIN, pin=pin.kind, tokens=tokens)
        else:
            cand = Cand(cid, "pin", "pins", label, [render.pin_message(pin, content)], tokenizer, CAT_PIN, pin=pin.kind,
                        detail=pin_detail)
        entry = PinCand(pin, cand, group_index)
        pins.append(entry)
        if pin.kind == "leased" and pin.ttl <= 0:
            cand.exclude("lease_expired", f"lease ({pin.scope}) ended")
            continue
        if pin.target in seen_targets:
            cand.exclude("duplicate", f"{pin.target} is already pinned by {seen_targets[pin.target]}")
            continue
        seen_targets[pin.target] = f"pin:{pin.id}"
        if target_kind == "group":
            if current_gid is not None and target_name == str(current_gid):
                cand.exclude("duplicate", "the current turn is always included")
            elif group_index >= 0 and dropped.get(group_index, ("",))[0] == "dropped_by_user":
                cand.exclude("dropped_by_user", f"turn {target_name} dropped by the user")
            elif group_index < 0 and not pin.content:
                cand.exclude("outside_window", f"turn {target_name} is not in the active branch's history")
            elif group_index >= 0 and not any(not a.exclusion for a in views[group_index].atoms):
                blocked = next((a for a in views[group_index].atoms if a.exclusion), None)
                if blocked is not None:
                    cand.exclude(blocked.exclusion, f"nothing of turn {target_name} can be sent: {blocked.exclusion_detail}")
        if target_kind == "card" and not cand.decided:
            pinned_symbols.setdefault(target_name, f"pin:{pin.id}")

    # Symbol cards ---------------------------------------------------------------------------
    cards: list[Cand] = []
    seen_symbols: set[str] = set()
    order = sorted(range(len(retrieval.hits)), key=lambda i: (-retrieval.hits[i].score, i))
    for i in order:
        hit = retrieval.hits[i]
        if hit.provenance == "graph" or hit.neighbour_of:
            reason = "graph_neighbour"
        elif hit.provenance == "keyword":
            reason = "keyword_match"
        else:
            reason = "semantic_match"
        cand = Cand(_unique(ids, f"card:{hit.symbol}"), "symbol_card", "retrieval", f"card {hit.symbol}",
                    [render.card_message(hit, profile.excerpts)], tokenizer, CAT_CARD, score=hit.score,
                    detail=hit.why)
        cand.intent = reason
        if profile.excerpts and hit.excerpt:
            cand.alt_messages = (render.card_message(hit, False),)
            cand.alt_tokens = sum(count_message(tokenizer, m) for m in cand.alt_messages)
        if not profile.auto_retrieve:
            cand.exclude("mode_off", f"mode {profile.name} never auto-retrieves")
        elif hit.symbol in seen_symbols:
            cand.exclude("duplicate", f"{hit.symbol} appears earlier in the retrieval set")
        elif hit.symbol in pinned_symbols:
            cand.exclude("duplicate", f"{hit.symbol} is pinned by {pinned_symbols[hit.symbol]}")
        elif hit.below_threshold:
            cand.exclude("below_threshold", hit.below_threshold)
        seen_symbols.add(hit.symbol)
        cards.append(cand)
    if profile.auto_retrieve:
        notes.extend(f"retrieval: {n}" for n in retrieval.notes)

    summarised: dict[int, tuple[str, str]] = {}
    summaries, kept = _summaries(inputs, tokenizer, view_index, dropped, ids, summarised)
    capsules = _capsules(inputs, tokenizer, profile, ids)
    current = _current_turn(inputs, config, tokenizer, family)
    return Candidates(system, tools, system_messages, state, scratchpad, memos, scaffold, pins, cards, views, dropped,
                      current, notes, summaries, kept, capsules=capsules, summarised=summarised)


def _capsules(inputs: PlanInputs, tokenizer: Tokenizer, profile: ModeProfile, ids: set[str]) -> list[Cand]:
    """A candidate per capsule the retrieval offered (section ``retrieval``, kind ``capsule``): fresh ones first,
    stale ones after them, each saying so in its label, detail and message."""
    out: list[Cand] = []
    for hit in sorted(inputs.retrieval.capsules, key=lambda h: (h.capsule.stale, -h.score, h.capsule.id)):
        c = hit.capsule
        made = f"{c.source}, confidence {c.confidence:.2f}, generated {c.generated_at[:10]}"
        detail = f"{made} · {hit.why}" if hit.why else made
        if c.stale:
            detail = f"stale: {c.stale_note()}; offered after the fresh cards · {detail}"
        cand = Cand(_unique(ids, hit.id), "capsule", "retrieval", f"capsule {c.title}" + (" (stale)" if c.stale else ""),
                    [render.capsule_message(hit)], tokenizer, CAT_CAPSULE, score=hit.score, detail=detail)
        cand.intent = "capsule"
        if not profile.auto_retrieve:
            cand.exclude("mode_off", f"mode {profile.name} never auto-retrieves")
        elif hit.withheld:
            cand.exclude("stale", hit.withheld)
        out.append(cand)
    return out


def _summaries(inputs: PlanInputs, tokenizer: Tokenizer, view_index: dict[int, int],
               dropped: dict[int, tuple[str, str]], ids: set[str], summarised: dict[int, tuple[str, str]] | None = None
               ) -> tuple[list[Cand], dict[str, tuple[int, ...]]]:
    """A candidate per summary that covers a turn of this history; its covered turns are marked
    ``summarised`` (a turn the user dropped keeps that reason). Must run after the pins are built, so a
    pin on a summarised turn still works."""
    out: list[Cand] = []
    kept: dict[str, tuple[int, ...]] = {}
    usable = [s for s in inputs.summaries if any(g in view_index for g in s.group_ids)]
    for summary in sorted(usable, key=lambda s: (min(s.group_ids), s.id)):
        covered = [view_index[g] for g in summary.group_ids if g in view_index]
        cand = Cand(_unique(ids, f"summary:{summary.id}"), "summary", "history",
                    f"summary s{summary.id} of {summary.span}", [render.summary_message(summary)], tokenizer,
                    CAT_SUMMARY, detail=f"{summary.source}; {len(summary.group_ids)} turns, "
                                        f"{summary.tokens_before:,} tokens before")
        for gi in covered:
            why = f"in summary s{summary.id} ({summary.span})"
            if dropped.setdefault(gi, ("summarised", why)) == ("summarised", why) and summarised is not None:
                summarised[gi] = (f"s{summary.id}", why)
        kept[cand.id] = tuple(view_index[g] for g in summary.kept_groups if g in view_index)
        out.append(cand)
    return out, kept
