"""Unit tests of the planner: strategies, truncation, isolation, pins, modes, budget, PlanId."""
from __future__ import annotations

import dataclasses
import json

import pytest

from ctxbench.config import ConfigError, PlannerConfig
from ctxbench.records.messages import Message, ToolCall
from ctxbench.planner import build_plan, plan_id
from ctxbench.records.plans import Memo, Pin, PlanInputs
from ctxbench.records.vocab import EXCLUDED_REASONS, INCLUDED_REASONS
from ctxbench.planner.strategies.hybrid import rrf_scores
from ctxbench.planner.truncation import TRUNCATION_HINT
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet
from ctxbench.tokens import count_messages, get_tokenizer

from planner_helpers import SessionBuilder

TOK = get_tokenizer()
CONFIG = PlannerConfig()


def make_inputs(builder: SessionBuilder, budget: int = 4000, **kw) -> PlanInputs:
    history, current = builder.split_current()
    return PlanInputs(session_id=builder.session_id, query=current[0].content, history=history,
                      current_turn=current, budget=budget, **kw)


def items_by_id(plan):
    return {item.id: item for item in plan.items}


def group_items(plan, gid):
    return [i for i in plan.items if i.kind == "history_atom" and i.id.startswith(f"atom:{gid}:")]


def chatty_session(turns: int = 12, early: str = "hello there") -> SessionBuilder:
    b = SessionBuilder()
    b.turn(early, "sure")
    for n in range(1, turns):
        b.turn(f"question number {n} about widgets and layout " * 3, f"answer {n} " * 20)
    b.turn("what now?", reply="")
    return b


# ---- window -------------------------------------------------------------------------------

def test_window_excludes_older_groups_as_outside_window():
    b = chatty_session(10)
    plan = build_plan(make_inputs(b, budget=20000, window_groups=3), CONFIG, TOK)
    for gid in range(0, 7):
        assert {i.reason for i in group_items(plan, gid)} == {"outside_window"}
    for gid in range(7, 10):
        assert {i.reason for i in group_items(plan, gid)} == {"recent_window"}
        assert all(i.included for i in group_items(plan, gid))


def test_window_fills_newest_first_and_does_not_stop_at_a_misfit():
    b = SessionBuilder()
    for n in range(6):
        b.turn(f"short question {n}", f"short answer {n}")
    b.turn("read the big file", "here it is", tools=(("read_file", "x = 1\n" * 400),))  # does not fit whole
    for n in range(6, 9):
        b.turn(f"short question {n}", f"short answer {n}")
    b.turn("and now?", reply="")
    plan = build_plan(make_inputs(b, budget=420), CONFIG, TOK)
    whole = {g for g in range(10) if group_items(plan, g) and all(i.included for i in group_items(plan, g))}
    assert {7, 8, 9} <= whole, "the newest turns first"
    big = group_items(plan, 6)
    assert any(i.included for i in big) and not all(i.included for i in big), "the misfit is taken partially"
    assert whole & {0, 1, 2, 3, 4, 5}, "older turns that still fit come after it (it used to stop there)"
    assert plan.used_tokens <= 420


def test_window_zero_means_all_groups():
    b = chatty_session(5)
    plan = build_plan(make_inputs(b, budget=50000, window_groups=0), CONFIG, TOK)
    assert all(i.included for i in plan.items if i.kind == "history_atom")


# ---- hybrid -------------------------------------------------------------------------------

def test_hybrid_pulls_in_an_early_group_that_matches_the_keyword():
    b = SessionBuilder()
    b.turn("the flux capacitor config lives in settings.toml", "noted: flux capacitor in settings.toml")
    for n in range(1, 30):
        b.turn(f"question number {n} about widgets and layout " * 3, f"answer {n} " * 20)
    b.turn("where is the flux capacitor configured?", reply="")
    window = build_plan(make_inputs(b, budget=900), CONFIG, TOK)
    assert not any(i.included for i in group_items(window, 0))
    hybrid = build_plan(make_inputs(b, budget=900, strategy="hybrid", keyword_ranking=(0, 29)), CONFIG, TOK)
    early = group_items(hybrid, 0)
    assert early and all(i.included and i.reason == "keyword_match" for i in early)
    # subset rule: groups the keyword search did not find have no score
    assert {i.reason for i in group_items(hybrid, 10)} == {"below_threshold"}


def test_hybrid_without_keyword_matches_ranks_by_recency_and_says_so():
    b = chatty_session(8)
    plan = build_plan(make_inputs(b, budget=600, strategy="hybrid"), CONFIG, TOK)
    reasons = {i.reason for i in plan.included if i.kind == "history_atom"}
    assert reasons == {"recent_window"}
    assert any("keyword search found no" in n for n in plan.notes)


