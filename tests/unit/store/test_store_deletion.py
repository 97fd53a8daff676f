"""Deleting a session (or a turn) deletes what was stored for it, plan messages and retrieval sets included."""
from __future__ import annotations

import pytest

from ctxbench.config import Config
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet
from ctxbench.service.workbench import Workbench
from ctxbench.store import db, schema
from plan_requests import plan_of

SECRET = "my database password is hunter2-deleteme"
HITS = (RetrievalHit("pkg.f", "pkg.py", 1, 0.9, provenance="keyword", card_text="def f(): ..."),)


def _retrieval(query: str) -> RetrievalSet:
    return RetrievalSet(RetrievalSet.make_id(query, HITS), query, HITS, scaffold="pkg/ f")


@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "ctx.db", Config()) as bench:
        yield bench


def _count(wb, sql, *args) -> int:
    return int(wb.conn.execute(sql, args).fetchone()[0])


def _session_with_plans(wb, secret: str) -> str:
    sid = wb.new_session()
    wb.messages.append(sid, "user", secret)
    wb.messages.append(sid, "assistant", "noted")
    plan = plan_of(wb, sid, "what did I tell you?", retrieval=_retrieval("what did I tell you?"))
    wb.plans.record_usage(plan.plan_id, plan.used_tokens, plan.used_tokens, "m")
    plan_of(wb, sid, "only mine", retrieval=_retrieval("only mine " + sid))
    return sid


def test_deleting_a_session_deletes_its_plans_plan_messages_and_unshared_retrieval_sets(wb):
    gone = _session_with_plans(wb, SECRET)
    kept = _session_with_plans(wb, "an ordinary message")
    wb.traces.count_references(gone, 1, ["card:pkg.f"])
    wb.traces.count_references(kept, 1, ["card:pkg.f"])
    assert _count(wb, "SELECT COUNT(*) FROM plan_messages WHERE data LIKE ?", f"%{SECRET}%") == 1
    shared = _retrieval("what did I tell you?").id

    wb.sessions.delete(gone)

    assert _count(wb, "SELECT COUNT(*) FROM plan_messages WHERE data LIKE ?", f"%{SECRET}%") == 0
    assert _count(wb, "SELECT COUNT(*) FROM plan_messages WHERE session_id = ?", gone) == 0
    assert _count(wb, "SELECT COUNT(*) FROM plans WHERE session_id = ?", gone) == 0
    assert _count(wb, "SELECT COUNT(*) FROM usage_reports") == 1  # the kept session's
    assert _count(wb, "SELECT COUNT(*) FROM reference_turns WHERE session_id = ?", gone) == 0
    ids = {r[0] for r in wb.conn.execute("SELECT id FROM retrieval_sets")}
    assert ids == {shared, _retrieval("only mine " + kept).id}  # the shared set stays, the other session's goes
    # the other session is whole: its plans still load with all their messages
    for summary in wb.plans.list(kept):
        assert wb.plans.inputs(summary.plan_id).history
    assert _count(wb, "SELECT COUNT(*) FROM reference_turns WHERE session_id = ?", kept) == 1


def test_removing_a_turn_drops_its_plan_messages_unless_a_stored_plan_refers_to_them(wb):
    sid = wb.new_session()
    wb.messages.append(sid, "user", SECRET)
    wb.messages.append(sid, "assistant", "noted")
    gid = wb.messages.history(sid)[0].group_id
    wb.messages.append(sid, "user", "another turn")
    first = plan_of(wb, sid, "q1")
    second = plan_of(wb, sid, "q2 is different")
    # while a stored plan refers to the message, the plan keeps what it was sent
    wb.messages.remove(sid, gid)
    assert _count(wb, "SELECT COUNT(*) FROM plan_messages WHERE data LIKE ?", f"%{SECRET}%") == 1
    assert wb.plans.inputs(second.plan_id).history[0].content == SECRET

    sid2 = wb.new_session()
    wb.messages.append(sid2, "user", SECRET + " again")
    gid2 = wb.messages.history(sid2)[0].group_id
    wb.messages.append(sid2, "user", "next")
    plan = plan_of(wb, sid2, "q")
    with db.transaction(wb.conn):  # a plan that is gone (its session's plans pruned) refers to nothing
        wb.conn.execute("DELETE FROM plans WHERE plan_id = ?", (plan.plan_id,))
    wb.messages.remove(sid2, gid2)
    assert _count(wb, "SELECT COUNT(*) FROM plan_messages WHERE data LIKE ?", f"%{SECRET} again%") == 0
    assert first.plan_id != second.plan_id


