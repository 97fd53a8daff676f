"""The assistants people use, installed by `make clients` (tests/client_drivers.py), each driven through
``ctxbench proxy`` to a scripted upstream on loopback (tests/assistant_upstream.py): Claude Code (Anthropic
Messages), Codex CLI (the Responses API), aider (Chat Completions) and Gemini CLI (generateContent). A client
that is not installed skips, saying which."""
from __future__ import annotations

import copy
import json
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from assistant_upstream import INPUT_TOKENS, AssistantUpstream, Turn
from client_drivers import Driver, shown

from ctxbench.config import Config
from ctxbench.proxy.server import ProxyServer, RunningProxy
from ctxbench.service.proxy_service import ProxyService
from ctxbench.service.workbench import Workbench

CLIENTS = ("claude", "codex", "aider", "gemini")
REPLY = "PONG from the scripted upstream"
QUESTION = "What does the parser module do?"
WAITS_FOR_RESPONSES = "the proxy records the Responses API (Codex) on the responses branch"
WAITS_FOR_GEMINI = "the proxy records Gemini generateContent on the responses branch"
WAITS_FOR_TITLES = "sessions titled by the user's own words (not reminders or few-shot examples) on the responses branch"
NOT_RECORDED_YET = {"codex": WAITS_FOR_RESPONSES, "gemini": WAITS_FOR_GEMINI}


def recorded(client: str):
    """The client's recording is a case of the test: an expected failure where the proxy cannot record it yet."""
    reason = NOT_RECORDED_YET.get(client)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(client, marks=marks, id=client)


@contextmanager
def proxied(tmp_path: Path, script: list[Turn] | None = None, *, steer: bool = False):
    with AssistantUpstream(script) as up:
        wb = Workbench(tmp_path / "ctx.db", Config())
        try:
            with RunningProxy(ProxyServer(ProxyService(wb, steer=steer), up.url, wb.config.proxy),
                              "127.0.0.1", 0) as proxy:
                yield up, wb, proxy
        finally:
            wb.close()


def driver(client: str, tmp_path: Path) -> Driver:
    return Driver(client, tmp_path / "home", tmp_path / "work")


def settled(wb: Workbench, session: str | None, timeout: float = 10.0):
    """The session's exchanges once none is still being recorded."""
    deadline = time.monotonic() + timeout
    while True:
        found = wb.proxy.exchanges(session) if session else []
        if found and all(e.outcome != "pending" for e in found) or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def asking(wb: Workbench, question: str):
    """The stored sessions with an exchange whose request carries ``question`` (a client's side calls — a
    title, a router's verdict — may be sessions of their own)."""
    out = []
    for info in wb.sessions.list():
        for exchange in settled(wb, info.id):
            original, _upstream = wb.proxy.bodies(exchange.id)
            if question.encode() in original:
                out.append((info, exchange))
    return out


# -- every client, through the proxy ------------------------------------------------------------------------------
@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_prints_the_upstreams_reply_through_the_proxy(tmp_path, client):
    with proxied(tmp_path) as (up, wb, proxy):
        result = driver(client, tmp_path).ask(proxy.url, QUESTION)
        assert result.returncode == 0 and REPLY in result.stdout, shown(result, up.calls())
        chats = up.chats()
        assert chats and any(QUESTION.encode() in s.body for s in chats), shown(result, up.calls())
        # every call went through the proxy: its auth passed on, its path as the client wrote it
        for seen in chats:
            assert any("dummy-client-key" in value for value in seen.headers.values()), seen.headers.keys()