def test_rrf_scores_follow_seed_000_weights():
    cfg = CONFIG.hybrid
    scores, kw, rec = rrf_scores([5, 2], [9, 5, 2], cfg)
    assert scores[5] == pytest.approx(1.5 / 61 + 1.0 / 62)
    assert scores[2] == pytest.approx(1.5 / 62 + 1.0 / 63)
    assert scores[9] == pytest.approx(1.0 / 61)
    assert kw == {5: 1, 2: 2} and rec == {9: 1, 5: 2, 2: 3}


def test_hybrid_window_groups_caps_the_count():
    b = chatty_session(10)
    plan = build_plan(make_inputs(b, budget=50000, strategy="hybrid", window_groups=2, keyword_ranking=(1, 3, 5)), CONFIG, TOK)
    included_groups = {int(i.id.split(":")[1]) for i in plan.included if i.kind == "history_atom"}
    assert included_groups == {1, 3}
    assert {i.reason for i in group_items(plan, 5)} == {"outside_window"}


# ---- levels -------------------------------------------------------------------------------

def test_levels_keeps_an_early_always_instruction():
    b = chatty_session(30, early="Always run the linter before committing.")
    window = build_plan(make_inputs(b, budget=1200, window_groups=10), CONFIG, TOK)
    assert not any(i.included for i in group_items(window, 0))
    levels = build_plan(make_inputs(b, budget=1200, strategy="levels"), CONFIG, TOK)
    user0 = next(i for i in group_items(levels, 0) if i.label.startswith("user:"))
    assert user0.included and user0.reason == "memory_level" and "permanent" in user0.detail
    assert levels.used_tokens <= 1200


def test_levels_session_level_keeps_flagged_errors_with_their_user_message():
    b = SessionBuilder()
    b.turn("run the tests", "they fail", tools=(("run_tests", "ERROR boom " * 5),))
    err_id = b.messages[-2].id
    b.messages[-2] = dataclasses.replace(b.messages[-2], flags=("error",))
    for n in range(1, 25):
        b.turn(f"question number {n} about widgets " * 3, f"answer {n} " * 20)
    b.turn("and now?", reply="")
    plan = build_plan(make_inputs(b, budget=1500, strategy="levels"), CONFIG, TOK)
    items = group_items(plan, 0)
    err = next(i for i in items if err_id in i.message_ids)
    user = next(i for i in items if i.label.startswith("user:"))
    assert err.included and "session" in err.detail
    assert user.included


# ---- semantic seam --------------------------------------------------------------------------

def test_semantic_uses_the_ranking_and_falls_back_to_recency_when_empty():
    b = chatty_session(20)
    ranked = build_plan(make_inputs(b, budget=700, strategy="semantic", semantic_ranking=((2, 0.95),)), CONFIG, TOK)
    assert all(i.included and i.reason == "semantic_match" for i in group_items(ranked, 2))
    fallback = build_plan(make_inputs(b, budget=700, strategy="semantic"), CONFIG, TOK)
    assert any("fell back to recency" in n for n in fallback.notes)
    assert not any(i.included for i in group_items(fallback, 2))
    assert {i.reason for i in fallback.included if i.kind == "history_atom"} == {"recent_window"}


# ---- truncation and isolation ---------------------------------------------------------------

def test_truncation_tiers_and_hint():
    b = SessionBuilder()
    b.turn("old turn", "done", tools=(("read_file", "x" * 4000),))
    old_result = b.messages[-2]
    b.turn("current turn", reply="", tools=tuple((f"t{n}", "y" * 7000) for n in range(7)))
    plan = build_plan(make_inputs(b, budget=100000), CONFIG, TOK)
    payload = plan.messages()
    by_call = {m.get("tool_call_id"): m["content"] for m in payload if m["role"] == "tool"}
    old = by_call[old_result.tool_call_id]
    assert old.startswith("x" * 300) and "x" * 301 not in old
    assert old.endswith(TRUNCATION_HINT.format(id=old_result.id))
    current_results = [m for m in b.messages if m.group_id == 1 and m.role == "tool"]
    for n, msg in enumerate(current_results):
        text = by_call[msg.tool_call_id]
        keep = 1000 if n < 2 else 5000  # the 5 newest keep 5,000 chars
        assert text.startswith("y" * keep) and "y" * (keep + 1) not in text
        assert text.endswith(TRUNCATION_HINT.format(id=msg.id))
    old_item = next(i for i in plan.items if old_result.id in i.message_ids)
    assert "inactive tier" in old_item.detail
    current = items_by_id(plan)["current"]
    assert "active_recent" in current.detail and "active_older" in current.detail


