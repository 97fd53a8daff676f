"""Reading and steering requests without a server: atoms never split, the rest of the body left alone."""
from __future__ import annotations

import json

from ctxbench.config import Config
from ctxbench.records.plans import Pin
from ctxbench.service.proxy.plan import SteerControls, steer_plan
from ctxbench.service.proxy.reply import ReplyRecorder
from ctxbench.service.proxy.edits import apply_edits
from ctxbench.service.proxy.wire import parse_request
from ctxbench.service.proxy.wire_parts import message_hash
from ctxbench.tokens import get_tokenizer

TOK = get_tokenizer()
CONFIG = Config()


def plan_of(provider: str, body: dict, groups: tuple[int, ...], **controls):
    request = parse_request(provider, json.dumps(body).encode(), TOK)
    c = SteerControls(steer=True, mode=controls.pop("mode", "off"), budget=100_000, mode_set=True, **controls)
    steered = steer_plan(request, "s", groups, tuple(() for _ in groups), c, proxy=CONFIG.proxy,
                         truncation=CONFIG.planner.truncation, tokenizer=TOK)
    return request, steered


def test_an_anthropic_atom_leaves_whole_and_the_text_beside_it_stays():
    body = {"model": "c", "max_tokens": 5, "metadata": {"user_id": "u1"}, "messages": [
        {"role": "user", "content": "look at a and b"},
        {"role": "assistant", "content": [{"type": "text", "text": "reading both"},
                                          {"type": "tool_use", "id": "t1", "name": "read", "input": {"p": "a"}},
                                          {"type": "tool_use", "id": "t2", "name": "read", "input": {"p": "b"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "A" * 50},
                                     {"type": "tool_result", "tool_use_id": "t2", "content": "B" * 50},
                                     {"type": "text", "text": "also note this"}]},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"}]}
    request, steered = plan_of("anthropic", body, (1, 1, 1, 1, 2), dropped_items=frozenset({"atom:1:t1"}))
    sent = json.loads(apply_edits(request, steered.edits))
    assert sent["metadata"] == {"user_id": "u1"} and sent["max_tokens"] == 5
    assert sent["messages"][1]["content"] == [{"type": "text", "text": "reading both"},
                                              {"type": "tool_use", "id": "t2", "name": "read", "input": {"p": "b"}}]
    assert sent["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "t2", "content": "B" * 50},
                                              {"type": "text", "text": "also note this"}]
    assert sent["messages"][3:] == body["messages"][3:]


def test_an_openai_message_loses_one_call_of_two_and_the_matching_tool_message():
    body = {"model": "m", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "user", "content": "next"}]}
    request, steered = plan_of("openai", body, (1, 1, 1, 1, 2), dropped_items=frozenset({"atom:1:c2"}))
    sent = json.loads(apply_edits(request, steered.edits))["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["c1"]
    assert [m.get("tool_call_id") for m in sent] == [None, None, "c1", None]
    # drop the other one too: the assistant message (no text left) goes with them
    request, steered = plan_of("openai", body, (1, 1, 1, 1, 2), dropped_items=frozenset({"atom:1:c1", "atom:1:c2"}))
    assert [m["role"] for m in json.loads(apply_edits(request, steered.edits))["messages"]] == ["user", "user"]


def test_the_turn_in_progress_and_pinned_items_are_never_dropped():
    body = {"model": "m", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 9000}]}
    pin = Pin("p1", "atom:1:c1", "sticky")
    request, steered = plan_of("openai", body, (1, 1, 1), dropped_groups=frozenset({1}), mode="light")
    assert steered.edits.remove == set()  # group 1 is the turn in progress
    cut = next(i for i in steered.plan.items if i.id == "atom:1:c1")
    assert "active_recent" in cut.detail  # the newest result of the turn in progress keeps 5,000 chars
    request, steered = plan_of("openai", body, (1, 1, 1), mode="light", pins=(pin,))
    assert steered.edits.empty and next(i for i in steered.plan.items if i.id == "atom:1:c1").reason == "pinned_sticky"


def test_cache_markers_do_not_change_a_message_hash():
    plain = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    marked = {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    assert message_hash(plain) == message_hash(marked)


def test_the_recorder_reads_events_split_anywhere_and_skips_an_oversized_line():
    events = (b'data: {"type":"message_start","message":{"model":"c","usage":{"input_tokens":10,'
              b'"cache_read_input_tokens":5}}}\n\n'
              b'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"Hel"}}\n\n'
              b'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"' + b"z" * 500 + b'"}}\n\n'
              b'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"lo"}}\n\n'
              b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}\n\n'
              b'data: {"type":"message_stop"}\n\n')
    recorder = ReplyRecorder("anthropic", stream=True, max_chars=100, max_body_bytes=300)
    for n in range(0, len(events), 7):
        recorder.feed(events[n:n + 7])
    reply = recorder.result()
    assert reply.text == "Hello" and reply.prompt_tokens == 15 and reply.completion_tokens == 3
    assert reply.complete and reply.stop_reason == "end_turn" and reply.model == "c"



