"""What-if plans are the plans the planning door gives under the same settings, and they are never stored."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ctxbench.service.timeline import Timeline
from ctxbench.service.workbench import Workbench
from plan_requests import plan_of

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "short_session.jsonl"


@pytest.mark.parametrize("choices", [{}, {"mode": "heavy", "budget": 900}, {"strategy": "hybrid", "budget": 4000},
                                     {"strategy": "window", "window_groups": 1, "budget": 2000}])
def test_a_what_if_plan_is_the_plan_the_door_gives_under_those_settings(tmp_path, choices):
    with Workbench(tmp_path / "w.db") as wb:
        sid = wb.import_file(FIXTURE)
        wb.pins.add(sid, "group:2", "sticky")
        settings = wb.settings(sid).with_choices(**choices)
        stored_before = wb.conn.execute("SELECT count(*) FROM plans").fetchone()[0]
        what_if = Timeline(wb, sid).what_if("where is the ledger balanced?", None, 120).plan(settings)
        assert wb.conn.execute("SELECT count(*) FROM plans").fetchone()[0] == stored_before
        door = plan_of(wb, sid, "where is the ledger balanced?", settings, tools_tokens=120, store=False)
    assert what_if.plan_id == door.plan_id
    assert what_if.items == door.items


def test_a_what_if_curve_plans_each_budget_as_the_door_would(tmp_path):
    with Workbench(tmp_path / "w.db") as wb:
        sid = wb.import_file(FIXTURE)
        settings = wb.settings(sid)
        points = Timeline(wb, sid).what_if("why does the ledger fail?", None, 0).curve(settings, 3000)
        door = [plan_of(wb, sid, "why does the ledger fail?", dataclasses.replace(settings, budget=p.budget),
                        store=False) for p in points]
    assert [(p.used, p.sections, p.items, p.over_budget) for p in points] == [
        (d.used_tokens, tuple(d.sections), len(d.included), d.over_budget) for d in door]