def test_short_tool_results_are_not_truncated():
    b = SessionBuilder()
    b.turn("old", "done", tools=(("grep", "short result"),))
    b.turn("now", reply="")
    plan = build_plan(make_inputs(b, budget=10000), CONFIG, TOK)
    assert any(m.get("content") == "short result" for m in plan.messages())


def test_tool_messages_of_another_provider_family_are_isolated_but_text_survives():
    b = SessionBuilder()
    b.turn("use gemini", "gemini says hi", tools=(("grep", "found"),), strategy="gemini")
    b.turn("use openai", "openai says hi", tools=(("grep", "found too"),), strategy="openai")
    b.turn("now", reply="")
    plan = build_plan(make_inputs(b, budget=10000, provider_family="openai"), CONFIG, TOK)
    gem = group_items(plan, 0)
    assert [i.reason for i in gem if "tool call" in i.label] == ["isolated_strategy"]
    assert all(i.included for i in gem if "tool call" not in i.label)
    assert all(i.included for i in group_items(plan, 1))
    plan_gemini = build_plan(make_inputs(b, budget=10000, provider_family="gemini_gca"), CONFIG, TOK)
    assert [i.reason for i in group_items(plan_gemini, 1) if "tool call" in i.label] == ["isolated_strategy"]
    assert all(i.included for i in group_items(plan_gemini, 0))


def test_parallel_tool_calls_and_results_form_one_atom():
    b = SessionBuilder()
    b.add("user", "two things")
    b.add("assistant", "", tool_calls=(ToolCall("a", "grep", "{}"), ToolCall("b", "read_file", "{}")))
    b.add("tool", "result a", tool_call_id="a", tool_name="grep")
    b.add("tool", "result b", tool_call_id="b", tool_name="read_file")
    b.add("assistant", "done")
    b.group += 1
    b.turn("next", reply="")
    plan = build_plan(make_inputs(b, budget=10000), CONFIG, TOK)
    atoms = group_items(plan, 0)
    assert [len(i.message_ids) for i in atoms] == [1, 3, 1]


def test_dropped_groups_are_excluded_by_user():
    b = chatty_session(4)
    plan = build_plan(make_inputs(b, budget=50000, dropped_groups=(2,)), CONFIG, TOK)
    assert {i.reason for i in group_items(plan, 2)} == {"dropped_by_user"}
    assert all(i.included for i in group_items(plan, 1))


# ---- pins -------------------------------------------------------------------------------

def test_sticky_group_pin_is_mandatory_and_not_included_twice():
    b = chatty_session(20)
    pins = (Pin("p1", "group:1", "sticky", label="early"),)
    plan = build_plan(make_inputs(b, budget=600, pins=pins), CONFIG, TOK)
    assert all(i.included and i.reason == "pinned_sticky" and i.pin == "sticky" for i in group_items(plan, 1))
    pin_item = items_by_id(plan)["pin:p1"]
    assert not pin_item.included and pin_item.reason == "duplicate"
    ids = [mid for i in plan.included for mid in i.message_ids]
    assert len(ids) == len(set(ids))


def test_pin_kinds_and_expired_leases():
    b = chatty_session(3)
    pins = (
        Pin("p1", "text:rule", "sticky", label="rule", content="tabs only"),
        Pin("p2", "text:lease", "leased", content="leased note", ttl=2),
        Pin("p3", "text:gone", "leased", content="expired note", ttl=0),
        Pin("p4", "text:eph", "ephemeral", content="thin card"),
        Pin("p5", "text:rule", "leased", content="same target", ttl=3),
    )
    plan = build_plan(make_inputs(b, budget=50000, pins=pins), CONFIG, TOK)
    items = items_by_id(plan)
    assert (items["pin:p1"].included, items["pin:p1"].reason) == (True, "pinned_sticky")
    assert (items["pin:p2"].included, items["pin:p2"].reason) == (True, "pinned_leased")
    assert (items["pin:p3"].included, items["pin:p3"].reason) == (False, "lease_expired")
    assert (items["pin:p4"].included, items["pin:p4"].reason) == (True, "pinned_ephemeral")
    assert (items["pin:p5"].included, items["pin:p5"].reason) == (False, "duplicate")


