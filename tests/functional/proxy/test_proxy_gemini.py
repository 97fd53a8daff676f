"""Gemini's ``generateContent`` / ``streamGenerateContent`` (what Gemini CLI calls) through the proxy, with
request bodies shaped like Gemini CLI's: recorded like the other wire formats (a session per conversation, a plan
per request, the reply and the usage), steered only as asked, every byte in one item."""
from __future__ import annotations

import json

import httpx2 as httpx
from test_proxy import proxied, settled
from upstream_server import Answer

KEY = "AIza-fake-gemini-key-7f6e5d4c"
STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
WHOLE = "/v1beta/models/gemini-2.5-flash:generateContent"


def gemini_cli_body(extra: list[dict] | None = None, result_chars: int = 500) -> dict:
    return {
        "systemInstruction": {"role": "user", "parts": [{"text": "You are an interactive CLI agent specializing in "
                                                                  "software engineering tasks."}]},
        "tools": [{"functionDeclarations": [
            {"name": "read_file", "description": "Reads a file.",
             "parameters": {"type": "OBJECT", "properties": {"absolute_path": {"type": "STRING"}}}},
            {"name": "run_shell_command", "description": "Runs a shell command. " * 10,
             "parameters": {"type": "OBJECT", "properties": {"command": {"type": "STRING"}}}}]}],
        "generationConfig": {"temperature": 0, "thinkingConfig": {"includeThoughts": True}},
        "contents": [
            {"role": "user", "parts": [{"text": "This is the Gemini CLI. We are setting up the context for our chat.\n"
                                                "Today's date is Friday.\nMy operating system is: linux\n"
                                                "I'm currently working in the directory: /home/u/proj"}]},
            {"role": "model", "parts": [{"text": "Got it. Thanks for the context!"}]},
            {"role": "user", "parts": [{"text": "what does ledger.py do?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "read_file",
                                                          "args": {"absolute_path": "/home/u/proj/ledger.py"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {
                "output": "def total():\n" + "    pass\n" * (result_chars // 9)}}}]},
            {"role": "model", "parts": [{"text": "It sums the ledger."}]},
            {"role": "user", "parts": [{"text": "and how is it rounded?"}]},
            *(extra or []),
        ],
    }


def post(proxy, path: str, body: dict, query: str = "") -> tuple[bytes, httpx.Response]:
    raw = json.dumps(body).encode()
    with httpx.Client(timeout=30) as client:
        response = client.post(proxy.url + path + query, content=raw,
                               headers={"content-type": "application/json", "x-goog-api-key": KEY})
        response.read()
    return raw, response


def test_a_streamed_gemini_request_is_recorded_with_its_reply_usage_and_items(tmp_path):
    script = [Answer(text="It rounds half to even.", prompt_tokens=2100, completion_tokens=8, cached_tokens=1024)]
    with proxied(tmp_path, script) as (up, wb, proxy):
        raw, response = post(proxy, STREAM, gemini_cli_body(), "?alt=sse")
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        assert "".join(p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"]) == \
            "It rounds half to even."
        assert up.seen[0].body == raw and up.seen[0].path == STREAM + "?alt=sse"
        assert up.seen[0].headers["x-goog-api-key"] == KEY
        session = wb.proxy.latest_session()
        (exchange,) = settled(wb, session)
        assert exchange.provider == "gemini" and exchange.stream and exchange.outcome == "ok"
        assert exchange.reply == "It rounds half to even." and exchange.reported_prompt == 2100
        assert exchange.reported_completion == 8 and exchange.model == "gemini-2.5-pro"
        plan = wb.plans.get(exchange.plan_id)
        items = {i.id: i for i in plan.items}
        assert items["system"].kind == "system_prompt"
        assert items["tool:read_file"].kind == "tool_definitions" and items["tool:run_shell_command"].tokens > 50
        (atom,) = [i for i in plan.items if i.kind == "tool_atom"]
        assert atom.label.startswith("read_file(") and [m["role"] for m in atom.messages] == ["assistant", "tool"]
        env = next(i for i in plan.items if i.kind == "environment")
        assert [m["role"] for m in env.messages] == ["user", "assistant"]  # the setup and the model's "Got it."
        assert wb.sessions.info(session).title == "proxy: and how is it rounded?"
        assert plan.query == "and how is it rounded?"
        assert sum(i.bytes for i in plan.items) == len(raw)
        assert [m.role for m in wb.messages.all(session)] == ["user", "assistant", "tool", "assistant", "user"]
        (usage,) = wb.plans.usage_reports(plan.plan_id)
        assert usage.reported == 2100


def test_generate_content_and_a_json_array_stream_are_recorded(tmp_path):
    script = [Answer(text="whole reply", prompt_tokens=50), Answer(text="array reply", prompt_tokens=60)]
    with proxied(tmp_path, script) as (up, wb, proxy):
        _raw, response = post(proxy, WHOLE, {"contents": [{"role": "user", "parts": [{"text": "hi gemini"}]}]})
        assert response.json()["candidates"][0]["content"]["parts"][0]["text"] == "whole reply"
        (exchange,) = settled(wb)
        assert exchange.reply == "whole reply" and exchange.reported_prompt == 50 and not exchange.stream
        assert exchange.model == "gemini-2.5-flash"
        _raw, response = post(proxy, STREAM, {"contents": [{"role": "user", "parts": [{"text": "stream as array"}]}]})
        assert isinstance(response.json(), list)
        (exchange,) = settled(wb)
        assert exchange.reply == "array reply" and exchange.reported_prompt == 60 and exchange.outcome == "ok"


def test_a_gemini_conversation_keeps_its_session_and_a_drop_takes_the_call_with_its_response(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        raw, _ = post(proxy, STREAM, gemini_cli_body(), "?alt=sse")
        assert up.seen[0].body == raw  # steering on, nothing asked
        session = wb.proxy.latest_session()
        (atom,) = [i for i in wb.plans.get(settled(wb, session)[0].plan_id).items if i.kind == "tool_atom"]
        wb.proxy.drop(session, atom.id)
        more = [{"role": "model", "parts": [{"text": "Half to even."}]},
                {"role": "user", "parts": [{"text": "change it"}]}]
        raw, _ = post(proxy, STREAM, gemini_cli_body(more), "?alt=sse")
        assert wb.proxy.latest_session() == session and len(settled(wb, session)) == 2
        sent, original = json.loads(up.seen[1].body), json.loads(raw)
        assert sent["contents"] == original["contents"][:3] + original["contents"][5:]
        assert {k: v for k, v in sent.items() if k != "contents"} == \
            {k: v for k, v in original.items() if k != "contents"}


def test_a_resumed_gemini_conversation_that_repeats_the_function_response_keeps_its_session(tmp_path):
    """`gemini --resume` sends the model's call without its thought signature and the function response twice;
    it is the same conversation all the same, and a drop of the read still takes the call and both responses."""
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        body = gemini_cli_body()
        call = body["contents"][3]["parts"][0]
        call["functionCall"]["id"] = "read_file_1_0"
        call["thoughtSignature"] = "skip_thought_signature_validator"
        body["contents"][4]["parts"][0]["functionResponse"]["id"] = "read_file_1_0"
        post(proxy, STREAM, body, "?alt=sse")
        session = wb.proxy.latest_session()
        (atom,) = [i for i in wb.plans.get(settled(wb, session)[0].plan_id).items if i.kind == "tool_atom"]
        wb.proxy.drop(session, atom.id)
        resumed = json.loads(json.dumps(body))
        del resumed["contents"][3]["parts"][0]["thoughtSignature"]
        response = resumed["contents"][4]["parts"][0]
        resumed["contents"][4]["parts"].append(json.loads(json.dumps(response)))
        resumed["contents"] += [{"role": "model", "parts": [{"text": "Half to even."}]},
                                {"role": "user", "parts": [{"text": "change it"}]}]
        raw, _ = post(proxy, STREAM, resumed, "?alt=sse")
        assert wb.proxy.latest_session() == session and len(settled(wb, session)) == 2
        sent, original = json.loads(up.seen[1].body), json.loads(raw)
        assert sent["contents"] == original["contents"][:3] + original["contents"][5:]
        assert [m.content for m in wb.messages.all(session) if m.role == "user"][-1] == "change it"
