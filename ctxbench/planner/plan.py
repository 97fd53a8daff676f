"""Plan assembly: candidates -> budgeted, ordered, explained ContextPlan with a stable PlanId.

Filling order (each step only takes what still fits; the plan never exceeds its budget by a
single token unless the mandatory items alone do):

1. mandatory: the system prompt, the tool definitions (``inputs.tools_tokens``: the function
   schemas sent with the call, counted by whoever offers the tools), system-role messages of the history, the current turn, sticky
   pins (a sticky pin on a turn forces that turn's atoms in). If these alone exceed the budget the
   plan is ``over_budget`` with a reason naming them and their total; they all stay in and every
   other candidate that is not structurally excluded is excluded ``over_budget``;
2. the state block (``### STATE``);
3. leased pins (a leased turn pin takes the whole turn or nothing);
4. the scratchpad (reason ``state``: a context layer like the state block), then memos by id
   (reason ``keyword_match``: the session hands the planner the memos its keyword search found);
5. the orientation scaffold, within the mode's ``scaffold_share`` of the budget;
6. symbol cards by score, within the mode's ``retrieval_share`` and ``max_cards`` (Heavy: with
   their excerpt, or the thin card when the excerpt does not fit), then the capsules of code the
   retrieval offered in what is left of that share (fresh ones first; a stale one only after every
   fresh card and capsule, its detail and message saying which file changed);
7. summaries of earlier turns (each whole, within ``summary_share`` of what is left, with the protected turns
   inside its span — those go first even when the summary does not fit), then history by the session's
   strategy (window / hybrid / levels / semantic / fused) with what is left; ``levels`` places the summaries in
   its session level instead. The retrieval strategies (fused, semantic, hybrid) keep the turns a summary
   stands in for as candidates, never as recent turns: one the query points at comes back verbatim, its detail
   ``recalled from summary sN: …``; the others stay ``summarised``;
8. ephemeral pins.

Payload order (``[planner] order = "relevance"``): system prompt, system messages, state, scratchpad, memos,
scaffold, pins that are not turns, cards, then history atoms strictly chronological (by message id), the
current turn last. ``order = "cache"`` sends the same items with what changes least first, so that the next
plan shares a long prefix a provider's prompt cache reads (``planner/cache.py``). Each context layer is one
system message, so an item's tokens are exactly the ``count_message`` sum of its messages. The tool-definitions
item renders no message (the schemas travel beside the messages), so ``used_tokens == count_messages(plan.messages()) + inputs.tools_tokens``:
the budget covers the whole prompt the provider counts, not only the messages.

Every candidate appears once in ``items``: included ones in payload order, then excluded ones in
candidate order (layers, history chronologically, the current turn's isolated atoms).

The PlanId (``records.plans.plan_id_of``, the proxy's recipe too) is ``plan_`` + the first 20 hex digits
of the sha256 of the canonical JSON of every input (messages by id, content hash and status; pins; mode;
budget; strategy; window; provider family; system prompt; tool-definition tokens; hashes of state, scratchpad
and memos; the retrieval set; the keyword and semantic rankings; the whole planner config; the tokenizer name).
No clock, no randomness and no dict-order dependence enter a plan, so the same inputs give the same plan byte
for byte.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from itertools import islice
from operator import gt
from typing import Any

from ctxbench.config import PlannerConfig
from ctxbench.records.derived import deriving_for
from ctxbench.records.messages import content_hash, strategy_family
from ctxbench.planner import atoms as atoms_mod
from ctxbench.planner.budget import FULL, AtomValues, Budget, HistorySelection
from ctxbench.planner.excluded import excluded_history
from ctxbench.planner.cache import (CACHE_ORDER, CACHE_SETTINGS, KEEP_SETTINGS, RELEVANCE_ORDER, cache_order,
                                    keeps_previous)
from ctxbench.planner.candidates import Cand, Candidates, build_candidates, pin_sort_key
from ctxbench.planner.modes import mode_profile, share_tokens
from ctxbench.records.history_items import HISTORY_SECTION, DeferredPlan
from ctxbench.records.plans import ContextPlan, PlanInputs, PlanItem, plan_id_of
from ctxbench.records.scored import ScoredIds, pairs_digest
from ctxbench.records.vocab import SECTIONS, STRATEGIES
from ctxbench.planner.strategies import get_strategy
from ctxbench.planner.strategies.context import StrategyContext, places_summaries, recalls_summarised
from ctxbench.planner.summaries import fill_summaries
from ctxbench.tokens import REPLY_PRIMING, Tokenizer

PLAN_FORMAT_VERSION = 1
OVER_BUDGET_LISTED = 6  # mandatory items named in an over_budget reason
ESTIMATE_NOTE = "token counts are estimates (chars/4), not the model's tokenizer"

_NEW = object.__new__


def _item(**fields: Any) -> PlanItem:
    """A PlanItem without the frozen-dataclass __init__ (thousands per plan; all fields given)."""
    item = _NEW(PlanItem)
    item.__dict__.update(fields)
    return item


def _planner_config(config: PlannerConfig) -> PlannerConfig:
    """The planner reads its own section only: a whole Config is refused, not looked into."""
    if not isinstance(config, PlannerConfig):
        raise TypeError(f"the planner takes the [planner] section (PlannerConfig), not a {type(config).__name__}")
    return config


# ---- PlanId --------------------------------------------------------------------------------

_CONFIG_DIGESTS: dict[int, tuple[PlannerConfig, str]] = {}
_CONFIG_LOCK = threading.Lock()


def _config_digest(config: PlannerConfig) -> str:
    hit = _CONFIG_DIGESTS.get(id(config))
    if hit is not None and hit[0] is config:
        return hit[1]
    fields = dataclasses.asdict(config)
    if fields.get("order") == RELEVANCE_ORDER:  # the order plans had before it was a setting: older ids stay
        for name in CACHE_SETTINGS:  # (the cache order's settings change nothing in this order)
            fields.pop(name, None)
    elif not fields.get("cache_keep_share"):  # the cache order without keeping: its older ids stay
        for name in KEEP_SETTINGS:
            fields.pop(name, None)
    text = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    with _CONFIG_LOCK:
        if len(_CONFIG_DIGESTS) > 64:
            _CONFIG_DIGESTS.clear()
        _CONFIG_DIGESTS[id(config)] = (config, digest)
    return digest


def canonical_inputs(
    inputs: PlanInputs, config: PlannerConfig, tokenizer_name: str, history: str
) -> dict[str, Any]:
    """The canonical form of every plan input (large parts as sha256 digests of their canonical JSON).

    ``history``: the sha256 of the history's group digests, one per line, each the sha256 of its messages'
    canonical rows (``atoms.message_row``: id, group, role, content hash, status, parsing strategy, flags, ...;
    ``atoms.HistoryLayout.history_digest``).
    """
    retrieval = inputs.retrieval
    return {
        "version": PLAN_FORMAT_VERSION,
        "session": inputs.session_id,
        "query": inputs.query,
        "history": history,
        "current": [atoms_mod.message_row(m) for m in inputs.current_turn],
        "budget": inputs.budget,
        "mode": inputs.mode,
        "strategy": inputs.strategy,
        "window_groups": inputs.window_groups,
        "provider_family": inputs.provider_family,
        "system_prompt": inputs.system_prompt,
        "pins": [dataclasses.astuple(p) for p in sorted(inputs.pins, key=pin_sort_key)],
        "dropped_groups": sorted(set(inputs.dropped_groups)),
        "state": content_hash(inputs.state_block),
        "scratchpad": content_hash(inputs.scratchpad),
        "memos": sorted([m.id, content_hash(m.content), list(m.tags)] for m in inputs.memos),
        "retrieval": {
            "id": retrieval.id,
            "query": retrieval.query,
            "scaffold": content_hash(retrieval.scaffold),
            "notes": list(retrieval.notes),
            "semantic_available": retrieval.semantic_available,
            "hits": [
                [h.symbol, h.path, h.line, h.score, h.provenance, h.neighbour_of, h.why, h.card_hash,
                 content_hash(h.card_text), content_hash(h.excerpt),
                 *([h.below_threshold] if h.below_threshold else [])]  # absent when empty: older ids stay
                for h in retrieval.hits
            ],
            **({"capsules": [[c.capsule.id, c.capsule.kind, c.capsule.subject, c.score, c.why, c.withheld,
                              content_hash(c.capsule.text), c.capsule.source, c.capsule.confidence,
                              list(c.capsule.stale_files)] for c in retrieval.capsules]}
               if retrieval.capsules else {}),  # absent without capsules: older ids stay
        },
        "keyword_ranking": list(inputs.keyword_ranking),
        # a long ranking or similarity list as the digest of its pairs (a list of 40,000 pairs took longer to write
        # than the plan took to make); an empty one as before, so the ids of plans without one stay
        "semantic_ranking": pairs_digest(inputs.semantic_ranking) if inputs.semantic_ranking else [],
        "config": _config_digest(config),
        "tokenizer": tokenizer_name,
        **({"tools_tokens": inputs.tools_tokens} if inputs.tools_tokens else {}),  # absent when 0: older ids stay
        **({"message_similarity": pairs_digest(inputs.message_similarity)} if inputs.message_similarity else {}),
        **({"message_keyword": _pairs_json(inputs.message_keyword)} if inputs.message_keyword else {}),
        **({"summaries": [[s.id, list(s.group_ids), list(s.kept_groups), content_hash(s.text), s.source]
                          for s in inputs.summaries]} if inputs.summaries else {}),
        **({"task": [inputs.task_id, inputs.task_name]} if inputs.task_id else {}),
        # absent without a cluster: older ids stay
        **({"query_cluster": dataclasses.astuple(inputs.query_cluster)} if inputs.query_cluster is not None else {}),
        **({"cluster_notes": list(inputs.cluster_notes)} if inputs.cluster_notes else {}),
        # absent unless the plan keeps the previous one's history (``planner.cache.keeps_previous``): older ids stay
        **({"previous": [list(inputs.previous.atoms), inputs.previous.settings]}
           if inputs.previous is not None and keeps_previous(config, inputs.strategy) else {}),
    }


def _pairs_json(pairs: Any) -> list[list[Any]]:
    """(id, score) pairs as JSON arrays (a ``ScoredIds`` makes its list in C)."""
    return pairs.to_json() if isinstance(pairs, ScoredIds) else [[m, s] for m, s in pairs]


def _plan_id(inputs: PlanInputs, config: PlannerConfig, tokenizer_name: str, history: str) -> str:
    return plan_id_of(canonical_inputs(inputs, config, tokenizer_name, history))


def plan_id(inputs: PlanInputs, config: PlannerConfig, tokenizer_name: str) -> str:
    """The PlanId of the plan ``build_plan`` makes from these inputs (no plan is built)."""
    config = _planner_config(config)
    digests = [atoms_mod.group_digest(g) for g in atoms_mod.split_groups(inputs.history)]
    return _plan_id(inputs, config, tokenizer_name, hashlib.sha256("\n".join(digests).encode()).hexdigest())


# ---- filling -------------------------------------------------------------------------------

def _take(cand: Cand | None, budget: Budget, reason: str, detail: str = "") -> bool:
    if cand is None or cand.decided:
        return False
    if budget.fits(cand.tokens):
        budget.take(cand.tokens)
        cand.include(reason)
        return True
    cand.exclude("over_budget", detail)
    return False


def _fill_pins(c: Candidates, selection: HistorySelection, budget: Budget, kind: str, reason: str) -> None:
    for entry in c.pins:
        cand = entry.cand
        if entry.pin.kind != kind or cand.decided:
            continue
        if entry.group_index < 0:
            _take(cand, budget, reason)
            continue
        gid = c.views[entry.group_index].group_id
        if selection.fill_group(entry.group_index, budget, reason, pin=kind, partial=False) == FULL:
            cand.exclude("duplicate", f"turn {gid} is included in the history as pinned")
        else:
            cand.exclude("over_budget", f"turn {gid} does not fit whole")


def _fill_retrieval(c: Candidates, budget: Budget, inputs: PlanInputs, profile: Any) -> None:
    if c.scaffold is not None and not c.scaffold.decided:
        cap = share_tokens(inputs.budget, profile.scaffold_share)
        share = budget.child(cap)
        _take(c.scaffold, share, "scaffold", f"scaffold needs {c.scaffold.tokens} tokens; its share is {cap}")
    cap = share_tokens(inputs.budget, profile.retrieval_share)
    share = budget.child(cap)
    rank = 0
    for cand in c.cards:
        if cand.decided:
            continue
        rank += 1
        if rank > profile.max_cards:
            cand.exclude("card_limit", f"beyond the {profile.max_cards} cards of mode {profile.name}")
        elif share.fits(cand.tokens):
            share.take(cand.tokens)
            cand.include(cand.intent)
        elif cand.alt_messages and share.fits(cand.alt_tokens):
            share.take(cand.alt_tokens)
            cand.messages, cand.tokens = cand.alt_messages, cand.alt_tokens
            cand.detail = (cand.detail + "; " if cand.detail else "") + "excerpt left out to fit"
            cand.include(cand.intent)
        else:
            cand.exclude("over_budget", f"retrieval share ({cap} tokens) is full")
    for cand in c.capsules:  # after the cards: a capsule is orientation, the cards are the code
        if cand.decided:
            continue
        if share.fits(cand.tokens):
            share.take(cand.tokens)
            cand.include(cand.intent)
        else:
            cand.exclude("over_budget", f"retrieval share ({cap} tokens) is full")


def _over_budget_reason(mandatory: list[tuple[str, int]], total: int, limit: int) -> str:
    named = sorted(mandatory, key=lambda x: (-x[1], x[0]))
    listed = ", ".join(f"{label} {tokens}" for label, tokens in named[:OVER_BUDGET_LISTED])
    more = len(named) - OVER_BUDGET_LISTED
    if more > 0:
        listed += f", and {more} more"
    return f"mandatory items need {total} tokens but the budget is {limit}: {listed}"


# ---- assembly ------------------------------------------------------------------------------

def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _cand_item(cand: Cand, order: int) -> PlanItem:
    return _item(
        id=cand.id, kind=cand.kind, section=cand.section, label=cand.label, tokens=cand.tokens,
        included=cand.included, reason=cand.reason or "over_budget", score=cand.score, pin=cand.pin,
        order=order, message_ids=cand.message_ids, messages=cand.messages if cand.included else (),
        detail=cand.detail, external_ids=(),
    )


def _atom_template(atom: Any) -> dict[str, Any]:
    """The fields of an atom's excluded PlanItem, which never change (kept on the cached atom)."""
    template = atom.item_template
    if not template:
        template.update(
            id=atom.id, kind="history_atom", section=HISTORY_SECTION, label=atom.label, tokens=atom.tokens,
            included=False, reason="", score=0.0, pin="", order=-1, message_ids=atom.message_ids,
            messages=(), detail="", external_ids=atom.external_ids,
        )
    return template