def test_card_pin_makes_the_retrieved_card_a_duplicate():
    b = chatty_session(2)
    hits = (RetrievalHit("pkg.mod.f", "pkg/mod.py", 3, 0.9, provenance="semantic", card_text="def f(): ..."),)
    rs = RetrievalSet(RetrievalSet.make_id("q", hits), "q", hits)
    pins = (Pin("p1", "card:pkg.mod.f", "leased", ttl=2),)
    plan = build_plan(make_inputs(b, budget=50000, pins=pins, retrieval=rs), CONFIG, TOK)
    items = items_by_id(plan)
    assert items["pin:p1"].included
    assert "def f(): ..." in items["pin:p1"].messages[0]["content"]
    assert items["card:pkg.mod.f"].reason == "duplicate"


# ---- modes and retrieval ------------------------------------------------------------------

def _hits(n: int, excerpt: str = ""):
    hits = tuple(
        RetrievalHit(f"pkg.mod.f{k}", "pkg/mod.py", k, 1.0 - k / 100, provenance=("semantic", "keyword", "graph")[k % 3],
                     card_text=f"def f{k}(x): ...", excerpt=excerpt)
        for k in range(n)
    )
    return RetrievalSet(RetrievalSet.make_id("q", hits), "q", hits, scaffold="pkg/\n  mod.py")


def test_modes_control_cards_and_scaffold():
    b = chatty_session(2)
    off = build_plan(make_inputs(b, budget=50000, mode="off", retrieval=_hits(3)), CONFIG, TOK)
    assert {i.reason for i in off.items if i.kind in ("symbol_card", "scaffold")} == {"mode_off"}
    light = build_plan(make_inputs(b, budget=50000, mode="light", retrieval=_hits(8)), CONFIG, TOK)
    cards = [i for i in light.items if i.kind == "symbol_card"]
    assert sum(i.included for i in cards) == CONFIG.mode("light").max_cards
    assert {i.reason for i in cards if not i.included} == {"card_limit"}  # above the floor, past the mode's cards
    assert {i.reason for i in cards if i.included} == {"semantic_match", "keyword_match", "graph_neighbour"}
    assert items_by_id(light)["scaffold"].reason == "scaffold"
    assert light.mode == "light"


def test_heavy_adds_excerpts_and_cards_respect_the_retrieval_share():
    b = chatty_session(2)
    heavy = build_plan(make_inputs(b, budget=50000, mode="heavy", retrieval=_hits(2, excerpt="body line\n" * 5)), CONFIG, TOK)
    card = items_by_id(heavy)["card:pkg.mod.f0"]
    assert "body line" in card.messages[0]["content"]
    small = build_plan(make_inputs(b, budget=1000, mode="heavy", retrieval=_hits(12, excerpt="body line\n" * 30)), CONFIG, TOK)
    cap = int(1000 * CONFIG.mode("heavy").retrieval_share)
    assert dict(small.sections)["retrieval"] <= cap


def test_unknown_mode_and_strategy_are_errors():
    b = chatty_session(2)
    with pytest.raises(ConfigError):
        build_plan(make_inputs(b, mode="turbo"), CONFIG, TOK)
    with pytest.raises(ValueError):
        build_plan(make_inputs(b, strategy="magic"), CONFIG, TOK)


def test_the_planner_reads_its_own_section_and_refuses_the_whole_config():
    from ctxbench.config import Config

    inputs = make_inputs(chatty_session(2))
    with pytest.raises(TypeError, match=r"\[planner\] section"):
        build_plan(inputs, Config(), TOK)
    with pytest.raises(TypeError, match=r"\[planner\] section"):
        plan_id(inputs, Config(), TOK.name)
    assert build_plan(inputs, Config().planner, TOK).plan_id == plan_id(inputs, CONFIG, TOK.name)


# ---- layers, budget, determinism ----------------------------------------------------------

def test_layers_render_in_payload_order():
    b = chatty_session(3)
    inputs = make_inputs(b, budget=50000, state_block="Goal: ship", scratchpad="- step 1",
                         memos=(Memo(2, "memo two"), Memo(1, "memo one")), pins=(Pin("p1", "text:x", "sticky", content="pinned"),),
                         retrieval=_hits(1))
    plan = build_plan(inputs, CONFIG, TOK)
    order = [i.id for i in plan.included]
    assert order[:8] == ["system", "state", "scratchpad", "memo:1", "memo:2", "scaffold", "pin:p1", "card:pkg.mod.f0"]
    assert order[-1] == "current"
    assert plan.messages()[1]["content"].startswith("### STATE")
    assert items_by_id(plan)["state"].reason == "state"


