"""Plans go through one door: a frozen PlanRequest in, a ContextPlan out, the settings one checked value."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ctxbench.llm.replay import replay
from ctxbench.records.errors import SettingsError
from ctxbench.records.plan_request import NEXT_TURN, PlanRequest, SentMessage, StoredTurn
from ctxbench.service.workbench import Workbench

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "short_session.jsonl"
QUERY = "where is the ledger balanced?"


@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "door.db") as workbench:
        workbench.session = workbench.import_file(FIXTURE)
        yield workbench


def test_a_request_without_settings_plans_with_the_session_s_stored_settings(wb):
    wb.update_settings(wb.session, strategy="hybrid", budget=1500)
    inputs = wb.planning.inputs(PlanRequest(wb.session, QUERY))
    assert (inputs.strategy, inputs.budget) == ("hybrid", 1500)
    assert inputs.current_turn[0].id == 0 and inputs.current_turn[0].content == QUERY  # the next turn, pending


def test_settings_travel_as_a_value_and_only_the_given_choices_change(wb):
    stored = wb.settings(wb.session)
    chosen = stored.with_choices(mode="heavy", budget=None)
    assert chosen == dataclasses.replace(stored, mode="heavy")
    inputs = wb.planning.inputs(PlanRequest(wb.session, QUERY, chosen))
    assert (inputs.mode, inputs.budget, inputs.strategy) == ("heavy", stored.budget, stored.strategy)


def test_a_request_with_a_bad_setting_is_refused_with_one_line(wb):
    bad = dataclasses.replace(wb.settings(wb.session), strategy="telepathy")
    with pytest.raises(SettingsError, match="telepathy"):
        wb.planning.plan(PlanRequest(wb.session, QUERY, bad))


def test_a_request_is_a_frozen_value():
    request = PlanRequest("s_1", QUERY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.query = "other"  # type: ignore[misc]
    assert request.turn == NEXT_TURN and request.store is False


def test_a_stored_turn_is_planned_from_its_own_messages_and_its_user_message(wb):
    last = max(m.group_id for m in wb.visible_messages(wb.session))
    inputs = wb.planning.inputs(PlanRequest(wb.session, None, turn=StoredTurn(last)))
    assert {m.group_id for m in inputs.current_turn} == {last}
    assert inputs.query == next(m.content for m in inputs.current_turn if m.role == "user")
    assert all(m.group_id != last for m in inputs.history)


def test_a_sent_message_gets_the_plan_replay_gives_it(wb):
    step = next(s for s in replay(wb, wb.session) if s.turn == 3)
    plan = wb.planning.plan(PlanRequest(wb.session, None, turn=SentMessage(step.user_message.id)))
    assert plan.plan_id == step.plan.plan_id


def test_only_a_request_that_asks_for_it_is_stored(wb):
    draft = wb.planning.plan(PlanRequest(wb.session, QUERY))
    assert all(p.plan_id != draft.plan_id for p in wb.plans.list(wb.session))
    kept = wb.planning.plan(PlanRequest(wb.session, QUERY, store=True))
    assert kept.plan_id == draft.plan_id and wb.plans.get(kept.plan_id).plan_id == kept.plan_id


def test_a_plan_that_keeps_the_cache_is_handed_what_the_previous_turns_plan_sent(tmp_path):
    from ctxbench.config import Config
    from ctxbench.planner.cache import previous_history

    config = Config()
    config = dataclasses.replace(config, planner=dataclasses.replace(config.planner, order="cache",
                                                                     cache_keep_share=0.7))
    with Workbench(tmp_path / "keep.db", config) as wb:
        session = wb.import_file(FIXTURE)
        last = max(m.group_id for m in wb.visible_messages(session))
        assert wb.planning.inputs(PlanRequest(session, QUERY)).previous is None  # no plan stored yet
        before = wb.planning.plan(PlanRequest(session, None, turn=StoredTurn(last), store=True))
        inputs = wb.planning.inputs(PlanRequest(session, QUERY))  # the next turn
        assert inputs.previous == previous_history(before, wb.plans.inputs(before.plan_id))
        assert inputs.previous.atoms == tuple(i.id for i in sorted(before.included, key=lambda i: i.order)
                                              if i.kind == "history_atom") != ()
        plan = wb.planning.build(inputs)
        assert any("kept from the previous plan" in i.detail for i in plan.included)
        other = wb.settings(session).with_choices(budget=4000)  # the user changed the budget: nothing is kept
        changed = wb.planning.build(wb.planning.inputs(PlanRequest(session, QUERY, other)))
        assert not any("kept from the previous plan" in i.detail for i in changed.included)
    with Workbench(tmp_path / "plain.db") as wb:  # the default hands no previous plan
        session = wb.import_file(FIXTURE)
        last = max(m.group_id for m in wb.visible_messages(session))
        wb.planning.plan(PlanRequest(session, None, turn=StoredTurn(last), store=True))
        assert wb.planning.inputs(PlanRequest(session, QUERY)).previous is None
