"""Branches and time travel in the engine: branch-scoped state, plans that record their branch, plan diffs,
and the JSONL export that ``ctxbench import`` reads back."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.planner.diff import diff_plans
from ctxbench.records.errors import NotFound
from ctxbench.records.messages import ToolCall
from ctxbench.service.timeline import Timeline
from ctxbench.service.workbench import Workbench
from ctxbench.store import db, schema
from plan_requests import plan_of

LONG_SESSION = Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "long_session.jsonl"


@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "b.db", Config()) as bench:
        yield bench


def _turn(wb, sid, text, reply="ok"):
    user = wb.messages.append(sid, "user", text)
    call = ToolCall(f"c{user.id}", "grep", '{"pattern": "cents"}')
    wb.messages.append(sid, "assistant", "", tool_calls=(call,))
    wb.messages.append(sid, "tool", f"match for {text}", tool_call_id=call.id, tool_name="grep")
    wb.messages.append(sid, "assistant", reply)
    return user.group_id


def _session(wb):
    sid = wb.new_session("t")
    for n in range(4):
        _turn(wb, sid, f"step {n}: keep invoice totals in integer cents")
    wb.pins.add(sid, "group:1", "sticky")
    wb.activation.set(sid, {"group:2": 0.7})
    wb.memory.set_state(sid, "### STATE\nGoal: cents everywhere")
    wb.memory.set_scratchpad(sid, "todo: rounding")
    wb.update_settings(sid, budget=4000)
    return sid


def test_a_fork_inherits_the_branch_state_and_then_they_are_independent(wb):
    sid = _session(wb)
    timeline = Timeline(wb, sid)
    fork = timeline.fork("try-b")
    assert fork.name == "try-b" and fork.active and fork.parent == "main"
    assert [p.target for p in wb.pins.list(sid)] == ["group:1"]
    assert wb.activation.scores(sid) == {"group:2": 0.7}
    assert wb.memory.state(sid) == "### STATE\nGoal: cents everywhere"
    assert wb.memory.scratchpad(sid) == "todo: rounding"
    assert wb.settings(sid).budget == 4000

    wb.pins.add(sid, "card:ledger.total", "sticky")  # on try-b only
    wb.activation.set(sid, {"group:3": 1.0})
    wb.memory.set_state(sid, "### STATE\nGoal: try floats")
    wb.update_settings(sid, budget=2000, strategy="hybrid")
    timeline.switch("main")
    assert [p.target for p in wb.pins.list(sid)] == ["group:1"]
    assert wb.activation.scores(sid) == {"group:2": 0.7}
    assert wb.memory.state(sid) == "### STATE\nGoal: cents everywhere"
    assert (wb.settings(sid).budget, wb.settings(sid).strategy) == (4000, Config().planner.default_strategy)
    wb.pins.add(sid, "text:main only", "sticky")
    timeline.switch("try-b")
    assert {p.target for p in wb.pins.list(sid)} == {"group:1", "card:ledger.total"}
    assert wb.settings(sid).budget == 2000


@pytest.mark.parametrize("strategy", ["window", "hybrid", "levels", "semantic", "fused"])
def test_work_on_the_child_leaves_the_parents_plan_unchanged(wb, strategy):
    sid = _session(wb)
    wb.update_settings(sid, strategy=strategy)
    timeline = Timeline(wb, sid)
    last = wb.messages.history(sid)[-1].group_id
    before = plan_of(wb, sid, None, current_group=last, store=False)
    timeline.fork("child")
    _turn(wb, sid, "on the child: switch to floats")
    wb.pins.add(sid, "card:money.Money", "sticky")
    wb.activation.set(sid, {"card:money.Money": 1.0})
    wb.memory.set_state(sid, "### STATE\nGoal: floats")
    wb.update_settings(sid, budget=1500)
    timeline.switch("main")
    after = plan_of(wb, sid, None, current_group=last, store=False)
    assert after.plan_id == before.plan_id
    assert after.messages() == before.messages()


def test_a_fork_at_an_earlier_turn_sees_the_history_and_state_up_to_it(wb):
    sid = wb.new_session("t")
    g1 = _turn(wb, sid, "first")
    wb.memory.set_state(sid, "### STATE\nGoal: one")
    g2 = _turn(wb, sid, "second")
    wb.memory.set_state(sid, "### STATE\nGoal: two")
    _turn(wb, sid, "third")
    fork = Timeline(wb, sid).fork("early", at_turn=g1)
    assert fork.fork_turn == g1 and fork.turns == 1 and fork.own_turns == 0
    assert {m.group_id for m in wb.messages.history(sid)} == {g1}
    assert wb.memory.state(sid) == "### STATE\nGoal: one"
    with pytest.raises(NotFound):
        Timeline(wb, sid).fork("nowhere", at_turn=g2 + 50)
    with pytest.raises(ValueError, match="branch name"):
        Timeline(wb, sid).fork("two words")


def test_branch_summaries_name_fork_point_head_and_turns(wb):
    sid = _session(wb)
    timeline = Timeline(wb, sid)
    timeline.fork("b", at_turn=2)
    _turn(wb, sid, "own turn on b")
    summaries = {b.name: b for b in timeline.branches()}
    main_, b = summaries["main"], summaries["b"]
    assert (main_.turns, main_.own_turns, main_.head_turn, main_.fork_turn, main_.active) == (4, 4, 4, None, False)
    assert (b.parent, b.fork_turn, b.turns, b.own_turns, b.active) == ("main", 2, 3, 1, True)
    assert b.head_turn == 5


def test_plans_record_their_branch_and_fork_point(wb):
    sid = _session(wb)
    first = plan_of(wb, sid, "where are totals rounded?")
    Timeline(wb, sid).fork("b", at_turn=3)
    second = plan_of(wb, sid, "where are totals rounded?")
    origin = wb.plans.origin(second.plan_id)
    assert (origin.branch_name, origin.parent_name, origin.group_id) == ("b", "main", None)
    fork_message = [m for m in wb.messages.history(sid) if m.group_id == 3][-1]
    assert origin.fork_message_id == fork_message.id
    assert wb.plans.origin(first.plan_id).branch_name == "main"


def test_the_v5_migration_moves_branch_state_to_the_active_branch(tmp_path):
    path = tmp_path / "v4.db"
    conn = db.connect(path)
    db.migrate(conn, schema.COMPONENT, schema.MIGRATIONS[:4])
    with db.transaction(conn):
        conn.execute("INSERT INTO sessions (id, title, created_at, settings, active_branch) "
                     "VALUES ('s1', 'old', 't', '{\"budget\": 3000}', 'b1')")
        conn.execute("INSERT INTO branches (id, session_id, name, created_at) VALUES ('b1', 's1', 'main', 't')")
        for n, target in ((1, "group:1"), (2, "group:2")):
            conn.execute("INSERT INTO pins (n, session_id, target, kind, created_at) VALUES (?, 's1', ?, 'sticky', 't')",
                         (n, target))
        conn.execute("INSERT INTO pins (n, session_id, target, kind, created_at) VALUES (7, 's1', 'x', 'sticky', 't')")
        conn.execute("DELETE FROM pins WHERE n = 7")  # p7 existed once: its number must never come back
        conn.execute("INSERT INTO activation (session_id, item_id, score, updated_at) VALUES ('s1', 'group:1', 0.5, 't')")
        conn.execute("INSERT INTO session_state (session_id, content, created_at) VALUES ('s1', '### STATE\nGoal: x', 't')")
        conn.execute("INSERT INTO scratchpad (session_id, content, updated_at) VALUES ('s1', 'pad', 't')")
    conn.close()
    with Workbench(path, Config()) as wb:
        assert [p.id for p in wb.pins.list("s1")] == ["p1", "p2"]
        assert wb.pins.add("s1", "group:3", "sticky").id == "p8"
        assert wb.activation.scores("s1") == {"group:1": 0.5}
        assert wb.memory.state("s1") == "### STATE\nGoal: x"
        assert wb.memory.scratchpad("s1") == "pad"
        assert wb.settings("s1").budget == 3000


def test_a_diff_says_what_entered_left_and_changed_with_reasons_on_both_sides(wb):
    sid = _session(wb)
    for n in range(12):
        _turn(wb, sid, f"later step {n}: rename the cents helpers", reply="renamed " + "and checked " * 20)
    small = plan_of(wb, sid, "invoice totals in cents", budget=600, store=False)
    large = plan_of(wb, sid, "invoice totals in cents", budget=4000, store=False)
    grown = diff_plans(small, large)
    assert grown.entered and not grown.left
    for item in grown.entered:
        assert item.after.included and item.before is not None and item.before.reason == "over_budget"
    assert grown.summary.startswith("+") and grown.summary.endswith(f"{large.used_tokens - small.used_tokens:+,} tok")
    shrunk = diff_plans(large, small)
    assert {i.id for i in shrunk.left} == {i.id for i in grown.entered}
    assert all(i.after.reason == "over_budget" and i.before.included for i in shrunk.left)
    assert diff_plans(large, large).empty
    data = shrunk.to_json()
    assert set(data) >= {"entered", "left", "changed"}
    assert set(data["left"][0]) >= {"id", "section", "tokens", "reasons"}
    assert data["left"][0]["reasons"] == [shrunk.left[0].before.reason, "over_budget"]


def test_export_reads_back_as_the_same_messages(tmp_path):
    runner = CliRunner()
    dbp = str(tmp_path / "x.db")
    imported = runner.invoke(main, ["import", str(LONG_SESSION), "--db", dbp])
    first = imported.output.strip().splitlines()[-1]
    out = tmp_path / "e.jsonl"
    assert runner.invoke(main, ["export", first, "-o", str(out), "--db", dbp]).exit_code == 0
    second = runner.invoke(main, ["import", str(out), "--db", dbp]).output.strip().splitlines()[-1]
    again = tmp_path / "f.jsonl"
    assert runner.invoke(main, ["export", second, "-o", str(again), "--db", dbp]).exit_code == 0
    assert again.read_bytes() == out.read_bytes()
    with Workbench(Path(dbp), Config()) as wb:
        def shape(sid):
            return [(m.group_id, m.role, m.content, m.tool_calls, m.tool_call_id, m.tool_name, m.parsing_strategy,
                     m.flags) for m in wb.messages.history(sid)]

        assert shape(first) == shape(second) and len(shape(first)) > 500


def test_branch_commands_and_show_name_the_branch(tmp_path):
    runner = CliRunner()
    dbp = str(tmp_path / "c.db")
    sid = runner.invoke(main, ["import", str(LONG_SESSION), "--db", dbp]).output.strip().splitlines()[-1]
    forked = runner.invoke(main, ["branch", "fork", sid, "alt", "--at", "5", "--db", dbp])
    assert forked.exit_code == 0 and "forked alt from main after turn 5" in forked.output
    listing = json.loads(runner.invoke(main, ["branch", "list", sid, "--json", "--db", dbp]).output)
    assert [(b["name"], b["active"], b["fork_turn"]) for b in listing] == [("main", False, None), ("alt", True, 5)]
    plan = json.loads(runner.invoke(main, ["plan", "what next?", "--session", sid, "--json", "--no-semantic",
                                           "--db", dbp]).output)
    shown = runner.invoke(main, ["show", plan["plan_id"], "--db", dbp])
    assert "branch alt (forked from main at message" in shown.output
    assert runner.invoke(main, ["branch", "switch", sid, "main", "--db", dbp]).exit_code == 0
    other = json.loads(runner.invoke(main, ["plan", "what next?", "--session", sid, "--json", "--no-semantic",
                                            "--db", dbp]).output)
    diff = json.loads(runner.invoke(main, ["diff", plan["plan_id"], other["plan_id"], "--json", "--db", dbp]).output)
    assert diff["entered"] and diff["before"] == plan["plan_id"]  # the main branch sees turns alt does not
    for args in (["branch", "switch", sid, "nope"], ["branch", "fork", sid, "bad name"],
                 ["branch", "fork", sid, "x", "--at", "9999"], ["branch", "list", "s_missing"],
                 ["diff", plan["plan_id"], "plan_missing"]):
        result = runner.invoke(main, [*args, "--db", dbp])
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, args
