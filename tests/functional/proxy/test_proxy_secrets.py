"""The proxy forwards secrets upstream as the client sent them and stores none of them: not in the messages
table, its search index, the stored request bodies, the plans, the exchange's reply, nor anything ``export``
or ``show`` prints. A real proxy on loopback, a scripted upstream (tests/upstream_server.py), the real
``openai`` and ``anthropic`` clients.

The fake secrets have real formats but are assembled at run time from random characters, so this file
holds no literal a secret scanner would flag.
"""
from __future__ import annotations

import json
import random
import string
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from upstream_server import Answer

from ctxbench.cli import main
from test_proxy import anthropic_client, openai_client, proxied, settled

_rng = random.Random(2311)
_AN = string.ascii_letters + string.digits


def _pick(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


AWS_ID = "AK" + "IA" + _pick(string.ascii_uppercase + string.digits, 16)
AWS_SECRET = _pick(_AN + "/+", 38) + "/7"
OPENAI_KEY = "sk" + "-proj-" + _pick(_AN, 48)
GITHUB = "gh" + "p_" + _pick(_AN, 36)
SLACK = "xo" + "xb-" + _pick(string.digits, 12) + "-" + _pick(string.digits, 12) + "-" + _pick(string.ascii_letters, 24)
STRIPE = "sk" + "_live_" + _pick(_AN, 24)
DB_PASSWORD = "pw" + _pick(_AN, 14)
DB_URL = f"postgres://app:{DB_PASSWORD}@db.internal:5432/app"
SECRETS = {"aws key id": AWS_ID, "aws secret": AWS_SECRET, "sk- key": OPENAI_KEY, "github token": GITHUB,
           "slack token": SLACK, "stripe key": STRIPE, "database password": DB_PASSWORD}
REPLY = f"Done. For the record the deploy token is {GITHUB} and the slack one {SLACK}."


def _openai_messages() -> list[dict]:
    return [
        {"role": "system", "content": f"Deploy with AWS_ACCESS_KEY_ID={AWS_ID} AWS_SECRET_ACCESS_KEY={AWS_SECRET}"},
        {"role": "user", "content": f"my key is {OPENAI_KEY}, connect to {DB_URL} please"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "run", "arguments": json.dumps({"cmd": f"curl -H 'Authorization: token {GITHUB}' x"})}}]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": "# .env\n" + "\n".join(f"K{n}=v" for n in range(20)) + f"\nSLACK_TOKEN={SLACK}\n"
                    f"STRIPE_KEY={STRIPE}\n" + "x" * 3000},
        {"role": "user", "content": f"and now summarise; the key again: {OPENAI_KEY}"},
    ]


def _anthropic_messages() -> tuple[list[dict], list[dict]]:
    system = [{"type": "text", "text": f"secrets: {AWS_ID} {AWS_SECRET}"}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": f"use {STRIPE} and {DB_URL}"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash",
                                           "input": {"command": f"export GH={GITHUB}"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": f"OPENAI_API_KEY={OPENAI_KEY}\nSLACK={SLACK}"},
                                     {"type": "text", "text": "go on"}]},
    ]
    return system, messages


def _leaks(data: bytes | str) -> list[str]:
    raw = data.encode() if isinstance(data, str) else data
    return [name for name, secret in SECRETS.items() if secret.encode() in raw]


def _sent_all(bodies: list[bytes]) -> None:
    sent = b"".join(bodies)
    assert _leaks(sent) == list(SECRETS), "the upstream must receive every secret as the client sent it"


