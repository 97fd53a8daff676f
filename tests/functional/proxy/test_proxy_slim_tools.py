"""Leaving out tool definitions on request: a definition the user dropped leaves the outgoing request (and
nothing else changes); one the conversation has called is kept, with the reason in the plan."""
from __future__ import annotations

import json

from test_proxy import Capture, anthropic_client, proxied, settled
from test_proxy_anatomy import claude_code_body
from test_proxy_gemini import STREAM, gemini_cli_body, post


def test_a_dropped_tool_definition_leaves_the_request_and_nothing_else_changes(tmp_path):
    capture = Capture()
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        client = anthropic_client(proxy, capture)
        body = dict(claude_code_body(), max_tokens=1000)
        body.pop("stream")
        client.messages.create(**body)
        session = wb.proxy.latest_session()
        wb.proxy.drop(session, "tool:Read")
        body["messages"] = body["messages"] + [{"role": "assistant", "content": "Hello from upstream."},
                                               {"role": "user", "content": "go on"}]
        client.messages.create(**body)
        sent, original = json.loads(up.seen[1].body), json.loads(capture.bodies[1])
        assert [t["name"] for t in sent["tools"]] == ["Bash"]
        assert {k: v for k, v in sent.items() if k != "tools"} == {k: v for k, v in original.items() if k != "tools"}
        second = settled(wb, session)[-1]
        plan = wb.plans.get(second.plan_id)
        read = next(i for i in plan.items if i.id == "tool:Read")
        assert not read.included and read.reason == "dropped_by_user"
        assert second.changes == (f"left out tool:Read ({read.tokens:,} tok): a tool definition you dropped",)


def test_a_tool_the_conversation_calls_keeps_its_definition(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        raw, _ = post(proxy, STREAM, gemini_cli_body(), "?alt=sse")
        session = wb.proxy.latest_session()
        wb.proxy.drop(session, "tool:read_file")  # the conversation called read_file
        wb.proxy.drop(session, "tool:run_shell_command")
        raw, _ = post(proxy, STREAM, gemini_cli_body(), "?alt=sse")
        sent = json.loads(up.seen[1].body)
        assert [d["name"] for d in sent["tools"][0]["functionDeclarations"]] == ["read_file"]
        assert sent["contents"] == json.loads(raw)["contents"]
        plan = wb.plans.get(settled(wb, session)[-1].plan_id)
        assert any("kept tool:read_file" in n and "calls read_file" in n for n in plan.notes)
        assert next(i for i in plan.items if i.id == "tool:read_file").included