def test_the_plan_payload_shows_what_went_upstream():
    body = {"model": "m", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r" * 2000},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "next"}]}
    request, steered = plan_of("openai", body, (1, 1, 1, 1, 2), mode="light")
    payload = steered.plan.messages()
    assert payload[0] == {"role": "system", "content": "be brief"}
    sent = json.loads(apply_edits(request, steered.edits))["messages"]
    tool = next(m for m in payload if m["role"] == "tool")
    assert tool["content"] == sent[3]["content"] and len(tool["content"]) < 400


def test_dropping_any_atom_of_any_wire_format_leaves_no_call_without_its_result():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_proxy_gemini import gemini_cli_body
    from test_proxy_responses import codex_input

    responses = {"model": "m", "instructions": "be brief", "input": codex_input() + [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        {"type": "function_call", "call_id": "call_b", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_b", "output": "b"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "last"}]}]}
    gemini = gemini_cli_body([{"role": "model", "parts": [{"text": "fine"}]},
                              {"role": "user", "parts": [{"text": "last"}]}])
    for provider, body, key in (("responses", responses, "input"), ("gemini", gemini, "contents")):
        request = parse_request(provider, json.dumps(body).encode(), TOK, "/v1beta/models/g:generateContent")
        n = len(request.history)
        groups = []
        g = 0
        for m in request.history:
            g += 1 if m.has_user_text and not m.answers_tools else 0
            groups.append(g)
        c = SteerControls(steer=True, mode="off", budget=100_000)
        atoms = [i.id for i in steer_plan(request, "s", tuple(groups), tuple(() for _ in range(n)), c, proxy=CONFIG.proxy,
                                          truncation=CONFIG.planner.truncation, tokenizer=TOK).plan.items
                 if i.kind == "tool_atom"]
        assert atoms
        for atom in atoms:
            c = SteerControls(steer=True, mode="off", budget=100_000, dropped_items=frozenset({atom}))
            steered = steer_plan(request, "s", tuple(groups), tuple(() for _ in range(n)), c, proxy=CONFIG.proxy,
                                 truncation=CONFIG.planner.truncation, tokenizer=TOK)
            sent = json.loads(apply_edits(request, steered.edits))[key]
            text = json.dumps(sent)
            if provider == "responses":
                calls = {i["call_id"] for i in sent if i.get("type") == "function_call"}
                outputs = {i["call_id"] for i in sent if i.get("type") == "function_call_output"}
                assert calls == outputs and atom.split(":", 2)[2] not in text
            else:
                calls = [p for m in sent for p in m["parts"] if "functionCall" in p]
                results = [p for m in sent for p in m["parts"] if "functionResponse" in p]
                assert len(calls) == len(results) and all(m["parts"] for m in sent)
            assert len(sent) < len(body[key])


def test_the_same_request_counted_by_another_tokenizer_is_another_plan_id():
    body = {"model": "m", "messages": [{"role": "system", "content": "be brief " * 40},
                                       {"role": "user", "content": "what does module_1.py do? " * 20}]}
    plans = []
    for tokenizer in (TOK, get_tokenizer("estimate")):
        request = parse_request("openai", json.dumps(body).encode(), tokenizer)
        c = SteerControls(steer=True, mode="off", budget=100_000, mode_set=True)
        plans.append(steer_plan(request, "s", (1,), ((),), c, proxy=CONFIG.proxy, truncation=CONFIG.planner.truncation,
                                tokenizer=tokenizer).plan)
    assert plans[0].used_tokens != plans[1].used_tokens
    assert plans[0].plan_id != plans[1].plan_id  # a PlanId names one plan: the store keeps the first of an id


def test_a_proxied_plan_id_is_the_planners_recipe_over_its_canonical_inputs():
    from ctxbench.records.plans import plan_id_of
    from ctxbench.service.proxy.plan import canonical_proxy_inputs

    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    request = parse_request("openai", json.dumps(body).encode(), TOK)
    c = SteerControls(steer=True, mode="off", budget=100_000, mode_set=True)
    steered = steer_plan(request, "s", (1,), ((),), c, proxy=CONFIG.proxy, truncation=CONFIG.planner.truncation,
                         tokenizer=TOK)
    assert steered.plan.plan_id == plan_id_of(canonical_proxy_inputs(request, "s", c, steered.edits, TOK.name))