@pytest.mark.parametrize("client", [recorded(c) for c in CLIENTS])
def test_each_clients_request_is_stored_as_a_plan_with_its_reply_and_usage(tmp_path, client):
    with proxied(tmp_path) as (up, wb, proxy):
        result = driver(client, tmp_path).ask(proxy.url, QUESTION)
        assert result.returncode == 0, shown(result, up.calls())
        found = asking(wb, QUESTION)
        assert found, f"no stored exchange carries the question; upstream calls: {up.calls()}"
        _info, exchange = found[-1]
        assert exchange.outcome == "ok" and exchange.status == 200 and not exchange.steered
        original, upstream = wb.proxy.bodies(exchange.id)
        body = json.loads(original)
        # a streamed Chat Completions reply carries usage only when the client asks for it (aider does not)
        asked_usage = not (exchange.provider == "openai" and body.get("stream")
                           and not (body.get("stream_options") or {}).get("include_usage"))
        assert exchange.reply == REPLY and exchange.reported_prompt == (INPUT_TOKENS if asked_usage else None)
        assert upstream is None and any(s.body == original for s in up.chats())  # forwarded byte for byte
        plan = wb.plans.get(exchange.plan_id)
        assert plan.used_tokens == sum(i.tokens for i in plan.included) > 0
        assert all(i.tokens > 0 for i in plan.items)
        # the user's words are in exactly one item, and every tool the client offered is an item of its own
        holding = [i for i in plan.items if QUESTION in json.dumps(i.messages, ensure_ascii=False)]
        assert len(holding) == 1, [i.id for i in holding]
        offered = {t.get("name") or (t.get("function") or {}).get("name") for t in body.get("tools") or ()} - {None}
        assert offered <= {i.id.removeprefix("tool:") for i in plan.items if i.kind == "tool_definitions"}


@pytest.mark.parametrize("client", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=NOT_RECORDED_YET.get(c, WAITS_FOR_TITLES)), id=c)
    for c in CLIENTS])
def test_each_clients_session_is_titled_by_the_users_words(tmp_path, client):
    with proxied(tmp_path) as (up, wb, proxy):
        result = driver(client, tmp_path).ask(proxy.url, QUESTION)
        assert result.returncode == 0, shown(result, up.calls())
        found = asking(wb, QUESTION)
        assert found and all(info.title == f"proxy: {QUESTION}" for info, _ in found), \
            [info.title for info, _ in found]


# -- steering with the real clients -----------------------------------------------------------------------------
def _without_call(body: dict, call_id: str) -> dict:
    """``body`` with one tool call and its result taken out (Anthropic Messages), and messages left empty gone:
    the request a drop of that tool call should send, worked out here apart from the proxy's editing code."""
    out = copy.deepcopy(body)
    kept = []
    for message in out["messages"]:
        content = message["content"]
        if isinstance(content, list):
            content = [b for b in content if not (b.get("type") == "tool_use" and b.get("id") == call_id)
                       and not (b.get("type") == "tool_result" and b.get("tool_use_id") == call_id)]
            if not content:
                continue
            message["content"] = content
        kept.append(message)
    out["messages"] = kept
    return out


def test_claude_code_with_a_dropped_tool_result_sends_exactly_the_edited_request_and_completes(tmp_path):
    d = driver("claude", tmp_path)
    d.cwd.mkdir(parents=True)
    notes = d.cwd / "notes.txt"
    notes.write_text("the parser turns tokens into a tree\n" * 40)
    script = [Turn(text="Reading it.", tool="Read", arguments={"file_path": str(notes)}, call_id="toolu_read_1"),
              Turn(text="It parses."), Turn(text="Second answer.")]
    with proxied(tmp_path, script, steer=True) as (up, wb, proxy):
        first = d.ask(proxy.url, "Summarise notes.txt")
        assert first.returncode == 0 and "It parses." in first.stdout, shown(first, up.calls())
        assert any(b'"tool_result"' in s.body and b"the parser turns tokens" in s.body for s in up.chats()), \
            "Claude Code did not send the file back as a tool result"
        ((info, _),) = [(i, e) for i, e in asking(wb, "Summarise notes.txt")][-1:]
        plan = wb.plans.get(settled(wb, info.id)[-1].plan_id)
        atom = next(i for i in plan.items if i.kind == "tool_atom" and i.id.endswith(":toolu_read_1"))
        wb.proxy.drop(info.id, atom.id)  # the user drops the file read before the next turn

        sent_before = len(up.chats())
        second = d.ask(proxy.url, "And what else?", resume=True)
        assert second.returncode == 0 and "Second answer." in second.stdout, shown(second, up.calls())
        (steered,) = [e for e in settled(wb, info.id) if e.steered]
        original, upstream = wb.proxy.bodies(steered.id)
        received = next(s for s in up.chats()[sent_before:] if s.body == upstream)
        assert json.loads(received.body) == _without_call(json.loads(original), "toolu_read_1")
        assert b"the parser turns tokens" in original and b"the parser turns tokens" not in received.body
        assert [c for c in steered.changes if "toolu_read_1" in c] and len(steered.changes) == 1, steered.changes