def test_migration_fills_the_new_columns_of_stored_plans(tmp_path):
    path = tmp_path / "v3.db"
    conn = db.connect(path)
    db.migrate(conn, schema.COMPONENT, schema.MIGRATIONS[:3])
    conn.close()
    with Workbench(path, Config()) as wb:  # already at the current schema: store a plan, then undo v4 (and v5)
        sid = wb.new_session()
        wb.messages.append(sid, "user", "hello")
        plan = plan_of(wb, sid, "again", retrieval=_retrieval("again"))
    raw = db.connect(path)
    raw.execute("UPDATE plan_messages SET session_id = NULL, message_id = NULL")
    raw.execute("UPDATE plans SET retrieval_id = NULL")
    undo_v5 = ("DROP INDEX state_by_branch", "ALTER TABLE session_state DROP COLUMN branch_id",
               "ALTER TABLE branches DROP COLUMN settings", "DROP INDEX plans_by_branch",
               "ALTER TABLE plans DROP COLUMN branch_id", "ALTER TABLE plans DROP COLUMN group_id")
    for statement in (*undo_v5, "DROP INDEX plan_messages_by_message", "DROP INDEX plans_by_retrieval",
                      "ALTER TABLE plan_messages DROP COLUMN session_id", "ALTER TABLE plan_messages DROP COLUMN message_id",
                      "ALTER TABLE plans DROP COLUMN retrieval_id", "ALTER TABLE messages DROP COLUMN external_id"):
        raw.execute(statement)
    raw.execute("UPDATE schema_versions SET version = 3 WHERE component = ?", (schema.COMPONENT,))
    raw.commit()
    raw.close()
    with Workbench(path, Config()) as wb:
        assert db.schema_version(wb.conn, schema.COMPONENT) == len(schema.MIGRATIONS)
        assert wb.conn.execute("SELECT retrieval_id FROM plans").fetchone()[0] == _retrieval("again").id
        rows = wb.conn.execute("SELECT session_id, message_id FROM plan_messages").fetchall()
        assert rows and all(r[0] == sid and r[1] is not None for r in rows)
        assert wb.plans.get(plan.plan_id) == plan


def test_deleting_a_session_deletes_the_atom_rows_of_its_plans(wb):
    def session(text: str) -> str:
        sid = wb.new_session()
        for n in range(20):
            wb.messages.append(sid, "user", f"{text} question {n} " + "word " * 40)
            wb.messages.append(sid, "assistant", f"answer {n} " + "word " * 40)
        plan = plan_of(wb, sid, "which question?", budget=400)
        assert len(plan.excluded) > 10  # the history left out is stored as atom rows
        return sid

    gone, kept = session(SECRET), session("an ordinary")
    assert _count(wb, "SELECT COUNT(*) FROM plan_chunks WHERE session_id = ?", gone) >= 1

    wb.sessions.delete(gone)

    assert _count(wb, "SELECT COUNT(*) FROM plan_chunks WHERE session_id = ?", gone) == 0
    assert _count(wb, "SELECT COUNT(*) FROM plan_chunks WHERE session_id = ?", kept) >= 1
    for summary in wb.plans.list(kept):
        assert len(wb.plans.get(summary.plan_id).excluded) > 10
