"""OpenAI's Responses API (``/v1/responses``, what Codex speaks) through the proxy: the real ``openai`` SDK's
``client.responses`` talks to the proxy on loopback, which forwards to a scripted Responses upstream. Recorded
like Chat Completions and Messages: one session per conversation, a plan per request, the reply and the usage."""
from __future__ import annotations

import json

from test_proxy import Capture, openai_client, proxied, settled
from upstream_server import Answer

TOOLS = [{"type": "function", "name": "shell", "description": "Run a command.", "strict": False,
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}]
INSTRUCTIONS = "You are a coding agent running in a terminal. Be precise."


def codex_input(result_chars: int = 2000) -> list[dict]:
    """A Codex-like input: the user's question, a shell call with its output, the answer, a new question."""
    return [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what is in this repo?"}]},
        {"type": "function_call", "call_id": "call_a", "name": "shell", "arguments": json.dumps({"command": "ls"})},
        {"type": "function_call_output", "call_id": "call_a", "output": "README.md\n" + "f" * result_chars},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A README and files."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and what does README say?"}]},
    ]


def test_a_streamed_responses_request_is_recorded_with_its_reply_usage_and_items(tmp_path):
    capture = Capture()
    script = [Answer(text="It says hello.", prompt_tokens=4321, completion_tokens=9, cached_tokens=4000)]
    with proxied(tmp_path, script) as (up, wb, proxy):
        client = openai_client(proxy, capture)
        stream = client.responses.create(model="gpt-codex", instructions=INSTRUCTIONS, input=codex_input(),
                                         tools=TOOLS, stream=True)
        events = list(stream)
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == "It says hello."
        assert events[-1].type == "response.completed" and events[-1].response.usage.input_tokens == 4321
        assert up.seen[0].path == "/v1/responses" and up.seen[0].body == capture.bodies[0]
        session = wb.proxy.latest_session()
        assert session is not None
        (exchange,) = settled(wb, session)
        assert exchange.provider == "responses" and exchange.outcome == "ok" and exchange.stream
        assert exchange.reply == "It says hello." and exchange.reported_prompt == 4321
        assert exchange.reported_completion == 9 and exchange.model == "gpt-codex"
        plan = wb.plans.get(exchange.plan_id)
        items = {i.id: i for i in plan.items}
        assert items["system"].kind == "system_prompt" and INSTRUCTIONS in items["system"].messages[0]["content"]
        assert items["tool:shell"].kind == "tool_definitions"
        atom = items["atom:1:call_a"]
        assert atom.kind == "tool_atom" and atom.label.startswith("shell(") and "2,010 chars" in atom.label
        assert items["group:2"].kind == "current_turn"
        assert plan.query == "and what does README say?"
        (usage,) = wb.plans.usage_reports(plan.plan_id)
        assert usage.reported == 4321 and usage.estimated == plan.used_tokens
        history = wb.messages.all(session)
        assert [m.role for m in history] == ["user", "assistant", "tool", "assistant", "user"]
        assert history[1].tool_calls[0].name == "shell" and history[2].tool_call_id == "call_a"
        assert history[2].tool_name == "shell"
        assert wb.sessions.info(session).title == "proxy: and what does README say?"  # the latest words


def test_a_whole_responses_reply_with_a_string_input(tmp_path):
    with proxied(tmp_path, [Answer(text="plain reply", prompt_tokens=77, completion_tokens=3)]) as (up, wb, proxy):
        reply = openai_client(proxy).responses.create(model="gpt-x", input="say something plain")
        assert reply.output_text == "plain reply" and reply.usage.input_tokens == 77
        (exchange,) = settled(wb)
        assert exchange.provider == "responses" and not exchange.stream
        assert exchange.reply == "plain reply" and exchange.reported_prompt == 77 and exchange.reported_completion == 3
        plan = wb.plans.get(exchange.plan_id)
        assert plan.query == "say something plain"
        assert wb.messages.all(wb.proxy.latest_session())[0].content == "say something plain"


