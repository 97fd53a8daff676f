"""Pin lifecycle (TTL countdown, expiry, promotion) and activation scores."""
from __future__ import annotations

import pytest

from ctxbench.config import ActivationConfig, PinConfig, PlannerConfig
from ctxbench.planner import build_plan
from ctxbench.planner.activation import suggest_pins, update_activation
from ctxbench.planner.pins import advance_turn, promote
from ctxbench.records.plans import Pin, PlanInputs
from ctxbench.tokens import get_tokenizer

PINS = PinConfig()
ACT = ActivationConfig()


def test_leased_ttl_counts_down_once_per_turn_and_expires():
    pin = Pin("p1", "group:3", "leased", ttl=2, created_turn=1)
    after2 = advance_turn((pin,), 2)
    assert [p.ttl for p in after2] == [1]
    assert advance_turn(after2, 3) == ()


def test_new_pins_and_sticky_pins_pass_unchanged():
    sticky = Pin("p1", "text:a", "sticky", created_turn=0)
    fresh_lease = Pin("p2", "text:b", "leased", ttl=3, created_turn=5)
    fresh_eph = Pin("p3", "text:c", "ephemeral", created_turn=5)
    assert advance_turn((sticky, fresh_lease, fresh_eph), 5) == (sticky, fresh_lease, fresh_eph)
    assert advance_turn((sticky,), 99) == (sticky,)


def test_ephemeral_pins_last_one_plan():
    eph = Pin("p1", "card:x", "ephemeral", created_turn=4)
    assert advance_turn((eph,), 5) == ()


def test_expired_lease_is_excluded_with_lease_expired():
    pin = Pin("p1", "text:note", "leased", content="note", ttl=0)
    plan = build_plan(PlanInputs("s", "q", (), (), budget=5000, pins=(pin,)), PlannerConfig(), get_tokenizer())
    item = next(i for i in plan.items if i.id == "pin:p1")
    assert (item.included, item.reason) == (False, "lease_expired")


def test_promotion_after_n_turns_to_leased_never_sticky():
    eph = Pin("p1", "card:pkg.f", "ephemeral")
    leased = Pin("p2", "card:pkg.g", "leased", ttl=1)
    counts = {"card:pkg.f": PINS.promote_after_turns, "card:pkg.g": 50}
    promoted, untouched = promote((eph, leased), counts, PINS)
    assert promoted.kind == "leased" and promoted.ttl == PINS.default_lease_ttl and promoted.source == "promotion"
    assert untouched == leased
    assert promote((eph,), {"card:pkg.f": PINS.promote_after_turns - 1}, PINS) == (eph,)
    # however often it is referenced, a pin never becomes sticky
    again = promote(promote((eph,), counts, PINS), {"card:pkg.f": 10**6}, PINS)
    assert all(p.kind != "sticky" for p in again)


def test_task_scoped_promotion_uses_the_task_ttl():
    eph = Pin("p1", "card:pkg.f", "ephemeral", scope="task")
    (promoted,) = promote((eph,), {"p1": PINS.promote_after_turns}, PINS)
    assert promoted.ttl == PINS.task_lease_ttl


def test_activation_decays_and_rewards_references():
    scores = update_activation({"group:1": 1.0}, ["group:2"], ["card:f"], ["card:f"], ACT)
    assert scores["group:1"] == pytest.approx(ACT.decay)
    assert scores["group:2"] == pytest.approx(ACT.in_plan)
    assert scores["card:f"] == pytest.approx(ACT.referenced_by_model + ACT.referenced_by_user)
    assert list(scores) == sorted(scores)


def test_activation_forgets_items_that_decay_away():
    scores = {"group:1": ACT.forget_below}
    assert update_activation(scores, [], [], [], ACT) == {}


def test_suggest_pins_proposes_high_unpinned_items():
    scores = {"card:a": 3.0, "card:b": 2.0, "card:c": 0.1, "group:4": 2.0}
    pins = (Pin("p1", "card:a", "sticky"),)
    assert suggest_pins(scores, pins, ACT) == ("card:b", "group:4")
    assert suggest_pins(scores, (), PlannerConfig()) == ("card:a", "card:b", "group:4")
    limited = ActivationConfig(max_suggestions=1)
    assert suggest_pins(scores, (), limited) == ("card:a",)