@pytest.mark.parametrize("steer", [False, True], ids=["pass-through", "steering"])
def test_secrets_are_forwarded_but_never_stored_or_printed(tmp_path, steer):
    script = [Answer(text=REPLY)]
    with proxied(tmp_path, script, steer=steer) as (up, wb, proxy):
        openai_client(proxy).chat.completions.create(model="m", messages=_openai_messages())
        stream = openai_client(proxy).chat.completions.create(model="m", messages=_openai_messages()[:2], stream=True)
        assert REPLY in "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        system, messages = _anthropic_messages()
        anthropic_client(proxy).messages.create(model="c", max_tokens=5, system=system, messages=messages)
        with anthropic_client(proxy).messages.stream(model="c", max_tokens=5, system=system,
                                                     messages=messages) as s:
            assert "".join(s.text_stream) == REPLY
        sessions = [s.id for s in wb.sessions.list()]
        exchanges = [e for sid in sessions for e in settled(wb, sid)]
        assert len(exchanges) == 4 and all(e.outcome == "ok" for e in exchanges)
        _sent_all([s.body for s in up.seen])
        # the upstream got exactly what the client sent (steering only cuts the long tool result)
        if not steer:
            first = json.loads(up.seen[0].body)
            assert first["messages"] == _openai_messages()

        # every byte of the store, its write-ahead log included, while the proxy still runs
        files = [p for p in tmp_path.iterdir() if p.name.startswith("ctx.db")]
        assert any(p.name.endswith("-wal") for p in files)
        for path in files:
            assert _leaks(path.read_bytes()) == [], path.name
        # the stored bodies (compressed in the store) keep their JSON shape with the secrets masked
        for e in exchanges:
            original, upstream = wb.proxy.bodies(e.id)
            for body in (original, upstream) if upstream is not None else (original,):
                assert _leaks(body) == []
                assert "[REDACTED]" in body.decode()
                data = json.loads(body)
                assert isinstance(data["messages"], list) and data["model"] in ("m", "c")
            assert _leaks(e.reply) == [] and "[REDACTED]" in e.reply
            plan = wb.plans.get(e.plan_id)
            assert _leaks(json.dumps([i.__dict__ for i in plan.items], default=str)) == []
            assert any(i.redacted for i in plan.items)
        with wb.database.connection() as conn:  # the search index holds the masked text only
            hits = conn.execute("SELECT count(*) FROM message_search WHERE message_search MATCH ?",
                                ('"REDACTED"',)).fetchone()[0]
        assert hits > 0
        blobs = wb.database.connection
        with blobs() as conn:
            for (packed,) in conn.execute("SELECT request FROM proxy_exchanges"):
                assert _leaks(zlib.decompress(packed)) == []

        runner = CliRunner()
        db = str(tmp_path / "ctx.db")
        for sid in sessions:
            result = runner.invoke(main, ["export", sid, "--include-dropped", "--db", db])
            assert result.exit_code == 0, result.output
            assert "[REDACTED]" in result.output and _leaks(result.output) == []
        for e in exchanges:
            for flags in ([], ["--json"], ["--messages"]):
                result = runner.invoke(main, ["show", e.plan_id, *flags, "--db", db])
                assert result.exit_code == 0, result.output
                assert _leaks(result.output) == [], (flags, result.output[:400])
    for path in Path(tmp_path).iterdir():
        if path.name.startswith("ctx.db"):
            assert _leaks(path.read_bytes()) == [], path.name


def test_a_conversation_with_a_secret_is_still_recognised_on_its_next_request(tmp_path):
    with proxied(tmp_path, [Answer(text=REPLY)]) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = _openai_messages()
        client.chat.completions.create(model="m", messages=messages)
        first = wb.proxy.latest_session()
        messages += [{"role": "assistant", "content": REPLY}, {"role": "user", "content": "thanks"}]
        client.chat.completions.create(model="m", messages=messages)
        assert wb.proxy.latest_session() == first and len(settled(wb, first)) == 2
        history = wb.messages.all(first)
        assert [m.role for m in history] == ["user", "assistant", "tool", "user", "assistant", "user"]
        assert _leaks(json.dumps([m.content for m in history])) == []
        call = history[1].tool_calls[0]
        assert "[REDACTED]" in json.loads(call.arguments)["cmd"]  # the arguments stay JSON
        assert wb.sessions.info(first).title == "proxy: and now summarise; the key again: [REDACTED]"


def test_responses_and_gemini_requests_store_no_secret_either(tmp_path):
    import httpx2 as httpx

    responses = {"model": "gpt-test", "instructions": f"deploy key {AWS_ID} {AWS_SECRET}", "input": [
        {"role": "user", "content": f"use {OPENAI_KEY} and {DB_URL}"},
        {"type": "function_call", "call_id": "call_a", "name": "shell",
         "arguments": json.dumps({"command": f"export GH={GITHUB}"})},
        {"type": "function_call_output", "call_id": "call_a", "output": f"SLACK={SLACK}\nSTRIPE={STRIPE}"},
        {"role": "user", "content": "go on"}]}
    gemini = {"systemInstruction": {"parts": [{"text": f"keys: {AWS_ID} {AWS_SECRET}"}]}, "contents": [
        {"role": "user", "parts": [{"text": f"use {OPENAI_KEY} and {DB_URL}"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "shell", "args": {"command": f"export GH={GITHUB}"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "shell", "response": {
            "output": f"SLACK={SLACK}\nSTRIPE={STRIPE}"}}}]},
        {"role": "user", "parts": [{"text": "go on"}]}]}
    with proxied(tmp_path, [Answer(text=REPLY)]) as (up, wb, proxy):
        with httpx.Client(timeout=60) as raw:
            for path, body in (("/v1/responses", responses),
                               ("/v1beta/models/gemini-test:generateContent", gemini)):
                assert raw.post(proxy.url + path, json=body).status_code == 200
        _sent_all([s.body for s in up.seen])
        exchanges = [e for s in wb.sessions.list() for e in settled(wb, s.id)]
        assert len(exchanges) == 2 and {e.provider for e in exchanges} == {"responses", "gemini"}
        for e in exchanges:
            original, _ = wb.proxy.bodies(e.id)
            assert _leaks(original) == [] and "[REDACTED]" in original.decode()
        for path in tmp_path.iterdir():
            if path.name.startswith("ctx.db"):
                assert _leaks(path.read_bytes()) == [], path.name
