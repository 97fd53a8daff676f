"""``ctxbench proxy`` end to end: the real ``openai`` and ``anthropic`` SDK clients talk to the proxy on
loopback, which talks to a scripted upstream (tests/upstream_server.py) on loopback."""
from __future__ import annotations

import json
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx
import pytest
from sdk import anthropic, openai
from upstream_server import Answer, Upstream

from ctxbench.config import Config, ProxyConfig
from ctxbench.proxy.server import ProxyServer, RunningProxy, upstream_url
from ctxbench.service.proxy.service import ProxyService
from ctxbench.service.workbench import Workbench

FAKE_OPENAI_KEY = "sk-fake-openai-key-0f9e8d7c6b5a"
FAKE_ANTHROPIC_KEY = "sk-ant-fake-key-1a2b3c4d5e6f"


@contextmanager
def proxied(tmp_path: Path, script: list[Answer] | None = None, *, steer: bool = False,
            config: Config | None = None):
    with Upstream(script) as up:
        wb = Workbench(tmp_path / "ctx.db", config or Config())
        service = ProxyService(wb, steer=steer)
        try:
            with RunningProxy(ProxyServer(service, up.url, wb.config.proxy), "127.0.0.1", 0) as proxy:
                yield up, wb, proxy
        finally:
            wb.close()


