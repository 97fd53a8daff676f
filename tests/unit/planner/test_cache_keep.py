"""The cache-keeping selection (``[planner] cache_keep_share``, fused, order "cache"): a plan keeps a prefix of the
previous plan's history while the user changed nothing, so consecutive prompts open alike."""
from __future__ import annotations

import dataclasses

from ctxbench.config import PlannerConfig
from ctxbench.planner import build_plan, plan_id
from ctxbench.planner.cache import kept_atoms, kept_prefix, payload_units, previous_history, shared_prefix_tokens
from ctxbench.records.plans import Pin, PlanInputs
from ctxbench.tokens import get_tokenizer

from planner_helpers import SessionBuilder

TOK = get_tokenizer()
CACHE = dataclasses.replace(PlannerConfig(), order="cache")
KEEP = dataclasses.replace(CACHE, cache_keep_share=1.0, cache_keep_margin=1.0)
TURNS = 20


def _session() -> SessionBuilder:
    b = SessionBuilder()
    for n in range(TURNS):
        b.turn(f"turn {n}: tell me about subject {n} and its particular details " * 2, f"subject {n} is fine " * 6)
    b.turn("a question", reply="")
    return b


def _inputs(b: SessionBuilder, near: range, far: range = range(0), budget: int = 600, **kw) -> PlanInputs:
    """A question whose messages most alike are those of the turns ``near``, least alike those of ``far``."""
    history, current = b.split_current()
    similarity = []
    for m in history:
        value = 0.9 if m.group_id in near else -0.9 if m.group_id in far else 0.1 + 0.01 * (m.id % 7)
        similarity.append((m.id, value))
    return PlanInputs(session_id=b.session_id, query=current[0].content, history=history, current_turn=current,
                      budget=budget, strategy="fused", message_similarity=tuple(similarity), **kw)


def _history(plan) -> list[str]:
    return [i.id for i in sorted(plan.included, key=lambda i: i.order) if i.kind == "history_atom"]


def _groups(plan) -> set[int]:
    return {int(atom.split(":")[1]) for atom in _history(plan)}


def test_an_unchanged_question_keeps_the_whole_previous_prompt():
    b = _session()
    first_inputs = _inputs(b, range(2, 7))
    first = build_plan(first_inputs, KEEP, TOK)
    again = build_plan(dataclasses.replace(first_inputs, previous=previous_history(first, first_inputs)), KEEP, TOK)
    units = payload_units(first)
    assert _history(again) == _history(first)
    assert shared_prefix_tokens(units, payload_units(again)) == sum(t for _k, t in units)


def test_a_related_question_keeps_the_previous_history_as_its_prefix_and_appends_its_new_picks():
    b = _session()
    first_inputs = _inputs(b, range(2, 7))
    first = build_plan(first_inputs, KEEP, TOK)
    previous = previous_history(first, first_inputs)
    related = _inputs(b, range(4, 9), previous=previous)
    half = dataclasses.replace(KEEP, cache_keep_share=0.5)  # half the history budget for what is kept
    kept = build_plan(related, half, TOK)
    fresh = build_plan(dataclasses.replace(related, previous=None), half, TOK)
    before = _history(first)
    after = _history(kept)
    # the previous plan's history atoms open the new one, in their order; the new picks follow them
    n = sum(1 for i in kept.included if "kept from the previous plan" in i.detail)
    assert 4 <= n < len(before) and after[:n] == before[:n]
    assert set(after[n:]) <= set(_history(fresh)) and _groups(kept) - _groups(first)
    first_units = payload_units(first)
    assert shared_prefix_tokens(first_units, payload_units(kept)) > \
        shared_prefix_tokens(first_units, payload_units(build_plan(dataclasses.replace(related, previous=None),
                                                                   CACHE, TOK))) + 100
    assert kept.used_tokens <= related.budget


def test_an_atom_whose_score_falls_far_below_is_evicted_and_the_plan_picks_afresh():
    b = _session()
    first_inputs = _inputs(b, range(2, 7))
    first = build_plan(first_inputs, KEEP, TOK)
    other = _inputs(b, range(12, 17), far=range(0, 9), previous=previous_history(first, first_inputs))
    plan = build_plan(other, KEEP, TOK)
    fresh = build_plan(dataclasses.replace(other, previous=None), KEEP, TOK)
    assert sorted(_history(plan)) == sorted(_history(fresh))
    assert not _groups(plan) & set(range(1, 8))
    assert not any("kept from the previous plan" in i.detail for i in plan.included)


