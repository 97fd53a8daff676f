"""Workbench.plan with the real planner: plans are stored, rebuilt exactly, and deterministic."""
from __future__ import annotations

import pytest

from ctxbench.config import Config
from ctxbench.records.messages import ToolCall
from ctxbench.service.workbench import Workbench
from ctxbench.records.errors import UnknownPlan
from ctxbench.tokens import count_messages
from plan_requests import inputs_of, plan_of


@pytest.fixture
def wb(tmp_path):
    bench = Workbench(tmp_path / "store.db", Config())
    sid = bench.new_session("plan")
    bench.messages.append(sid, "system", "Project rule: all money is integer cents.")
    bench.messages.append(sid, "user", "The invoice rounding bug is in ledger/totals.py, remember that.")
    bench.messages.append(sid, "assistant", "Noted: ledger/totals.py.")
    for i in range(30):
        user = bench.messages.append(sid, "user", f"Step {i}: tidy helper number {i} in utils.")
        call = ToolCall(f"call{i}", "read_file", f'{{"path": "utils/h{i}.py"}}')
        bench.messages.append(sid, "assistant", "", tool_calls=(call,))
        bench.messages.append(sid, "tool", f"def helper_{i}():\n" + "    pass\n" * 40, tool_call_id=call.id,
                             tool_name="read_file")
        bench.messages.append(sid, "assistant", f"Helper {i} tidied.")
        assert user.group_id == i + 3
    bench.session = sid  # type: ignore[attr-defined]
    yield bench
    bench.close()


def test_plan_is_stored_and_rebuilt_exactly(wb):
    sid = wb.session
    plan = plan_of(wb, sid, "Fix the invoice rounding bug we talked about", budget=1500)
    stored = wb.plans.get(plan.plan_id)
    assert stored == plan
    assert stored.messages() == plan.messages()
    inputs = wb.plans.inputs(plan.plan_id)
    assert inputs == inputs_of(wb, sid, "Fix the invoice rounding bug we talked about", budget=1500)
    assert [p.plan_id for p in wb.plans.list(sid)] == [plan.plan_id]


def test_plan_respects_budget_and_ends_with_the_query(wb):
    plan = plan_of(wb, wb.session, "Fix the invoice rounding bug", budget=1500)
    assert plan.budget == 1500
    assert not plan.over_budget  # the system prompt and the query alone fit easily
    assert plan.used_tokens <= 1500
    payload = plan.messages()
    assert payload[-1] == {"role": "user", "content": "Fix the invoice rounding bug"}
    assert payload[0]["role"] == "system"
    assert len(plan.excluded) > 0  # 30 long turns do not fit in 1,500 tokens
    assert all(item.reason for item in plan.items)


def test_same_inputs_same_plan_id_and_bytes(wb):
    a = plan_of(wb, wb.session, "where is the rounding bug?", budget=2000, strategy="hybrid")
    b = plan_of(wb, wb.session, "where is the rounding bug?", budget=2000, strategy="hybrid")
    assert a.plan_id == b.plan_id and a == b
    c = plan_of(wb, wb.session, "where is the rounding bug?", budget=2001, strategy="hybrid")
    assert c.plan_id != a.plan_id
    assert len(wb.plans.list(wb.session)) == 2


def test_hybrid_strategy_recalls_the_early_instruction(wb):
    query = "Fix the invoice rounding bug in totals"
    window = plan_of(wb, wb.session, query, budget=1200, strategy="window")
    hybrid = plan_of(wb, wb.session, query, budget=1200, strategy="hybrid")
    early = {m.id for m in wb.messages.group(wb.session, 2)}

    def included_ids(plan):
        return {mid for item in plan.included for mid in item.message_ids}

    # the window takes the newest turns and, past the first that does not fit, smaller older ones as filler;
    # hybrid recalls the early turn for its relevance to the query
    window_reasons = {i.reason for i in window.included if set(i.message_ids) & early}
    assert window_reasons <= {"recent_window"}
    assert early <= included_ids(hybrid)
    assert {i.reason for i in hybrid.included if set(i.message_ids) & early} - {"recent_window"}
    assert any("ledger/totals.py, remember" in str(m.get("content")) for m in hybrid.messages())


