"""The turn runner against a real HTTP chat-completions server on loopback."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config, LLMConfig
from ctxbench.records import turns as ev
from ctxbench.llm.client import CancelToken, OpenAIChatClient
from ctxbench.llm.loop import TurnRunner
from ctxbench.llm.prompts import REBUILD_PROMPT
from ctxbench.service.workbench import Workbench
from llm_server import LLMServer, Reply, error, text, tool_call

FAST = dict(retry_backoff_s=0.01, retry_backoff_max_s=0.05, timeout_s=5.0)
STATE_REPLY = "Done: the ledger uses Decimal now.\n\n### STATE\nGoal: fix rounding\nContext: ledger.py\nResolved: total()\nTechnical Anchors: port 8080"


def _config(server: LLMServer, **llm) -> Config:
    return Config(llm=LLMConfig(provider="openai", base_url=server.base_url, model="loopback-model",
                                api_key_env="CTXBENCH_TEST_KEY", **{**FAST, **llm}))


@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "ctx.db", Config()) as workbench:
        yield workbench


def _run(workbench: Workbench, server: LLMServer, text_in: str, session_id: str | None = None,
         cancel: CancelToken | None = None, **llm) -> tuple[str, list]:
    config = _config(server, **llm)  # llm overrides FAST
    workbench.config = config
    sid = session_id or workbench.new_session("t")
    runner = TurnRunner(workbench, OpenAIChatClient(config.llm, "sk-test"), config)
    events = list(runner.run(sid, text_in, cancel=cancel))
    return sid, events


def _of(events: list, kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def _show_messages(db: Path, plan_id: str) -> list:
    result = CliRunner().invoke(main, ["show", plan_id, "--messages", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_payload_sent_is_exactly_show_messages_for_every_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_TEST_KEY", "sk-test")
    db = tmp_path / "ctx.db"
    script = [tool_call("query_db", {"sql": "SELECT id, role FROM messages ORDER BY id"}), text(STATE_REPLY)]
    with LLMServer(script) as server:
        result = CliRunner().invoke(main, [
            "chat", "Why does total() round wrong?", "--db", str(db), "--base-url", server.base_url,
            "--model", "loopback-model", "--api-key-env", "CTXBENCH_TEST_KEY", "--json",
        ])
        payloads = server.payloads()
        reported = list(server.reported)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["reply"] == STATE_REPLY
    assert len(payloads) == 2 and len(out["plan_ids"]) == 2
    assert out["plan_id"] == out["plan_ids"][-1]
    for payload, plan_id in zip(payloads, out["plan_ids"]):
        assert payload["messages"] == _show_messages(db, plan_id)
        assert payload["model"] == "loopback-model"
        assert payload["stream"] is True and payload["stream_options"] == {"include_usage": True}
        assert {t["function"]["name"] for t in payload["tools"]} >= {"request_code_context", "query_db",
                                                                     "manage_scratchpad", "save_memo",
                                                                     "retrieve_memos", "suggest_pins"}
    # the second call carries the tool call and its result as one atom
    second = payloads[1]["messages"]
    call_msg = next(m for m in second if m.get("tool_calls"))
    result_msg = next(m for m in second if m["role"] == "tool")
    assert result_msg["tool_call_id"] == call_msg["tool_calls"][0]["id"]
    assert '"role": "user"' in result_msg["content"]
    # usage: the server counts independently (tiktoken directly, the cookbook's rule); the estimate is
    # within the badge's tolerance of it, and what is stored is exactly what the server reported
    assert out["usage"]["reported_prompt_tokens"] == reported[-1]
    estimate = out["usage"]["estimated_prompt_tokens"]
    assert abs(reported[-1] - estimate) <= LLMConfig().usage_mismatch_ratio * reported[-1]
    assert out["usage"]["mismatch"] is False
    with Workbench(db, Config()) as wb:
        history = wb.messages.history(out["session_id"])
        assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
        assert {m.parsing_strategy for m in history if m.is_tool_message} == {"openai"}
        assert len({m.group_id for m in history}) == 1
        assert wb.memory.state(out["session_id"]).startswith("### STATE\nGoal: fix rounding")
        for plan_id, server_count in zip(out["plan_ids"], reported, strict=True):
            (report,) = wb.plans.usage_reports(plan_id)
            assert report.model == "loopback-model"
            assert report.reported == server_count


def test_the_api_key_is_sent_but_never_stored(tmp_path, monkeypatch):
    secret = "sk-live-7d1f0c9a2b"
    monkeypatch.setenv("CTXBENCH_TEST_KEY", secret)
    db = tmp_path / "ctx.db"
    with LLMServer([error(401, f"bad key {secret}"), text("ok")]) as server:
        failed = CliRunner().invoke(main, [
            "chat", "hello", "--db", str(db), "--base-url", server.base_url, "--model", "m",
            "--api-key-env", "CTXBENCH_TEST_KEY"])
        ok = CliRunner().invoke(main, [
            "chat", "hello again", "--db", str(db), "--base-url", server.base_url, "--model", "m",
            "--api-key-env", "CTXBENCH_TEST_KEY"])
        auth = [r.headers.get("authorization") for r in server.received]
    assert failed.exit_code == 1
    assert secret not in failed.stderr and "***" in failed.stderr and "CTXBENCH_TEST_KEY" in failed.stderr
    assert ok.exit_code == 0, ok.output
    assert auth == [f"Bearer {secret}"] * 2
    for path in tmp_path.iterdir():
        assert secret.encode() not in path.read_bytes(), path.name


def test_a_429_then_success_is_retried(wb):
    with LLMServer([error(429, "slow down", retry_after=0), text("fine")]) as server:
        _, events = _run(wb, server, "hi")
        payloads = server.payloads()
    assert len(payloads) == 2 and payloads[0] == payloads[1]
    (retry,) = _of(events, ev.Retrying)
    assert retry.attempt == 1 and "429" in retry.reason
    finished = events[-1]
    assert isinstance(finished, ev.TurnFinished) and finished.status == "ok" and finished.reply == "fine"


def test_retry_after_is_honoured(wb):
    with LLMServer([error(429, "wait a bit", retry_after=0.04), text("fine")]) as server:
        _, events = _run(wb, server, "hi", retry_backoff_s=0.001)
    (retry,) = _of(events, ev.Retrying)
    assert retry.wait_s >= 0.04
    assert events[-1].status == "ok"


def test_a_timeout_before_the_first_token_is_retried(wb):
    with LLMServer([Reply(content="too late", delay_s=1.0), text("on time")]) as server:
        _, events = _run(wb, server, "hi", timeout_s=0.3)
        assert len(server.received) == 2
    (retry,) = _of(events, ev.Retrying)
    assert "timed out" in retry.reason
    assert events[-1].status == "ok" and events[-1].reply == "on time"


def test_server_errors_exhaust_the_retries_and_fail_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_TEST_KEY", "k")
    db = tmp_path / "ctx.db"
    config = tmp_path / "c.toml"
    config.write_text("[llm]\nmax_retries = 2\nretry_backoff_s = 0.01\nretry_backoff_max_s = 0.02\n")
    with LLMServer([error(503, "overloaded\nplease wait")]) as server:
        result = CliRunner().invoke(main, [
            "chat", "hello", "--db", str(db), "--config", str(config), "--base-url", server.base_url,
            "--model", "m", "--api-key-env", "CTXBENCH_TEST_KEY", "--json"])
        count = len(server.received)
    assert count == 3  # the first try and two retries
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "HTTP 503" in lines[0] and "overloaded please wait" in lines[0]
    assert "no reply, so nothing was stored (the new session was removed)" in lines[0]
    with Workbench(db, Config()) as wb:
        assert wb.sessions.list() == []  # a failed first turn leaves no orphan session behind


def test_a_client_error_is_not_retried(wb):
    with LLMServer([error(400, "bad request")]) as server:
        _, events = _run(wb, server, "hi")
        assert len(server.received) == 1
    (failed,) = _of(events, ev.TurnFailed)
    assert failed.kind == "request" and "HTTP 400" in failed.reason


def test_a_dropped_stream_stores_a_partial_reply(wb):
    content = "The answer is long and it will be cut off somewhere in the middle of this sentence."
    with LLMServer([Reply(content=content, chunk_chars=10, drop_after_chunks=4)]) as server:
        sid, events = _run(wb, server, "tell me")
    (failed,) = _of(events, ev.TurnFailed)
    assert failed.kind == "dropped"
    partial = failed.partial_message
    assert partial is not None and partial.partial
    assert partial.content == content[:30]  # the role chunk, then three 10-char pieces arrived
    stored = wb.messages.history(sid)
    assert [(m.role, m.partial) for m in stored] == [("user", False), ("assistant", True)]
    assert stored[1].content == content[:30]
    assert events[-1].status == "failed" and events[-1].reply == content[:30]


def test_cancel_mid_stream_keeps_the_partial_reply(wb):
    cancel = CancelToken()
    content = "x" * 400
    with LLMServer([Reply(content=content, chunk_chars=5, delay_s=0.02)]) as server:
        config = _config(server)
        wb.config = config
        sid = wb.new_session("t")
        runner = TurnRunner(wb, OpenAIChatClient(config.llm, "k"), config)
        seen = []
        for event in runner.run(sid, "go", cancel=cancel):
            seen.append(event)
            if isinstance(event, ev.ReplyDelta) and len(_of(seen, ev.ReplyDelta)) == 3:
                cancel.cancel()
    (cancelled,) = _of(seen, ev.TurnCancelled)
    assert cancelled.partial_message is not None and cancelled.partial_message.partial
    assert cancelled.partial_message.content.startswith("x" * 15)
    assert len(cancelled.partial_message.content) < len(content)
    assert seen[-1].status == "cancelled"
    assert [m.role for m in wb.messages.history(sid)] == ["user", "assistant"]


def test_cancel_while_waiting_for_the_first_token_is_not_retried(wb):
    cancel = CancelToken()
    with LLMServer([Reply(content="slow", delay_s=0.5)]) as server:
        config = _config(server, timeout_s=5.0)
        wb.config = config
        sid = wb.new_session("t")
        runner = TurnRunner(wb, OpenAIChatClient(config.llm, "k"), config)

        def cancel_once_received() -> None:  # cancel while the request waits for its first token
            while not server.received:
                threading.Event().wait(0.01)
            cancel.cancel()

        canceller = threading.Thread(target=cancel_once_received)
        canceller.start()
        events = list(runner.run(sid, "hi", cancel=cancel))
        canceller.join()
        assert len(server.received) == 1
    (cancelled,) = _of(events, ev.TurnCancelled)
    assert cancelled.partial_message is None
    assert events[-1].status == "cancelled"
    assert wb.messages.history(sid) == ()  # unanswered: left out of plans, so no two user turns in a row
    (user,) = wb.messages.all(sid)
    assert user.status == "dropped" and user.flags == ("unanswered",)


def test_usage_mismatch_raises_the_badge(wb):
    script = [Reply(content="a", prompt_tokens=10_000), Reply(content="b"), Reply(content="c", prompt_scale=1.25)]
    with LLMServer(script) as server:
        sid, first = _run(wb, server, "one")
        _, second = _run(wb, server, "two", session_id=sid)
        _, third = _run(wb, server, "three", session_id=sid)
        reported = list(server.reported)
    (far,) = _of(first, ev.UsageRecorded)
    (near,) = _of(second, ev.UsageRecorded)
    (scaled,) = _of(third, ev.UsageRecorded)
    assert [far.usage.reported, near.usage.reported, scaled.usage.reported] == reported
    for recorded in (far, near, scaled):  # the stored report holds exactly what the server said
        (report,) = wb.plans.usage_reports(recorded.usage.plan_id)
        assert (report.estimated, report.reported) == (recorded.usage.estimated, recorded.usage.reported)
    assert far.usage.reported == 10_000 and far.usage.mismatch and far.usage.badge.startswith("usage 10,000 vs est.")
    # an independent count close to the estimate: no badge; the same count 25% higher: the badge
    assert abs(near.usage.reported - near.usage.estimated) <= 0.05 * near.usage.reported
    assert not near.usage.mismatch and near.usage.badge == ""
    assert scaled.usage.mismatch and scaled.usage.badge.startswith(f"usage {scaled.usage.reported:,} vs est.")


def test_query_db_refuses_a_disguised_write_from_the_model(wb):
    sneaky = "/* read */ WITH x AS (SELECT 1) DELETE FROM main.messages"
    with LLMServer([tool_call("query_db", {"sql": sneaky}), text("ok")]) as server:
        sid, events = _run(wb, server, "clean up")
    (finished_tool,) = _of(events, ev.ToolFinished)
    assert not finished_tool.ok and finished_tool.message.content.startswith("error:")
    # the statement cannot even name the store's table: query_db's connection holds only this session's copy
    assert "no such table: main.messages" in finished_tool.message.content
    assert [m.role for m in wb.messages.history(sid)] == ["user", "assistant", "tool", "assistant"]


def test_the_tool_loop_stops_at_the_cap_and_the_last_call_offers_no_tools(wb):
    with LLMServer([tool_call("manage_scratchpad", {"action": "read"})]) as server:
        sid, events = _run(wb, server, "loop forever", max_tool_rounds=2)
        payloads = server.payloads()
    assert len(payloads) == 3
    assert "tools" in payloads[0] and "tools" in payloads[1] and "tools" not in payloads[2]
    history = wb.messages.history(sid)
    calls = [c.id for m in history for c in m.tool_calls]
    answered = [m.tool_call_id for m in history if m.role == "tool"]
    assert sorted(calls) == sorted(answered)  # every call has its result: atoms stay whole
    assert history[-1].content == "not run: the tool round limit of this turn was reached"
    # not an empty "ok": the turn ends with a line that says why there is no answer
    (failed,) = _of(events, ev.TurnFailed)
    assert failed.kind == "tool_limit" and "after 2 tool rounds" in failed.reason
    assert events[-1].status == "failed" and len(events[-1].plan_ids) == 3


def test_state_block_is_injected_next_turn_and_rebuilt_on_request(wb):
    rebuilt = "### STATE\nGoal: rebuilt goal\nContext: none\nResolved: all\nTechnical Anchors: none"
    with LLMServer([text(STATE_REPLY), text("second"), text("sure:\n" + rebuilt)]) as server:
        sid, _ = _run(wb, server, "first")
        _, _ = _run(wb, server, "second", session_id=sid)
        runner = TurnRunner(wb, OpenAIChatClient(wb.config.llm, "k"), wb.config)
        rebuild_events = list(runner.rebuild_state(sid))
        payloads = server.payloads()
    state_msgs = [m for m in payloads[1]["messages"] if m["role"] == "system" and m["content"].startswith("### STATE")]
    assert state_msgs and "Goal: fix rounding" in state_msgs[0]["content"]
    assert payloads[2]["messages"][-1] == {"role": "user", "content": REBUILD_PROMPT}
    assert "tools" not in payloads[2]
    assert wb.memory.state(sid) == rebuilt
    finished = rebuild_events[-1]
    assert finished.status == "ok" and finished.state_block == rebuilt
    assert payloads[2]["messages"] == wb.plans.get(finished.plan_ids[0]).messages()
    assert [m.content for m in wb.messages.history(sid) if m.role == "user"] == ["first", "second"]  # not in history


def test_unreachable_endpoint_fails_fast_and_keeps_the_message(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_TEST_KEY", "k")
    server = LLMServer()
    url = server.base_url
    server._httpd.server_close()  # nothing listens on that port any more
    config = tmp_path / "c.toml"
    config.write_text("[llm]\nmax_retries = 1\nretry_backoff_s = 0.01\n")
    db = tmp_path / "ctx.db"
    result = CliRunner().invoke(main, [
        "chat", "anyone there?", "--db", str(db), "--config", str(config), "--base-url", url, "--model", "m",
        "--api-key-env", "CTXBENCH_TEST_KEY"])
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: cannot reach")
    assert result.stderr.strip().splitlines()[-1] == errors[0]
    assert "nothing was stored (the new session was removed)" in errors[0]
    with Workbench(db, Config()) as wb:
        assert wb.sessions.list() == []


def test_a_plan_beyond_the_context_limit_is_not_sent(wb):
    with LLMServer([text("never")]) as server:
        sid, events = _run(wb, server, "hi", context_limit=50)
        assert server.received == []
    (failed,) = _of(events, ev.TurnFailed)
    assert failed.kind == "context_limit" and "context limit of 50" in failed.reason
    assert [(m.role, m.status, m.flags) for m in wb.messages.all(sid)] == [("user", "dropped", ("unanswered",))]


def test_closing_the_turn_mid_reply_stores_the_partial_reply(wb):
    from ctxbench.llm.offline import OfflineClient

    sid = wb.new_session("t")
    runner = TurnRunner(wb, OfflineClient(LLMConfig(offline_chunk_chars=4)), Config())
    turn = runner.run(sid, "tell me everything")
    seen = ""
    for event in turn:
        if isinstance(event, ev.ReplyDelta):
            seen += event.text
            if len(seen) >= 12:
                break
    turn.close()  # the consumer went away (the app quit, the worker was cancelled)
    stored = wb.messages.history(sid)
    assert [(m.role, m.partial) for m in stored] == [("user", False), ("assistant", True)]
    assert stored[1].content == seen


def test_an_internal_error_still_ends_the_turn(wb, monkeypatch):
    from ctxbench.llm.offline import OfflineClient

    sid = wb.new_session("t")
    monkeypatch.setattr(wb.planning, "plan", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("planner exploded")))
    runner = TurnRunner(wb, OfflineClient(), Config())
    events = list(runner.run(sid, "hi"))
    assert isinstance(events[0], ev.TurnStarted)
    (failed,) = _of(events, ev.TurnFailed)
    assert failed.kind == "internal" and "planner exploded" in failed.reason
    assert events[-1].status == "failed" and [m.role for m in wb.messages.all(sid)] == ["user"]
    assert wb.messages.all(sid)[0].flags == ("unanswered",)


def test_the_plan_budgets_the_tool_definitions_so_the_whole_prompt_fits(wb):
    """The tool schemas go out with the messages and providers count them: each call's plan holds them
    as a mandatory item, its estimate is the plan's count, and the prompt stays within the budget."""
    sid = wb.new_session("t")
    for n in range(30):  # more history than the budget holds
        wb.messages.append(sid, "user", f"question {n} about the ledger " + "detail " * 40)
        wb.messages.append(sid, "assistant", f"answer {n} " + "words " * 40)
    wb.update_settings(sid, budget=2000)
    with LLMServer([tool_call("manage_scratchpad", {"action": "read"})]) as server:
        _, events = _run(wb, server, "loop", session_id=sid, max_tool_rounds=1)
        reported = server.reported
    plans = [e.plan for e in _of(events, ev.PlanReady)]
    usage = [e.usage for e in _of(events, ev.UsageRecorded)]
    assert len(plans) == 2 and len(usage) == 2
    tools = [next((i for i in p.items if i.kind == "tool_definitions"), None) for p in plans]
    assert tools[0] is not None and tools[0].included and tools[0].reason == "mandatory" and tools[0].tokens > 0
    assert tools[1] is None  # the call after the cap offers no tools
    for plan, check, sent in zip(plans, usage, reported):
        assert not plan.over_budget and plan.used_tokens <= plan.budget == 2000
        assert check.estimated == plan.used_tokens and check.reported == sent
        assert abs(sent - plan.used_tokens) <= 0.01 * sent  # the whole prompt, as the provider counts it