def test_a_kept_prefix_ends_at_the_first_atom_far_below_the_cut_and_never_ends_on_one():
    score = [5.0, -9.0, 4.0, 3.0, 0.0, -9.0]  # units 0..5; the fresh plan would take 2 (then 3 is the best left out)
    tokens = [10] * 6
    common = dict(score=score, fresh_order=[0, 2, 3, 4, 1, 5], tokens=tokens, user_units=[-1] * 6,
                  taken=bytearray(6), remaining=20, share=60)
    kept = ["u0", "u1", "u2", "u4", "u5"]

    def unit_of(atom: str) -> int:
        return int(atom[1:])

    assert kept_prefix(kept, unit_of, margin=1.0, **common) == ([0], 1)  # u1 is far below the cut (3.0 - 1.0)
    # slack lets the atoms below the cut stay where atoms above it follow; the dead tail (u5) goes all the same
    assert kept_prefix(kept, unit_of, margin=1.0, slack=20, **common) == ([0, 1, 2], 3)
    assert kept_prefix(kept, unit_of, margin=20.0, **common) == ([0, 1, 2, 4, 5], 5)
    assert kept_prefix(kept, unit_of, margin=20.0, **{**common, "share": 25}) == ([0, 1], 2)  # the share caps it
    assert kept_prefix(["u0", "gone", "u2"], lambda a: -1 if a == "gone" else unit_of(a), margin=20.0,
                       **common) == ([0], 1)  # an atom no longer in the history ends the prefix
    # an atom in already (the latest turn) is passed over and stays in the span; kept atoms after it follow
    taken = bytearray(6)
    taken[2] = 1
    assert kept_prefix(kept, unit_of, margin=20.0, **{**common, "taken": taken}) == ([0, 1, 4, 5], 5)


def test_a_changed_budget_pin_or_order_picks_afresh():
    b = _session()
    first_inputs = _inputs(b, range(2, 7))
    previous = previous_history(build_plan(first_inputs, KEEP, TOK), first_inputs)
    related = _inputs(b, range(4, 9), previous=previous)
    assert kept_atoms(related, KEEP) == previous.atoms
    pin = Pin(id="p1", target="text:note", kind="sticky", content="a note")
    for changed in (dataclasses.replace(related, budget=700), dataclasses.replace(related, pins=(pin,)),
                    dataclasses.replace(related, mode="heavy")):
        assert kept_atoms(changed, KEEP) is None
        assert _history(build_plan(changed, KEEP, TOK)) == \
            _history(build_plan(dataclasses.replace(changed, previous=None), KEEP, TOK))
    assert kept_atoms(related, CACHE) is None and kept_atoms(related, PlannerConfig()) is None


def test_the_previous_plan_enters_the_plan_id_only_where_it_is_kept():
    b = _session()
    first_inputs = _inputs(b, range(2, 7))
    previous = previous_history(build_plan(first_inputs, KEEP, TOK), first_inputs)
    related = _inputs(b, range(4, 9), previous=previous)
    without = dataclasses.replace(related, previous=None)
    for config in (PlannerConfig(), CACHE):  # the previous plan changes nothing there, nor does the id
        assert plan_id(related, config, TOK.name) == plan_id(without, config, TOK.name) == \
            build_plan(related, config, TOK).plan_id
    assert plan_id(related, KEEP, TOK.name) != plan_id(without, KEEP, TOK.name)
    assert build_plan(related, KEEP, TOK) == build_plan(related, KEEP, TOK)


def test_the_next_turn_of_a_live_session_opens_with_what_the_last_plan_sent_before_its_state_block():
    b = _session()
    first_inputs = _inputs(b, range(2, 7), state_block="### STATE\nGoal: subjects")
    first = build_plan(first_inputs, KEEP, TOK)
    b.messages[-1:] = []  # the question becomes a turn with a reply, and a new question follows
    b.group -= 1
    b.turn("a question", "an answer about subject 3 " * 4)
    b.turn("a next question", reply="")
    following = _inputs(b, range(2, 7), state_block="### STATE\nGoal: subjects, rewritten",
                        previous=previous_history(first, first_inputs))
    plan = build_plan(following, KEEP, TOK)
    order = [i.kind for i in sorted(plan.included, key=lambda i: i.order)]
    assert order.index("state") > max(n for n, kind in enumerate(order) if kind == "history_atom")
    units = payload_units(first)
    before_state = next(n for n, i in enumerate(sorted(first.included, key=lambda i: i.order)) if i.kind == "state")
    assert shared_prefix_tokens(units, payload_units(plan)) == sum(t for _k, t in units[:before_state])
    fresh = payload_units(build_plan(dataclasses.replace(following, previous=None), KEEP, TOK))
    assert shared_prefix_tokens(units, fresh) < sum(t for _k, t in units[:before_state])