def test_a_conversation_resent_whole_stays_in_one_session(tmp_path):
    with proxied(tmp_path, [Answer(text="first"), Answer(text="second")]) as (up, wb, proxy):
        client = openai_client(proxy)
        items = codex_input()
        client.responses.create(model="m", instructions=INSTRUCTIONS, input=items, tools=TOOLS)
        first = wb.proxy.latest_session()
        items += [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "first"}]},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]}]
        client.responses.create(model="m", instructions=INSTRUCTIONS, input=items, tools=TOOLS)
        assert wb.proxy.latest_session() == first
        assert len(settled(wb, first)) == 2
        assert [m.content for m in wb.messages.all(first)][-2:] == ["first", "thanks"]
        client.responses.create(model="m", input="an unrelated question")
        assert wb.proxy.latest_session() != first


def test_a_chained_request_continues_the_session_of_the_reply_it_names(tmp_path):
    script = [Answer(text="I will look.", tool_call=("shell", {"command": "cat README.md"})), Answer(text="done")]
    with proxied(tmp_path, script) as (up, wb, proxy):
        client = openai_client(proxy)
        first = client.responses.create(model="m", instructions=INSTRUCTIONS, input="read the README", tools=TOOLS,
                                        stream=True)
        completed = [e for e in first if e.type == "response.completed"][0].response
        session = wb.proxy.latest_session()
        settled(wb, session)
        second = client.responses.create(model="m", previous_response_id=completed.id, tools=TOOLS, input=[
            {"type": "function_call_output", "call_id": "call_up_1", "output": "# Hello\nThe README."}])
        assert second.output_text == "done"
        assert json.loads(up.seen[1].body)["previous_response_id"] == completed.id
        assert wb.proxy.latest_session() == session
        (one, two) = settled(wb, session)
        assert two.reply == "done"
        history = wb.messages.all(session)
        assert [m.role for m in history] == ["user", "tool"]
        assert history[1].tool_call_id == "call_up_1" and history[1].content == "# Hello\nThe README."
        plan = wb.plans.get(two.plan_id)
        assert any(i.kind == "tool_atom" and i.included for i in plan.items)


def test_steering_a_responses_request_drops_a_call_with_its_output_and_nothing_else(tmp_path):
    capture = Capture()
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        client = openai_client(proxy, capture)
        items = codex_input()
        client.responses.create(model="m", instructions=INSTRUCTIONS, input=items, tools=TOOLS)
        assert up.seen[0].body == capture.bodies[0]  # nothing asked: byte for byte
        session = wb.proxy.latest_session()
        wb.proxy.drop(session, "atom:1:call_a")
        items += [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "next"}]}]
        client.responses.create(model="m", instructions=INSTRUCTIONS, input=items, tools=TOOLS)
        sent, original = json.loads(up.seen[1].body), json.loads(capture.bodies[1])
        assert sent["input"] == [i for i in original["input"] if i.get("call_id") != "call_a"]
        assert {k: v for k, v in sent.items() if k != "input"} == {k: v for k, v in original.items() if k != "input"}
        (_first, second) = settled(wb, session)
        assert second.steered and len(second.changes) == 1


def test_the_recorder_reads_responses_events_and_bodies():
    from ctxbench.service.proxy.reply import ReplyRecorder

    events = (b'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_9","model":"g",'
              b'"status":"in_progress"}}\n\n'
              b'data: {"type":"response.output_text.delta","delta":"Hi "}\n\n'
              b'data: {"type":"response.output_item.added","item":{"type":"function_call","name":"shell"}}\n\n'
              b'data: {"type":"response.completed","response":{"id":"resp_9","status":"completed","usage":'
              b'{"input_tokens":50,"input_tokens_details":{"cached_tokens":32},"output_tokens":4}}}\n\n')
    recorder = ReplyRecorder("responses", stream=True, max_chars=100, max_body_bytes=1000)
    for n in range(0, len(events), 5):
        recorder.feed(events[n:n + 5])
    reply = recorder.result()
    assert reply.text == "Hi \n[tool call shell]" and reply.prompt_tokens == 50 and reply.completion_tokens == 4
    assert reply.cached_tokens == 32 and reply.response_id == "resp_9" and reply.complete
    assert reply.stop_reason == "completed" and reply.model == "g"
    whole = ReplyRecorder("responses", stream=False, max_chars=100, max_body_bytes=1000)
    whole.feed(json.dumps({"id": "resp_2", "model": "g", "status": "completed", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": "yes"}]}],
        "usage": {"input_tokens": 5, "output_tokens": 1}}).encode())
    reply = whole.result()
    assert reply.text == "yes" and reply.prompt_tokens == 5 and reply.response_id == "resp_2" and reply.complete