def test_over_budget_when_mandatory_items_exceed():
    b = SessionBuilder()
    b.turn("hello", "hi")
    b.turn("a very long current question " * 200, reply="")
    inputs = make_inputs(b, budget=300, state_block="Goal: x", pins=(Pin("p1", "text:x", "sticky", content="rule"),))
    plan = build_plan(inputs, CONFIG, TOK)
    assert plan.over_budget
    assert "current turn" in plan.over_budget_reason and str(plan.used_tokens) in plan.over_budget_reason
    items = items_by_id(plan)
    assert items["current"].included and items["system"].included and items["pin:p1"].included
    assert items["state"].reason == "over_budget"
    assert all(i.reason == "over_budget" for i in group_items(plan, 0))
    assert plan.used_tokens == count_messages(TOK, plan.messages())


def test_budget_is_never_exceeded_and_counts_are_exact():
    b = chatty_session(15)
    for budget in (120, 300, 777, 1500, 5000):
        for strategy in ("window", "hybrid", "levels", "semantic"):
            plan = build_plan(make_inputs(b, budget=budget, strategy=strategy, keyword_ranking=(3, 1)), CONFIG, TOK)
            assert plan.used_tokens == count_messages(TOK, plan.messages())
            assert plan.over_budget or plan.used_tokens <= budget
            assert sum(t for _s, t in plan.sections) + 3 == plan.used_tokens


def test_every_reason_is_from_the_vocabulary():
    b = chatty_session(6)
    plan = build_plan(make_inputs(b, budget=400, retrieval=_hits(9)), CONFIG, TOK)
    for item in plan.items:
        assert item.reason in (INCLUDED_REASONS if item.included else EXCLUDED_REASONS)


def test_plan_id_is_stable_and_sensitive():
    b = chatty_session(5)
    pins = (Pin("p1", "text:a", "sticky", content="a"), Pin("p2", "text:b", "leased", content="b", ttl=1))
    inputs = make_inputs(b, budget=900, pins=pins, dropped_groups=(1, 2))
    first = build_plan(inputs, CONFIG, TOK)
    again = build_plan(dataclasses.replace(inputs, pins=pins[::-1], dropped_groups=(2, 1)), CONFIG, TOK)
    assert first.plan_id == again.plan_id == plan_id(inputs, CONFIG, TOK.name)
    assert json.dumps(first.to_json()) == json.dumps(again.to_json())
    assert first.messages() == again.messages()
    assert first.plan_id.startswith("plan_") and len(first.plan_id) == 25
    changed_msg = list(inputs.history)
    changed_msg[0] = dataclasses.replace(changed_msg[0], content="something else")
    variants = [
        dataclasses.replace(inputs, budget=901),
        dataclasses.replace(inputs, history=tuple(changed_msg)),
        dataclasses.replace(inputs, mode="heavy"),
        dataclasses.replace(inputs, strategy="levels"),
        dataclasses.replace(inputs, state_block="new"),
    ]
    ids = {plan_id(v, CONFIG, TOK.name) for v in variants}
    assert len(ids) == len(variants) and first.plan_id not in ids
    assert plan_id(inputs, dataclasses.replace(CONFIG, window_groups=3), TOK.name) != first.plan_id
    assert plan_id(inputs, CONFIG, "estimate") != first.plan_id


def test_fresh_message_objects_give_the_same_plan():
    b = chatty_session(5)
    inputs = make_inputs(b, budget=700)
    copy = dataclasses.replace(inputs, history=tuple(dataclasses.replace(m) for m in inputs.history))
    assert json.dumps(build_plan(inputs, CONFIG, TOK).to_json()) == json.dumps(build_plan(copy, CONFIG, TOK).to_json())


def test_estimate_tokenizer_marks_the_plan():
    b = chatty_session(3)
    plan = build_plan(make_inputs(b, budget=2000), CONFIG, get_tokenizer("estimate"))
    assert plan.estimated and any("estimate" in n for n in plan.notes)
    assert not build_plan(make_inputs(b, budget=2000), CONFIG, TOK).estimated


def test_system_messages_in_history_are_mandatory():
    b = SessionBuilder()
    b.turn("first", "ok", system="You must answer in French.")
    for n in range(10):
        b.turn(f"q{n} " * 30, f"a{n} " * 30)
    b.turn("now", reply="")
    plan = build_plan(make_inputs(b, budget=300), CONFIG, TOK)
    sysmsg = next(i for i in plan.items if i.kind == "system_message")
    assert sysmsg.included and sysmsg.reason == "mandatory"
    assert plan.messages()[1]["content"] == "You must answer in French."


def test_current_turn_without_messages_uses_the_query():
    plan = build_plan(PlanInputs("s", "just a question", (), (), budget=1000), CONFIG, TOK)
    assert plan.messages()[-1] == {"role": "user", "content": "just a question"}
