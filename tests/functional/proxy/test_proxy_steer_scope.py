"""Steering changes only what the user asked for: with ``--steer`` and nothing asked the upstream gets the
client's request byte for byte; a drop changes that item and nothing else; the Context Mode cuts tool
results only once the user set it for the conversation. Real proxy on loopback, real ``openai`` and
``anthropic`` clients, a scripted upstream."""
from __future__ import annotations

import json
import os

from click.testing import CliRunner

from test_proxy import Capture, anthropic_client, conversation, openai_client, proxied, settled
from upstream_server import Answer

from ctxbench.cli import main
from ctxbench.records.vocab import NO_MODE


def test_steering_on_with_nothing_asked_forwards_every_request_byte_for_byte(tmp_path):
    capture = Capture()
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        client = openai_client(proxy, capture)
        messages = conversation(3, result_chars=12_089)
        client.chat.completions.create(model="m", messages=messages)
        messages += [{"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "next"}]
        client.chat.completions.create(model="m", messages=messages)
        claude = anthropic_client(proxy, capture)
        claude.messages.create(model="c", max_tokens=5, messages=[
            {"role": "user", "content": "read it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "z" * 12_089}]},
            {"role": "assistant", "content": "read"}, {"role": "user", "content": "and?"}])
        assert [s.body for s in up.seen] == capture.bodies  # the upstream got exactly what each client sent
        for sid in {wb.proxy.latest_session(), *(s.id for s in wb.sessions.list())}:
            for exchange in settled(wb, sid):
                assert not exchange.steered and exchange.changes == ()
                assert wb.proxy.bodies(exchange.id)[1] is None
                plan = wb.plans.get(exchange.plan_id)
                assert not any("cut" in i.detail for i in plan.items)


def test_a_drop_changes_only_the_dropped_item(tmp_path):
    capture = Capture()
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        client = openai_client(proxy, capture)
        messages = conversation(3, result_chars=12_089)
        client.chat.completions.create(model="m", messages=messages)
        session = wb.proxy.latest_session()
        wb.proxy.drop(session, "atom:2:call_2")
        messages += [{"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "next"}]
        client.chat.completions.create(model="m", messages=messages)
        sent, original = json.loads(up.seen[1].body), json.loads(capture.bodies[1])
        expected = [m for m in original["messages"]
                    if m.get("tool_call_id") != "call_2"
                    and "call_2" not in [c["id"] for c in m.get("tool_calls") or ()]]
        assert len(expected) == len(original["messages"]) - 2
        assert sent["messages"] == expected  # every other message exactly as the client sent it
        assert {k: v for k, v in sent.items() if k != "messages"} == \
            {k: v for k, v in original.items() if k != "messages"}
        (_first, second) = settled(wb, session)
        assert len(second.changes) == 1 and "atom:2:call_2" in second.changes[0]


def test_the_mode_cuts_tool_results_only_once_the_user_set_it(tmp_path):
    capture = Capture()
    with proxied(tmp_path, [Answer()], steer=True) as (up, wb, proxy):
        client = openai_client(proxy, capture)
        messages = conversation(2, result_chars=12_089)
        client.chat.completions.create(model="m", messages=messages)
        session = wb.proxy.latest_session()
        assert wb.settings(session).mode == "light"  # the default mode: not the user's choice, so no cut
        assert up.seen[0].body == capture.bodies[0]
        wb.update_settings(session, mode="light")  # the user picks Light for this conversation
        client.chat.completions.create(model="m", messages=messages)
        results = [m["content"] for m in json.loads(up.seen[1].body)["messages"] if m["role"] == "tool"]
        assert all(len(r) < 400 and "cut by ctxbench" in r for r in results)  # past turns' results: inactive tier
        plan = wb.plans.get(settled(wb, session)[-1].plan_id)
        assert any("mode light, set by you" in n for n in plan.notes)


def test_a_stored_proxied_plan_names_no_mode_the_user_did_not_set(tmp_path):
    with proxied(tmp_path, [Answer()], steer=True) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = conversation(2, result_chars=800)
        client.chat.completions.create(model="m", messages=messages)
        session = wb.proxy.latest_session()
        first = settled(wb, session)[-1].plan_id
        # the session's default mode shaped nothing: neither the plan nor its stored inputs claim it
        assert wb.plans.get(first).mode == "" and wb.plans.inputs(first).mode == ""
        assert wb.plans.inputs(first).strategy == "proxy"
        wb.update_settings(session, mode="heavy")  # the user picks Heavy for this conversation
        client.chat.completions.create(model="m", messages=messages)
        second = settled(wb, session)[-1].plan_id
        assert wb.plans.get(second).mode == "heavy" and wb.plans.inputs(second).mode == "heavy"
    # `show` names no mode rather than printing an empty one ("mode  · strategy proxy")
    shown = CliRunner().invoke(main, ["show", first, "--db", str(tmp_path / "ctx.db")],
                               env={"CTXBENCH_CONFIG": os.devnull})
    assert shown.exit_code == 0, shown.output
    assert f"mode {NO_MODE} · strategy proxy" in shown.output and "mode  ·" not in shown.output


def test_the_start_up_line_says_what_steering_will_change(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "proxy", "--upstream", "http://127.0.0.1:9",
                             "--port", "0", "--steer", "--db", str(tmp_path / "cli.db")],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        first, second = proc.stderr.readline(), proc.stderr.readline()
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
    assert "steering on" in first
    assert "only what you ask changes a request" in second and "nothing asked, nothing changed" in second