def _included_template(atom: Any) -> dict[str, Any]:
    """The fields of an atom's included PlanItem but its reason, score, detail and pin (kept on the cached atom)."""
    template = atom.included_template
    if not template:
        template.update(_atom_template(atom), included=True, order=0, messages=atom.messages)
    return template


def _included_history(selection: HistorySelection, start: int = 0) -> tuple[list[PlanItem], int]:
    """Every included history atom's item, chronologically (by first message id), numbered in payload order from
    ``start``, and their tokens: hundreds per plan at a large budget, each made from its atom's template with the
    fields that differ set on it."""
    included: list[PlanItem] = []
    firsts: list[int] = []
    scores = selection.scores
    atom_scores = selection.atom_scores
    picks, groups = selection.picks, selection.groups
    table = atom_scores.table if isinstance(atom_scores, AtomValues) else None  # no dict per group made
    unit_of, unit_values = table if table is not None else ({}, ())
    append, first = included.append, firsts.append
    order = start
    tokens = 0
    for gi in sorted(picks):
        pick = picks[gi]
        atoms = groups[gi].atoms
        score = scores.get(gi, 0.0)
        own_scores = atom_scores.get(gi) if table is None else None
        units = unit_of.get(gi) if table is not None else None
        reasons, details, pins = pick.reasons, pick.details, pick.pins
        for ai in sorted(reasons) if len(reasons) > 1 else reasons:  # in atom order
            atom = atoms[ai]
            item = _NEW(PlanItem)
            fields = item.__dict__
            fields.update(atom.included_template or _included_template(atom))
            fields["reason"] = reasons[ai]
            if units is not None:
                u = units[ai]
                fields["score"] = unit_values[u] if u >= 0 else score
            elif table is None and own_scores:
                fields["score"] = own_scores.get(ai, score)
            else:
                fields["score"] = score
            detail, more = details[ai], atom.detail  # _join(detail, more), inline
            fields["detail"] = (f"{detail}; {more}" if detail else more) if more else detail
            if pins:
                fields["pin"] = pins.get(ai, "")
            fields["order"] = order
            order += 1
            tokens += atom.tokens
            append(item)
            first(atom.first_id)
    if any(map(gt, firsts, islice(firsts, 1, None))):  # groups interleaved: by first message id
        included = [included[i] for i in sorted(range(len(included)), key=firsts.__getitem__)]
        for order, item in enumerate(included, start):
            item.__dict__["order"] = order
    return included, tokens


