"""A request above the record limit is forwarded as it arrives, byte for byte, and recorded with its long
texts cut (a real proxy on loopback, a scripted upstream, the limit made small in the test's config)."""
from __future__ import annotations

import json

import httpx2 as httpx
import pytest

from ctxbench.config import Config, ProxyConfig
from ctxbench.service.proxy.body import JsonCutter
from test_proxy import proxied, settled

LIMIT, CUT = 64 * 1024, 2048


def big_request(stream: bool = False) -> bytes:
    paste = "".join(f"line {n}: the quick brown fox jumps over the lazy dog é ✓\n" for n in range(20_000))  # ~1.2 MB
    return json.dumps({"model": "m", "stream": stream, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "read this log\n" + paste},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "read_file", "arguments": json.dumps({"path": "big.txt"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "\"quoted\" \\ and \u00e9 " * 20_000},
        {"role": "user", "content": "what went wrong?"},
    ]}, ensure_ascii=False).encode()


@pytest.mark.parametrize("steer", [False, True], ids=["pass-through", "steering"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_request_above_the_record_limit_is_forwarded_whole_and_recorded_cut(tmp_path, steer, stream):
    config = Config(proxy=ProxyConfig(max_request_bytes=LIMIT, record_text_bytes=CUT))
    body = big_request(stream)
    assert len(body) > 20 * LIMIT
    with proxied(tmp_path, steer=steer, config=config) as (up, wb, proxy):
        with httpx.Client(timeout=60) as raw:
            response = raw.post(proxy.url + "/v1/chat/completions", content=body,
                                headers={"Content-Type": "application/json"})
        assert response.status_code == 200  # never a 413
        assert up.seen[0].body == body  # forwarded byte for byte, steering or not
        (exchange,) = settled(wb)
        assert exchange.outcome == "ok" and not exchange.steered
        stored, upstream = wb.proxy.bodies(exchange.id)
        assert upstream is None and len(stored) < LIMIT
        data = json.loads(stored)  # still JSON, its short texts whole, its long ones cut and saying so
        assert data["messages"][0]["content"] == "Be brief." and data["messages"][4]["content"] == "what went wrong?"
        for n in (1, 3):
            text = data["messages"][n]["content"]
            original = json.loads(body)["messages"][n]["content"]
            kept = text.split(" … [cut by ctxbench:")[0]
            assert original.startswith(kept) and len(kept) > CUT // 3 and "bytes recorded]" in text
        plan = wb.plans.get(exchange.plan_id)
        assert any("above the record limit" in note and f"cut to {CUT:,} bytes" in note for note in plan.notes)
        assert plan.estimated
        assert any(note.startswith("not steered") for note in plan.notes) == steer
        history = wb.messages.all(exchange.session_id)
        assert [m.role for m in history] == ["user", "assistant", "tool", "user"]
        assert all(len(m.content) < 2 * CUT for m in history)


def test_a_request_within_the_limit_is_recorded_whole(tmp_path):
    config = Config(proxy=ProxyConfig(max_request_bytes=len(big_request()) + 1, record_text_bytes=CUT))
    with proxied(tmp_path, config=config) as (up, wb, proxy):
        with httpx.Client(timeout=60) as raw:
            raw.post(proxy.url + "/v1/chat/completions", content=big_request(),
                     headers={"Content-Type": "application/json"})
        (exchange,) = settled(wb)
        assert wb.proxy.bodies(exchange.id)[0] == big_request()
        assert not any("record limit" in note for note in wb.plans.get(exchange.plan_id).notes)


def test_the_cutter_keeps_json_whatever_the_pieces():
    text = json.dumps({"a": "x" * 5000, "b": ["\u00e9\u2713\\\"" * 900, "short", 1, None], "c": {"d": "\U0001F600" * 3000}},
                      ensure_ascii=False).encode()
    for size in (1, 2, 3, 7, 64, 4096):
        for ascii_only in (False, True):
            raw = json.dumps(json.loads(text), ensure_ascii=ascii_only).encode()
            cutter = JsonCutter(1024)
            for i in range(0, len(raw), size):
                cutter.feed(raw[i:i + size])
            data = json.loads(bytes(cutter.out))
            assert data["b"][1:] == ["short", 1, None] and cutter.texts_cut == 3
            original = json.loads(raw)
            for got, whole in ((data["a"], original["a"]), (data["b"][0], original["b"][0]),
                               (data["c"]["d"], original["c"]["d"])):
                kept = got.split(" … [cut by ctxbench:")[0]
                assert whole.startswith(kept) and len(kept) > 50


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_reply_does_not_wait_for_a_slow_recording_and_the_exchange_is_still_recorded(tmp_path, stream):
    from upstream_server import Answer

    # every recording is "slow": the reply never waits for it, and the exchange is completed once it is stored
    config = Config(proxy=ProxyConfig(record_wait_s=1e-9, reply_save_s=1e-9))
    with proxied(tmp_path, [Answer(text="a reply that streamed on", events=50, filler=" and on")],
                 config=config) as (up, wb, proxy):
        with httpx.Client(timeout=60) as raw:
            response = raw.post(proxy.url + "/v1/chat/completions", json={
                "model": "m", "stream": stream, "messages": [{"role": "user", "content": "x " * 200_000}]})
        assert response.status_code == 200 and up.seen[0].json()["messages"][0]["content"] == "x " * 200_000
        (exchange,) = settled(wb)
        assert exchange.outcome == "ok" and exchange.reply.startswith("a reply that streamed on")
        assert wb.plans.get(exchange.plan_id).used_tokens > 100_000
