"""Who may write conversations through the proxy: a real proxy on loopback, a scripted upstream, raw HTTP
requests dressed as a web page or another host would send them, and the real ``openai`` client."""
from __future__ import annotations

import os
import subprocess
import sys

import httpx2 as httpx
import pytest
from sdk import openai
from upstream_server import Answer, Upstream

from ctxbench.config import Config, ProxyConfig
from test_proxy import FAKE_OPENAI_KEY, openai_client, proxied, settled

CHAT = {"model": "m", "messages": [{"role": "user", "content": "write this down"}]}
TOKEN = "tok-" + "7" * 24


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:{port}", "127.0.0.1:1", "localhost",
                                  "192.168.1.20:{port}"])
def test_a_foreign_host_is_refused(tmp_path, host):
    with proxied(tmp_path) as (up, wb, proxy):
        with httpx.Client() as raw:
            response = raw.post(proxy.url + "/v1/chat/completions", json=CHAT,
                                headers={"Host": host.format(port=_port(proxy.url))})
        assert response.status_code == 403 and "Host" in response.json()["error"]["message"]
        assert up.seen == [] and wb.proxy.latest_session() is None


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]"])
def test_loopback_names_with_the_proxys_port_are_served(tmp_path, name):
    with proxied(tmp_path) as (up, wb, proxy):
        with httpx.Client() as raw:
            response = raw.post(proxy.url + "/v1/chat/completions", json=CHAT,
                                headers={"Host": f"{name}:{_port(proxy.url)}"})
        assert response.status_code == 200 and len(up.seen) == 1
        assert len(settled(wb)) == 1


@pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example", "null", "http://127.0.0.1:1"])
def test_a_web_pages_request_is_refused(tmp_path, origin):
    with proxied(tmp_path) as (up, wb, proxy):
        with httpx.Client() as raw:
            response = raw.post(proxy.url + "/v1/chat/completions", content=b'{"model": "m", "messages": []}',
                                headers={"Origin": origin, "Content-Type": "text/plain"})
        assert response.status_code == 403 and "Origin" in response.json()["error"]["message"]
        assert up.seen == [] and wb.proxy.latest_session() is None


def test_a_text_plain_post_is_forwarded_but_not_recorded(tmp_path):
    import json

    with proxied(tmp_path) as (up, wb, proxy):
        body = json.dumps(CHAT).encode()
        with httpx.Client() as raw:
            response = raw.post(proxy.url + "/v1/chat/completions", content=body,
                                headers={"Content-Type": "text/plain"})
        assert response.status_code == 200  # the upstream answered: its call, not the proxy's
        assert up.seen[0].body == body and up.seen[0].headers["content-type"] == "text/plain"
        assert wb.proxy.latest_session() is None and wb.sessions.list() == []


def test_with_a_token_only_requests_that_carry_it_are_served(tmp_path):
    config = Config(proxy=ProxyConfig(token=TOKEN))
    with proxied(tmp_path, config=config) as (up, wb, proxy):
        with httpx.Client() as raw:
            bare = raw.post(proxy.url + "/v1/chat/completions", json=CHAT)
            wrong = raw.post(proxy.url + "/v1/chat/completions", json=CHAT, headers={"X-Ctxbench-Token": "nope"})
            wrong_path = raw.post(proxy.url + "/t/nope/v1/chat/completions", json=CHAT)
            models = raw.get(proxy.url + "/v1/models")
        for response in (bare, wrong, wrong_path, models):
            assert response.status_code == 401 and "token" in response.json()["error"]["message"]
        assert up.seen == [] and wb.sessions.list() == []

        with httpx.Client() as raw:
            by_header = raw.post(proxy.url + "/v1/chat/completions", json=CHAT, headers={"X-Ctxbench-Token": TOKEN})
        assert by_header.status_code == 200
        client = openai.OpenAI(base_url=f"{proxy.url}/t/{TOKEN}/v1", api_key=FAKE_OPENAI_KEY, max_retries=0)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "by path"}])
        assert reply.choices[0].message.content == "Hello from upstream."
        # the token never goes upstream, nor into the store
        assert [s.path for s in up.seen] == ["/v1/chat/completions"] * 2
        assert all("x-ctxbench-token" not in s.headers for s in up.seen)
        sessions = [s.id for s in wb.sessions.list()]
        exchanges = [e for sid in sessions for e in settled(wb, sid)]
        assert len(exchanges) == 2 and {e.path for e in exchanges} == {"/v1/chat/completions"}
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("ctx.db"))
    assert TOKEN.encode() not in stored


def test_without_a_token_the_proxy_serves_plain_clients(tmp_path):
    with proxied(tmp_path) as (up, wb, proxy):
        openai_client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert len(settled(wb)) == 1


def test_the_proxy_command_takes_a_token_and_prints_urls_that_carry_it(tmp_path):
    with Upstream([Answer(text="with the token")]) as up:
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "proxy", "--upstream", up.url, "--port", "0",
                                 "--token", TOKEN, "--db", str(tmp_path / "cli.db")], stderr=subprocess.PIPE,
                                text=True, env=env)
        try:
            first = proc.stderr.readline()
            assert first.startswith("ctxbench proxy on http://127.0.0.1:") and "token required" in first
            url = first.split()[3]
            lines = [proc.stderr.readline() for _ in range(3)]
            assert any(f"{url}/t/{TOKEN}/v1" in line for line in lines)
            with httpx.Client() as raw:
                assert raw.post(url + "/v1/chat/completions", json=CHAT).status_code == 401
                assert proc.stderr.readline().startswith("POST /v1/chat/completions → 401 refused")
            client = openai.OpenAI(base_url=f"{url}/t/{TOKEN}/v1", api_key=FAKE_OPENAI_KEY, max_retries=0)
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            assert reply.choices[0].message.content == "with the token"
            line = proc.stderr.readline()
            assert line.startswith("POST /v1/chat/completions → 200 ok · #1")
        finally:
            proc.terminate()
            out = proc.communicate(timeout=20)[1]
    assert TOKEN not in line + out


@pytest.mark.parametrize("token", ["short", "has/a/slash-in-it-0000", "spaces are not ok 00000"])
def test_a_token_that_cannot_protect_or_travel_in_a_url_is_refused(tmp_path, token):
    from click.testing import CliRunner

    from ctxbench.cli import main

    result = CliRunner().invoke(main, ["proxy", "--upstream", "http://127.0.0.1:9", "--port", "0", "--token", token,
                                       "--db", str(tmp_path / "ctx.db")])
    assert result.exit_code == 2 and "--token must be" in result.output