def test_plan_not_stored_when_asked(wb):
    plan = plan_of(wb, wb.session, "anything", store=False)
    with pytest.raises(UnknownPlan):
        wb.plans.get(plan.plan_id)


def test_usage_reports_attach_to_a_stored_plan(wb):
    plan = plan_of(wb, wb.session, "anything")
    estimated = count_messages(wb.tokenizer, plan.messages())
    report = wb.plans.record_usage(plan.plan_id, estimated, estimated + 4, "gpt-test")
    assert wb.plans.usage_reports(plan.plan_id) == (report,)
    with pytest.raises(UnknownPlan):
        wb.plans.record_usage("p_missing", 1, 1, "m")


def test_dropped_group_is_excluded_with_its_reason(wb):
    wb.messages.drop(wb.session, 2)
    plan = plan_of(wb, wb.session, "Fix the invoice rounding bug", budget=4000, strategy="hybrid")
    reasons = {i.reason for i in plan.excluded if "2" in i.id.split(":")[1:2]}
    assert reasons == {"dropped_by_user"}
    assert all("ledger/totals.py, remember" not in str(m.get("content")) for m in plan.messages())


def test_stored_plan_inputs_survive_history_edits_and_share_messages(wb):
    sid = wb.session
    first = plan_of(wb, sid, "what did we do to helper 29?", budget=1500)
    inputs = inputs_of(wb, sid, "what did we do to helper 29?", budget=1500)
    stored_messages = wb.conn.execute("SELECT COUNT(*) FROM plan_messages").fetchone()[0]
    assert stored_messages == len(inputs.history) + 1  # every history message once, plus the pending turn
    plan_of(wb, sid, "and helper 28?", budget=1500)
    # the second plan reuses the stored history: only its own pending turn is new
    assert wb.conn.execute("SELECT COUNT(*) FROM plan_messages").fetchone()[0] == stored_messages + 1
    wb.messages.undo(sid)
    wb.messages.update(sid, wb.messages.history(sid)[-1].id, "rewritten")
    assert wb.plans.inputs(first.plan_id) == inputs
    assert wb.plans.get(first.plan_id) == first


def test_plans_stored_by_schema_v1_still_load(tmp_path):
    import sqlite3 as _sqlite3

    from ctxbench.store import codec, db, schema

    path = tmp_path / "old.db"
    conn = db.connect(path)
    db.migrate(conn, schema.COMPONENT, schema.MIGRATIONS[:1])
    conn.close()
    with Workbench(tmp_path / "scratch.db", Config()) as scratch:
        sid = scratch.new_session()
        scratch.messages.append(sid, "user", "hello")
        inputs = inputs_of(scratch, sid, "again")
        plan = plan_of(scratch, sid, "again", store=False)
    raw = _sqlite3.connect(path)
    raw.execute("INSERT INTO sessions (id, created_at) VALUES (?, 'then')", (sid,))
    raw.execute("INSERT INTO plans (plan_id, session_id, created_at, inputs, result) VALUES (?, ?, 'then', ?, ?)",
                (plan.plan_id, sid, codec.canonical_json(inputs), codec.canonical_json(plan)))
    raw.commit()
    raw.close()
    with Workbench(path, Config()) as wb:  # opening migrates to the current schema
        assert db.schema_version(wb.conn, schema.COMPONENT) == len(schema.MIGRATIONS)
        assert wb.plans.get(plan.plan_id) == plan
        assert wb.plans.inputs(plan.plan_id) == inputs
        assert wb.plans.list(sid)[0].plan_id == plan.plan_id