class Capture:
    """The bytes the SDK client actually put on the wire, per request (an httpx event hook)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, request: httpx.Request) -> None:
        self.bodies.append(request.read())

    def client(self) -> httpx.Client:
        return httpx.Client(event_hooks={"request": [self]})


def openai_client(proxy: RunningProxy, capture: Capture | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=FAKE_OPENAI_KEY, max_retries=0,
                         http_client=capture.client() if capture else None)


def anthropic_client(proxy: RunningProxy, capture: Capture | None = None) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_ANTHROPIC_KEY, max_retries=0,
                               http_client=capture.client() if capture else None)


TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def conversation(turns: int, result_chars: int = 3000) -> list[dict]:
    """An OpenAI conversation: each turn a question, a read_file call, its result and an answer."""
    messages: list[dict] = [{"role": "system", "content": "You are a careful coding assistant."}]
    for n in range(1, turns + 1):
        messages.append({"role": "user", "content": f"question {n}: what does module_{n}.py do?"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function",
             "function": {"name": "read_file", "arguments": json.dumps({"path": f"module_{n}.py"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": f"# module {n}\n" + "x" * result_chars})
        messages.append({"role": "assistant", "content": f"module_{n}.py holds the {n}th part."})
    messages.append({"role": "user", "content": "and now summarise everything"})
    return messages


# -- pass-through -------------------------------------------------------------------------------------------
def test_openai_stream_passes_through_byte_for_byte_and_is_recorded(tmp_path):
    capture = Capture()
    with proxied(tmp_path, [Answer(text="Hello there, streamed.", prompt_tokens=321)]) as (up, wb, proxy):
        client = openai_client(proxy, capture)
        stream = client.chat.completions.create(model="gpt-test", messages=conversation(2), tools=TOOLS, stream=True,
                                                stream_options={"include_usage": True})
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text == "Hello there, streamed."
        assert up.seen[0].body == capture.bodies[0]  # forwarded unchanged, byte for byte
        assert up.seen[0].headers["authorization"] == f"Bearer {FAKE_OPENAI_KEY}"
        assert up.seen[0].path == "/v1/chat/completions"
        (exchange,) = settled(wb)
        assert exchange.outcome == "ok" and exchange.status == 200 and not exchange.steered
        assert exchange.reply == "Hello there, streamed." and exchange.reported_prompt == 321
        original, upstream = wb.proxy.bodies(exchange.id)
        assert original == capture.bodies[0] and upstream is None
        plan = wb.plans.get(exchange.plan_id)
        sections = dict(plan.sections)
        assert sections["system"] > 0 and sections["tools"] > 0 and sections["history"] > 0
        assert sections["tool_results"] > 0
        kinds = {i.id: i.kind for i in plan.items}
        assert kinds["tool:read_file"] == "tool_definitions" and kinds["atom:1:call_1"] == "tool_atom"
        assert all(i.tokens > 0 for i in plan.items if i.kind != "request_options")  # JSON syntax: bytes only
        assert sum(i.bytes for i in plan.items) == len(capture.bodies[0])  # every byte in exactly one item
        assert plan.used_tokens == sum(i.tokens for i in plan.included)
        (usage,) = wb.plans.usage_reports(plan.plan_id)
        assert usage.reported == 321 and usage.estimated == plan.used_tokens


def test_openai_whole_reply_and_anthropic_stream_with_usage(tmp_path):
    capture = Capture()
    script = [Answer(text="plain JSON reply", prompt_tokens=55), Answer(text="Streamed by Claude.", prompt_tokens=777)]
    with proxied(tmp_path, script) as (up, wb, proxy):
        reply = openai_client(proxy).chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "plain JSON reply" and reply.usage.prompt_tokens == 55
        client = anthropic_client(proxy, capture)
        with client.messages.stream(model="claude-test", max_tokens=100, system="Be brief.",
                                    messages=[{"role": "user", "content": "hello claude"}]) as stream:
            text = "".join(stream.text_stream)
        assert text == "Streamed by Claude."
        assert up.seen[1].path == "/v1/messages" and up.seen[1].body == capture.bodies[0]
        assert FAKE_ANTHROPIC_KEY in (up.seen[1].headers.get("x-api-key"), up.seen[1].headers.get("authorization"),
                                      f"Bearer {up.seen[1].headers.get('x-api-key')}") or \
            up.seen[1].headers.get("authorization") == f"Bearer {FAKE_ANTHROPIC_KEY}"
        claude = wb.proxy.latest_session()
        (exchange,) = settled(wb, claude)
        assert exchange.provider == "anthropic" and exchange.reply == text and exchange.reported_prompt == 777
        assert exchange.model == "claude-test"
        assert wb.sessions.info(claude).title == "proxy: hello claude"


def test_keys_never_reach_the_database(tmp_path):
    with proxied(tmp_path) as (up, wb, proxy):
        openai_client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        anthropic_client(proxy).messages.create(model="c", max_tokens=5, messages=[{"role": "user", "content": "y"}])
        assert len(up.seen) == 2
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("ctx.db"))
    assert b"fake" in b"".join(s.headers.get("authorization", "").encode() + s.headers.get("x-api-key", "").encode()
                               for s in up.seen)
    assert FAKE_OPENAI_KEY.encode() not in stored and FAKE_ANTHROPIC_KEY.encode() not in stored
    assert b"0f9e8d7c6b5a" not in stored and b"1a2b3c4d5e6f" not in stored


def test_requests_of_one_conversation_share_a_session_and_another_conversation_gets_its_own(tmp_path):
    with proxied(tmp_path) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = conversation(1)
        client.chat.completions.create(model="m", messages=messages)
        first = wb.proxy.latest_session()
        messages += [{"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "more"}]
        client.chat.completions.create(model="m", messages=messages)
        assert wb.proxy.latest_session() == first
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "an unrelated chat"}])
        other = wb.proxy.latest_session()
        assert other != first
        assert len(settled(wb, first)) == 2 and len(settled(wb, other)) == 1
        history = wb.messages.all(first)
        assert [m.role for m in history] == ["user", "assistant", "tool", "assistant", "user", "assistant", "user"]
        assert history[-1].content == "more" and history[2].tool_call_id == "call_1"


def test_a_compacted_conversation_stays_in_its_session(tmp_path):
    summary = "\n".join(f"{n}. The user asked about the ledger module and we fixed rounding case {n}."
                        for n in range(1, 8))
    with proxied(tmp_path, [Answer(text=summary), Answer(text="ok")]) as (up, wb, proxy):
        client = anthropic_client(proxy)
        client.messages.create(model="c", max_tokens=50, messages=[
            {"role": "user", "content": "long conversation … summarise it"}])
        session = wb.proxy.latest_session()
        client.messages.create(model="c", max_tokens=50, messages=[
            {"role": "user", "content": "This session continues a previous conversation.\nSummary:\n" + summary},
            {"role": "assistant", "content": "Understood."}, {"role": "user", "content": "go on"}])
        assert wb.proxy.latest_session() == session
        assert len(settled(wb, session)) == 2


# -- steering -----------------------------------------------------------------------------------------------
def test_steer_applies_drops_and_truncation_and_the_store_holds_both_requests(tmp_path):
    capture = Capture()
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        client = openai_client(proxy, capture)
        messages = conversation(3)
        client.chat.completions.create(model="m", messages=messages)
        session = wb.proxy.latest_session()
        wb.proxy.drop(session, "atom:2:call_2")  # the user drops a stale tool call with its result
        wb.update_settings(session, mode="light")  # and picks Light for this conversation
        messages += [{"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "next"}]
        client.chat.completions.create(model="m", messages=messages)
        sent = json.loads(up.seen[1].body)
        ids = [c["id"] for m in sent["messages"] for c in m.get("tool_calls") or ()]
        results = {m["tool_call_id"]: m["content"] for m in sent["messages"] if m["role"] == "tool"}
        assert "call_2" not in ids and "call_2" not in results  # the atom left whole
        assert set(ids) == set(results) == {"call_1", "call_3"}  # every call keeps its result
        # light mode: past turns' tool results cut to the inactive tier, with a hint
        assert all(len(text) < 400 and "cut by ctxbench" in text for text in results.values())
        assert up.seen[1].body != capture.bodies[1]
        (first, second) = settled(wb, session)
        assert second.steered and not first.steered  # nothing was asked before the first request
        original, upstream = wb.proxy.bodies(second.id)
        assert original == capture.bodies[1] and upstream == up.seen[1].body
        plan = wb.plans.get(second.plan_id)
        dropped = next(i for i in plan.items if i.id == "atom:2:call_2")
        assert not dropped.included and dropped.reason == "dropped_by_user"
        cut = next(i for i in plan.items if i.id == "atom:1:call_1")
        assert cut.included and "inactive tier" in cut.detail
        assert any("atom:2:call_2" in c and "dropped by the user" in c for c in second.changes)
        assert any(note.startswith("steered") for note in plan.notes)


def test_steer_drops_a_whole_turn_but_never_the_turn_in_progress(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        client = anthropic_client(proxy)
        messages = [{"role": "user", "content": "first question"}, {"role": "assistant", "content": "first answer"},
                    {"role": "user", "content": "second question"}]
        client.messages.create(model="c", max_tokens=5, messages=messages)
        session = wb.proxy.latest_session()
        wb.messages.drop(session, 1)
        wb.messages.drop(session, 2)  # the turn in progress: ignored
        client.messages.create(model="c", max_tokens=5, messages=messages)
        sent = json.loads(up.seen[1].body)
        assert sent["messages"] == [{"role": "user", "content": "second question"}]


def test_a_sticky_pin_survives_the_client_compacting(tmp_path):
    summary = "\n".join(f"- step {n}: we changed the rate handling in app/config.py and checked it" for n in range(6))
    with proxied(tmp_path, [Answer(), Answer(text=summary), Answer()], steer=True) as (up, wb, proxy):
        client = anthropic_client(proxy)
        client.messages.create(model="c", max_tokens=5, system=[{"type": "text", "text": "sys"}], messages=[
            {"role": "user", "content": "app/config.py\n```python\nRATE = 0.07\n```\nremember this file"}])
        session = wb.proxy.latest_session()
        plan = wb.plans.get(wb.proxy.exchanges(session)[0].plan_id)
        file_item = next(i for i in plan.items if i.kind == "attached_file")
        assert file_item.label == "file app/config.py" and file_item.section == "files"
        wb.pins.add(session, "path:app/config.py", "sticky", label="app/config.py", content="RATE = 0.07")
        client.messages.create(model="c", max_tokens=5, system=[{"type": "text", "text": "sys"}], messages=[
            {"role": "user", "content": "app/config.py\n```python\nRATE = 0.07\n```\nremember this file"},
            {"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "thanks"}])
        assert json.loads(up.seen[1].body)["system"] == [{"type": "text", "text": "sys"}]  # still carried: no add
        # the client compacts: its history is now the summary it got, and the file is gone from it
        client.messages.create(model="c", max_tokens=5, system=[{"type": "text", "text": "sys"}],
                               messages=[{"role": "user", "content": f"Summary of the conversation so far:\n{summary}"}])
        assert wb.proxy.latest_session() == session
        sent = json.loads(up.seen[2].body)
        assert sent["system"][0] == {"type": "text", "text": "sys"}
        assert "RATE = 0.07" in sent["system"][1]["text"] and "pinned by the user" in sent["system"][1]["text"]


def test_switching_a_conversation_back_to_pass_through(tmp_path):
    capture = Capture()
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        client = openai_client(proxy, capture)
        messages = conversation(2)
        client.chat.completions.create(model="m", messages=messages)
        wb.update_settings(wb.proxy.latest_session(), mode="light")
        client.chat.completions.create(model="m", messages=messages)
        assert up.seen[1].body != capture.bodies[1]  # steered: old tool results cut
        wb.proxy.set_passthrough(wb.proxy.latest_session(), True)
        messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}]
        client.chat.completions.create(model="m", messages=messages)
        assert up.seen[2].body == capture.bodies[2]
        plan = wb.plans.get(settled(wb)[-1].plan_id)
        assert any(note.startswith("pass-through") for note in plan.notes)


# -- faults ---------------------------------------------------------------------------------------------------
def test_upstream_errors_reach_the_client_as_sent_and_are_recorded(tmp_path):
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    script = [Answer(status=529, error_body=body), Answer(status=400, error_body=b'{"error":"bad"}'), Answer(),
              Answer(status=529, error_body=body)]
    with proxied(tmp_path, script) as (up, wb, proxy):
        with httpx.Client() as raw:
            first = raw.post(proxy.url + "/v1/messages", json={"model": "c", "max_tokens": 5, "messages": [
                {"role": "user", "content": "hi"}]}, headers={"x-api-key": FAKE_ANTHROPIC_KEY})
        assert first.status_code == 529 and first.content == body
        assert first.headers["x-upstream"] == "scripted"
        with pytest.raises(openai.BadRequestError):
            openai_client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        # a conversation's first request that no model answered leaves no session behind (the client may read the
        # error a moment before the proxy has finished with it)
        deadline = time.monotonic() + 10
        while _sessions(wb) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _sessions(wb) == [] and wb.proxy.latest_session() is None
        messages = [{"role": "user", "content": "a question"}]
        anthropic_client(proxy).messages.create(model="c", max_tokens=5, messages=messages)
        session = wb.proxy.latest_session()
        with pytest.raises(anthropic.APIStatusError):
            anthropic_client(proxy).messages.create(model="c", max_tokens=5, messages=messages + [
                {"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "more"}])
        outcomes = [(e.status, e.outcome) for e in settled(wb, session)]
        assert _sessions(wb) == [session]  # a failure in a conversation is kept with it
        assert outcomes == [(200, "ok"), (529, "upstream_error")]
        assert "Overloaded" in settled(wb, session)[-1].error


def _sessions(wb: Workbench) -> list[str]:
    return [s.id for s in wb.sessions.list()]


def settled(wb: Workbench, session: str | None = None, timeout: float = 10.0):
    """The session's exchanges once there is one and none is still being recorded (the client may have its
    last byte a moment before the proxy has written the exchange, which it records once forwarded)."""
    deadline = time.monotonic() + timeout
    while True:
        sid = session or wb.proxy.latest_session()
        found = wb.proxy.exchanges(sid) if sid is not None else ()
        if (found and all(e.outcome != "pending" for e in found)) or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_upstream_down_is_a_502_with_a_reason_and_is_recorded(tmp_path):
    wb = Workbench(tmp_path / "ctx.db", Config(proxy=ProxyConfig(connect_timeout_s=2)))
    service = ProxyService(wb)
    with Upstream() as up:
        messages = [{"role": "user", "content": "x"}]
        with RunningProxy(ProxyServer(service, up.url, wb.config.proxy), "127.0.0.1", 0) as proxy:
            openai_client(proxy).chat.completions.create(model="m", messages=messages)
        session = wb.proxy.latest_session()
    with RunningProxy(ProxyServer(service, "http://127.0.0.1:9", wb.config.proxy), "127.0.0.1", 0) as proxy:
        with pytest.raises(openai.InternalServerError) as info:
            openai_client(proxy).chat.completions.create(model="m", messages=messages + [
                {"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "y"}])
        assert info.value.status_code == 502 and "cannot reach the upstream" in str(info.value)
        (_ok, exchange) = settled(wb, session)
        assert exchange.outcome == "upstream_down" and exchange.status == 502
        with pytest.raises(openai.InternalServerError):  # a new conversation's first request: no session left
            openai_client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "new"}])
        assert [s.id for s in wb.sessions.list()] == [session]
    wb.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_stream_cut_mid_way_is_cut_for_the_client_too(tmp_path, provider):
    with proxied(tmp_path, [Answer(text="a" * 200, cut_after_events=6)]) as (up, wb, proxy):
        got = []
        with pytest.raises((httpx.HTTPError, openai.APIError, anthropic.APIError)):
            if provider == "openai":
                for chunk in openai_client(proxy).chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "x"}], stream=True):
                    got.append(chunk.choices[0].delta.content or "")
            else:
                with anthropic_client(proxy).messages.stream(
                        model="c", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as stream:
                    for piece in stream.text_stream:
                        got.append(piece)
        assert 0 < len("".join(got)) < 200  # the client got the part the upstream sent, then the cut
        (exchange,) = settled(wb)
        assert exchange.outcome == "cut" and "cut" in exchange.error
        assert 0 < len(exchange.reply) < 200


def test_a_long_stream_goes_through_in_bounded_memory(tmp_path):
    events, filler = 8000, "y" * 2000  # 16 MB of reply text
    config = Config(proxy=ProxyConfig(record_reply_chars=10_000, chunk_bytes=16384))
    with proxied(tmp_path, [Answer(text="start", events=events, filler=filler)], config=config) as (up, wb, proxy):
        received = 0
        wb.tokenizer.count("loaded once per process, before the measurement")
        tracemalloc.start()
        try:
            with httpx.Client(timeout=60) as raw, raw.stream("POST", proxy.url + "/v1/chat/completions", json={
                    "model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}) as response:
                for chunk in response.iter_raw():
                    received += len(chunk)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert received > events * len(filler)
        assert peak < 8 * 1024 * 1024, f"peak traced memory {peak:,} bytes while {received:,} bytes streamed"
        (exchange,) = settled(wb)
        assert exchange.outcome == "ok" and exchange.reply_cut and len(exchange.reply) == 10_000


def test_other_paths_are_forwarded_without_being_recorded(tmp_path):
    with proxied(tmp_path) as (up, wb, proxy):
        models = openai_client(proxy).models.list()
        assert [m.id for m in models] == ["scripted-model"]
        assert up.seen[0].method == "GET" and up.seen[0].headers["authorization"] == f"Bearer {FAKE_OPENAI_KEY}"
        assert wb.proxy.latest_session() is None


def test_unreadable_bodies_are_forwarded_unchanged(tmp_path):
    with proxied(tmp_path, [Answer(status=400, error_body=b'{"error":"not json"}')]) as (up, wb, proxy):
        with httpx.Client() as raw:
            response = raw.post(proxy.url + "/v1/chat/completions", content=b"{not json",
                                headers={"content-type": "application/json"})
        assert response.status_code == 400 and up.seen[0].body == b"{not json"


def test_upstream_url_joins_without_repeating_v1():
    assert upstream_url("http://h:1/v1", "/v1/chat/completions") == "http://h:1/v1/chat/completions"
    assert upstream_url("https://api.anthropic.com", "/v1/messages?beta=true") == \
        "https://api.anthropic.com/v1/messages?beta=true"
    assert upstream_url("http://h/proxy/", "/v1/x") == "http://h/proxy/v1/x"


def test_the_proxy_command_serves_and_logs_each_exchange_without_its_key(tmp_path):
    import os
    import subprocess
    import sys

    with Upstream([Answer(text="from the command")]) as up:
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "proxy", "--upstream", up.url, "--port", "0",
                                 "--db", str(tmp_path / "cli.db")], stderr=subprocess.PIPE, text=True, env=env)
        try:
            first = proc.stderr.readline()
            assert first.startswith("ctxbench proxy on http://127.0.0.1:") and "steering off" in first
            url = first.split()[3]
            for _ in range(3):
                proc.stderr.readline()  # the how-to lines
            client = openai.OpenAI(base_url=url + "/v1", api_key=FAKE_OPENAI_KEY, max_retries=0)
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            assert reply.choices[0].message.content == "from the command"
            line = proc.stderr.readline()
            assert line.startswith("POST /v1/chat/completions → 200 ok · #1 s_") and "reported 1,234" in line
        finally:
            proc.terminate()
            out = proc.communicate(timeout=20)[1]
    assert FAKE_OPENAI_KEY not in first + line + out