def build_plan(inputs: PlanInputs, config: PlannerConfig, tokenizer: Tokenizer) -> ContextPlan:
    """Build the ContextPlan for ``inputs``: deterministic, budgeted, every candidate with a reason. The texts it
    counts are the session's (``records.derived``: its store keeps their counts, no other session's does)."""
    with deriving_for(inputs.session_id):
        return _build_plan(inputs, config, tokenizer)


def _build_plan(inputs: PlanInputs, config: PlannerConfig, tokenizer: Tokenizer) -> ContextPlan:
    config = _planner_config(config)
    if inputs.strategy not in STRATEGIES:
        raise ValueError(f"unknown history strategy {inputs.strategy!r}; known: {', '.join(STRATEGIES)}")
    if inputs.tools_tokens < 0:
        raise ValueError(f"tools_tokens must be 0 or more, got {inputs.tools_tokens}")
    strategy = get_strategy(inputs.strategy)
    profile = mode_profile(config, inputs.mode)
    family = strategy_family(inputs.provider_family)

    layout = atoms_mod.history_layout(inputs.history, family, config.truncation, tokenizer)
    views = layout.views
    pid = _plan_id(inputs, config, tokenizer.name, layout.history_digest)
    c = build_candidates(inputs, config, tokenizer, profile, layout, family)
    selection = HistorySelection(views, c.dropped, layout.memo, layout.earlier)
    if c.summarised and recalls_summarised(strategy):
        selection.recall_summarised(c.summarised)
    budget = Budget(inputs.budget, REPLY_PRIMING)
    notes: list[str] = []
    if tokenizer.is_estimate:
        notes.append(ESTIMATE_NOTE)
    notes.extend(c.notes)
    if inputs.query_cluster is not None:
        notes.append(inputs.query_cluster.describe())
    notes.extend(inputs.cluster_notes)

    # 1. mandatory
    # the layers already marked mandatory (system prompt, tool definitions, system messages) and the current turn
    mandatory: list[tuple[str, int]] = []
    layers = c.layer_cands()
    for cand in (*layers, c.current[0]):
        if cand.reason == "mandatory":
            cand.include("mandatory")
            budget.take(cand.tokens)
            mandatory.append((cand.label if cand.kind != "current_turn" else "current turn", cand.tokens))
    for entry in c.pins:
        if entry.pin.kind != "sticky" or entry.cand.decided:
            continue
        if entry.group_index >= 0:
            before = budget.used
            selection.force_group(entry.group_index, budget, "pinned_sticky", pin="sticky")
            gid = c.views[entry.group_index].group_id
            entry.cand.exclude("duplicate", f"turn {gid} is included in the history as pinned")
            mandatory.append((f"sticky pin {entry.pin.id} (turn {gid})", budget.used - before))
        else:
            entry.cand.include("pinned_sticky")
            budget.take(entry.cand.tokens)
            mandatory.append((f"sticky pin {entry.pin.id}", entry.cand.tokens))

    over_budget = budget.used > budget.limit
    over_reason = ""
    context = StrategyContext(inputs, config, inputs.budget, summaries=c.summaries, summary_kept=c.summary_kept)
    if over_budget:
        over_reason = _over_budget_reason(mandatory, budget.used, budget.limit)
        notes.append("over budget: " + over_reason)
    else:
        _take(c.state, budget, "state")  # 2
        _fill_pins(c, selection, budget, "leased", "pinned_leased")  # 3
        _take(c.scratchpad, budget, "state")  # 4
        for memo in c.memos:  # memos reach the planner through the store's keyword search
            _take(memo, budget, "keyword_match")
        _fill_retrieval(c, budget, inputs, profile)  # 5, 6
        if not places_summaries(strategy):
            fill_summaries(c.summaries, c.summary_kept, selection, budget, share=config.summary_share)  # 7
        strategy(selection, budget, context)
        _fill_pins(c, selection, budget, "ephemeral", "pinned_ephemeral")  # 8
        notes.extend(context.notes)

    for cand in layers + c.current:
        if not cand.decided:
            cand.exclude("over_budget", "mandatory items alone exceed the budget" if over_budget else "")

    # assembly: the included items and the excluded context layers now, the excluded history atoms when read
    included_layers = sorted((cand for cand in layers if cand.included), key=lambda cand: cand.category)
    items: list[PlanItem] = [_cand_item(cand, order) for order, cand in enumerate(included_layers)]
    history_in, history_tokens = _included_history(selection, len(items))
    current = _cand_item(c.current[0], len(items) + len(history_in))

    # tokens by section, counted in payload order (layers, history, the current turn); excluded items count nothing
    section_tokens = dict.fromkeys(SECTIONS, 0)
    used = REPLY_PRIMING
    for item in items:
        section_tokens[item.section] = section_tokens.get(item.section, 0) + item.tokens
        used += item.tokens
    if history_in:  # every one of them in the history section
        section_tokens[HISTORY_SECTION] = section_tokens.get(HISTORY_SECTION, 0) + history_tokens
        used += history_tokens
    if current.included:
        section_tokens[current.section] = section_tokens.get(current.section, 0) + current.tokens
        used += current.tokens
    items.extend(history_in)
    items.append(current)
    if config.order == CACHE_ORDER:
        items = cache_order(items, context.kept, keeps_previous(config, inputs.strategy))
    items.extend(_cand_item(cand, -1) for cand in layers if not cand.included)
    tail = tuple(_cand_item(cand, -1) for cand in c.current[1:])

    return DeferredPlan.make(
        head=tuple(items),
        rest=lambda: excluded_history(selection),
        tail=tail,
        plan_id=pid,
        session_id=inputs.session_id,
        query=inputs.query,
        mode=profile.name,
        strategy=inputs.strategy,
        budget=inputs.budget,
        used_tokens=used,
        over_budget=over_budget,
        over_budget_reason=over_reason,
        sections=tuple(section_tokens.items()),
        retrieval_set_id=inputs.retrieval.id,
        tokenizer=tokenizer.name,
        estimated=tokenizer.is_estimate,
        notes=tuple(notes),
        task_id=inputs.task_id,
        task_name=inputs.task_name,
        query_cluster=inputs.query_cluster,
    )
