"""Every tool call in a payload is answered: the planner fills in a result nobody stored, and the
OpenAI importer refuses a transcript with a call left unanswered."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import PlannerConfig
from ctxbench.records.messages import ToolCall
from ctxbench.planner import build_plan
from ctxbench.records.plans import PlanInputs
from ctxbench.planner.render import MISSING_TOOL_RESULT
from ctxbench.tokens import count_message, count_messages, get_tokenizer
from ctxbench.transcripts.openai import parse_lines
from ctxbench.records.transcripts import TranscriptError
from planner_helpers import SessionBuilder

TOK = get_tokenizer()


def _call(call_id: str, name: str = "grep") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _follows(payload: list[dict], call_id: str) -> dict:
    """The tool message answering ``call_id`` among those right after its assistant message."""
    at = next(n for n, m in enumerate(payload) if any(c["id"] == call_id for c in m.get("tool_calls") or ()))
    k = at + 1
    while k < len(payload) and payload[k]["role"] == "tool":
        if payload[k]["tool_call_id"] == call_id:
            return payload[k]
        k += 1
    raise AssertionError(f"{call_id} is not answered right after its call: {payload[at:k + 1]}")


def test_unanswered_calls_in_history_and_current_turn_get_a_counted_synthetic_result():
    b = SessionBuilder()
    b.add("user", "look around")
    b.add("assistant", "", tool_calls=(ToolCall("a", "grep", "{}"), ToolCall("b", "ls", "{}")))
    b.add("tool", "found it", tool_call_id="a", tool_name="grep")  # b never answered (import, Ctrl-C)
    b.add("assistant", "partly done")
    b.group += 1
    b.add("user", "go on")
    b.add("assistant", "", tool_calls=(ToolCall("c", "read_file", "{}"),))  # cut off mid-tool
    history, current = b.split_current()
    plan = build_plan(PlanInputs(session_id="s1", query="go on", history=history, current_turn=current,
                                 budget=100_000, mode="off"), PlannerConfig(), TOK)
    payload = plan.messages()

    assert _follows(payload, "a")["content"] == "found it"
    for call_id in ("b", "c"):
        assert _follows(payload, call_id) == {"role": "tool", "content": MISSING_TOOL_RESULT, "tool_call_id": call_id}
    # the synthetic replies are counted: items and plan add up to the payload
    assert plan.used_tokens == count_messages(TOK, payload)
    for item in plan.included:
        assert item.tokens == sum(count_message(TOK, m) for m in item.messages)
    current_item = next(i for i in plan.items if i.id == "current")
    assert current_item.messages[-1]["content"] == MISSING_TOOL_RESULT


def test_a_result_stored_after_other_messages_moves_up_to_its_call():
    b = SessionBuilder()
    b.add("user", "two calls")
    b.add("assistant", "", tool_calls=(ToolCall("a", "grep", "{}"), ToolCall("b", "ls", "{}")))
    b.add("tool", "result a", tool_call_id="a", tool_name="grep")
    b.add("assistant", "while waiting for b")
    b.add("tool", "result b", tool_call_id="b", tool_name="ls")
    b.group += 1
    b.add("user", "now")
    history, current = b.split_current()
    payload = build_plan(PlanInputs(session_id="s1", query="now", history=history, current_turn=current,
                                    budget=100_000, mode="off"), PlannerConfig(), TOK).messages()
    assert _follows(payload, "b")["content"] == "result b"
    assert sum(1 for m in payload if m["role"] == "tool") == 2  # moved, not duplicated or invented


def test_import_then_show_messages_gives_a_valid_payload_for_a_stored_unanswered_call(tmp_path, monkeypatch):
    """A call stored without a result (a chat cut off mid-tool) still plans to a payload providers accept."""
    from ctxbench.config import Config
    from ctxbench.service.workbench import Workbench

    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    db = tmp_path / "x.db"
    rows = [{"role": "user", "content": "list files"},
            {"role": "assistant", "content": None, "tool_calls": [_call("t1", "ls")]},
            {"role": "tool", "tool_call_id": "t1", "content": "a.py"},
            {"role": "assistant", "content": "one file"}]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    runner = CliRunner()
    out = runner.invoke(main, ["import", str(path), "--db", str(db)])
    assert out.exit_code == 0, out.output
    sid = out.output.split()[-1]
    with Workbench(db, Config()) as wb:  # what a Ctrl-C during a tool run leaves behind
        wb.conn.execute("DELETE FROM messages WHERE role = 'tool'")
        wb.conn.commit()
    planned = runner.invoke(main, ["plan", "next", "--session", sid, "--json", "--db", str(db)])
    assert planned.exit_code == 0, planned.output
    shown = runner.invoke(main, ["show", json.loads(planned.output)["plan_id"], "--messages", "--db", str(db)])
    payload = json.loads(shown.output)
    assert _follows(payload, "t1")["content"] == MISSING_TOOL_RESULT


@pytest.mark.parametrize(
    ("rows", "line", "words"),
    [
        # the next user message arrives before the result
        ([{"role": "user", "content": "u"}, {"role": "assistant", "content": None, "tool_calls": [_call("x")]},
          {"role": "user", "content": "again"}], 2, "'x' is not answered by a tool message before this user message"),
        # one of two parallel calls answered, then the assistant speaks
        ([{"role": "user", "content": "u"},
          {"role": "assistant", "content": None, "tool_calls": [_call("x"), _call("y")]},
          {"role": "tool", "tool_call_id": "x", "content": "r"}, {"role": "assistant", "content": "done"}],
         2, "'y' is not answered"),
        # a system message in between
        ([{"role": "assistant", "content": None, "tool_calls": [_call("x")]}, {"role": "system", "content": "s"},
          {"role": "tool", "tool_call_id": "x", "content": "r"}], 1, "before this system message"),
        # the file ends with the call
        ([{"role": "user", "content": "u"}, {"role": "assistant", "content": None, "tool_calls": [_call("x")]}],
         2, "before the end of the file"),
        # a second answer to a call, after the turn moved on
        ([{"role": "user", "content": "u"}, {"role": "assistant", "content": None, "tool_calls": [_call("x")]},
          {"role": "tool", "tool_call_id": "x", "content": "r"}, {"role": "assistant", "content": "ok"},
          {"role": "tool", "tool_call_id": "x", "content": "r again"}], 5, "already answered on line 3"),
    ],
)
def test_import_refuses_an_unanswered_tool_call_with_its_line(rows, line, words):
    with pytest.raises(TranscriptError) as info:
        parse_lines([json.dumps(r) for r in rows])
    assert info.value.line == line
    assert words in str(info.value)


def test_import_cli_exits_2_naming_the_line_and_stores_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    path = tmp_path / "t.jsonl"
    rows = [{"role": "user", "content": "u"}, {"role": "assistant", "content": None, "tool_calls": [_call("x")]},
            {"role": "user", "content": "again"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    db = tmp_path / "x.db"
    result = CliRunner().invoke(main, ["import", str(path), "--db", str(db)])
    assert result.exit_code == 2
    assert "line 2:" in result.output and "'x'" in result.output
    listed = CliRunner().invoke(main, ["sessions", "--json", "--db", str(db)])
    assert json.loads(listed.output) == []


def test_well_formed_parallel_calls_and_reused_ids_import():
    rows = [{"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": [_call("call_0"), _call("call_1")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "r1"},
            {"role": "tool", "tool_call_id": "call_0", "content": "r0"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "again"},
            {"role": "assistant", "content": None, "tool_calls": [_call("call_0")]},  # a server reusing ids
            {"role": "tool", "tool_call_id": "call_0", "content": "r0 again"}]
    t = parse_lines([json.dumps(r) for r in rows])
    assert [m.role for m in t.messages][-2:] == ["assistant", "tool"]
