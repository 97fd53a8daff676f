"""The assistants people use, installed by `make clients` (tests/client_drivers.py), each driven through
``ctxbench proxy`` to a scripted upstream on loopback (tests/assistant_upstream.py): Claude Code (Anthropic
Messages), Codex CLI (the Responses API), aider (Chat Completions) and Gemini CLI (generateContent). A client
that is not installed skips, saying which."""
from __future__ import annotations

import copy
import json
import re
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from assistant_upstream import INPUT_TOKENS, AssistantUpstream, Turn
from client_drivers import CLIENT_TIMEOUT_S, Driver, shown

from ctxbench.config import Config
from ctxbench.proxy.server import ProxyServer, RunningProxy
from ctxbench.redaction.scanner import MASK
from ctxbench.service.proxy.service import ProxyService
from ctxbench.service.workbench import Workbench

pytestmark = pytest.mark.slow  # real clients: seconds each (-m 'not slow' leaves them out)
CLIENTS = ("claude", "codex", "aider", "gemini")
REPLY = "PONG from the scripted upstream"
QUESTION = "What does the parser module do?"
NOT_RECORDED_YET: dict[str, str] = {}


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


def as_stored(sent: bytes, stored: bytes) -> bool:
    """Whether ``sent`` is byte for byte the body the store holds, but where the store masked a secret-looking
    string (Claude Code's device id): the upstream gets it as the client sent it, the store never holds it."""
    pattern = b".+?".join(re.escape(piece) for piece in stored.split(MASK.encode()))
    return re.fullmatch(pattern, sent, re.DOTALL) is not None


def same_but_masked(sent, stored) -> bool:
    """``as_stored`` for parsed JSON: equal, where a stored string's masked parts stand for any text."""
    if isinstance(stored, str) and MASK in stored:
        pattern = ".+?".join(re.escape(piece) for piece in stored.split(MASK))
        return isinstance(sent, str) and re.fullmatch(pattern, sent, re.DOTALL) is not None
    if isinstance(stored, dict):
        return isinstance(sent, dict) and sent.keys() == stored.keys() and all(
            same_but_masked(sent[k], v) for k, v in stored.items())
    if isinstance(stored, list):
        return isinstance(sent, list) and len(sent) == len(stored) and all(map(same_but_masked, sent, stored))
    return sent == stored


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
@dataclass
class Asked:
    """One client asked QUESTION once through a recording proxy: what it printed, what the upstream received,
    and the store it left (the tests below share one run per client)."""

    result: subprocess.CompletedProcess[str]
    chats: list
    calls: list[str]
    db: Path


@pytest.fixture(scope="module")
def asked(tmp_path_factory):
    runs: dict[str, Asked] = {}

    def ask(client: str) -> Asked:
        if client not in runs:
            tmp = tmp_path_factory.mktemp(client)
            with proxied(tmp) as (up, wb, proxy):
                result = driver(client, tmp).ask(proxy.url, QUESTION)
                for info in wb.sessions.list():
                    settled(wb, info.id)  # every exchange written to its end before the store closes
                runs[client] = Asked(result, up.chats(), up.calls(), tmp / "ctx.db")
        return runs[client]

    return ask


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_prints_the_upstreams_reply_through_the_proxy(asked, client):
    run = asked(client)
    assert run.result.returncode == 0 and REPLY in run.result.stdout, shown(run.result, run.calls)
    assert run.chats and any(QUESTION.encode() in s.body for s in run.chats), shown(run.result, run.calls)
    # every model call went through the proxy with the client's own key passed on
    for seen in run.chats:
        assert any("dummy-client-key" in value for value in seen.headers.values()), seen.headers.keys()


@pytest.mark.parametrize("client", [recorded(c) for c in CLIENTS])
def test_each_clients_request_is_stored_as_a_plan_with_its_reply_and_usage(asked, client):
    run = asked(client)
    assert run.result.returncode == 0, shown(run.result, run.calls)
    with Workbench(run.db, Config()) as wb:
        found = asking(wb, QUESTION)
        assert found, f"no stored exchange carries the question; upstream calls: {run.calls}"
        _info, exchange = found[-1]
        assert exchange.outcome == "ok" and exchange.status == 200 and not exchange.steered
        original, upstream = wb.proxy.bodies(exchange.id)
        body = json.loads(original)
        # a streamed Chat Completions reply carries usage only when the client asks for it (aider does not)
        asked_usage = not (exchange.provider == "openai" and body.get("stream")
                           and not (body.get("stream_options") or {}).get("include_usage"))
        assert exchange.reply == REPLY and exchange.reported_prompt == (INPUT_TOKENS if asked_usage else None)
        assert upstream is None and any(as_stored(s.body, original) for s in run.chats)  # forwarded byte for byte
        plan = wb.plans.get(exchange.plan_id)
        assert plan.used_tokens == sum(i.tokens for i in plan.included) > 0
        assert all(i.tokens > 0 for i in plan.items if i.kind != "request_options")  # the envelope is not billed
        # the user's words are in exactly one item, and every tool the client offered is an item of its own
        holding = [i for i in plan.items if QUESTION in json.dumps(i.messages, ensure_ascii=False)]
        assert len(holding) == 1, [i.id for i in holding]
        offered = {t.get("name") or (t.get("function") or {}).get("name") for t in body.get("tools") or ()} - {None}
        assert offered <= {i.id.removeprefix("tool:") for i in plan.items if i.kind == "tool_definitions"}


@pytest.mark.parametrize("client", CLIENTS)
def test_each_clients_request_is_accounted_for_byte_for_byte_by_its_items(asked, client):
    run = asked(client)
    assert run.result.returncode == 0, shown(run.result, run.calls)
    with Workbench(run.db, Config()) as wb:
        found = asking(wb, QUESTION)
        assert found, f"no stored exchange carries the question; upstream calls: {run.calls}"
        _info, exchange = found[-1]
        original, _upstream = wb.proxy.bodies(exchange.id)
        (sent,) = [s.body for s in run.chats if as_stored(s.body, original)]  # the request as the client sent it
        items = wb.plans.get(exchange.plan_id).items
        assert sum(getattr(i, "bytes", 0) for i in items) == len(sent)


@pytest.mark.parametrize("client", CLIENTS)
def test_each_clients_session_is_titled_by_the_users_words(asked, client):
    run = asked(client)
    assert run.result.returncode == 0, shown(run.result, run.calls)
    with Workbench(run.db, Config()) as wb:
        found = asking(wb, QUESTION)
        assert found and all(info.title == f"proxy: {QUESTION}" for info, _ in found), \
            [info.title for info, _ in found]


# -- steering with the real clients -----------------------------------------------------------------------------
# each client reads notes.txt with its own file tool, then answers; the next turn continues the conversation
READS = {"claude": ("Read", lambda notes: {"file_path": str(notes)}),
         "codex": ("exec_command", lambda notes: {"cmd": "cat notes.txt"}),
         "gemini": ("read_file", lambda notes: {"file_path": str(notes)})}
NOTES = "the parser turns tokens into a tree\n" * 40
CALL_ID = "call_read_notes_1"


def _without_call(client: str, body: dict, tool: str) -> dict:
    """``body`` with the notes read (the tool call and its result) taken out and the entries it leaves empty
    gone: the request a drop of it should send, worked out here apart from the proxy's editing code."""
    out = copy.deepcopy(body)
    if client == "codex":  # Responses API: calls and their outputs are input items of their own
        out["input"] = [i for i in out["input"] if not (
            i.get("type") in ("function_call", "function_call_output") and i.get("call_id") == CALL_ID)]
        return out
    key, blocks = ("contents", "parts") if client == "gemini" else ("messages", "content")

    def read(block: dict) -> bool:
        if client == "gemini":
            return (block.get("functionCall") or block.get("functionResponse") or {}).get("name") == tool
        return (block.get("type") == "tool_use" and block.get("id") == CALL_ID) or (
            block.get("type") == "tool_result" and block.get("tool_use_id") == CALL_ID)

    kept = []
    for entry in out[key]:
        if isinstance(entry.get(blocks), list):
            entry[blocks] = [b for b in entry[blocks] if not read(b)]
            if not entry[blocks]:
                continue
        kept.append(entry)
    out[key] = kept
    return out


def _two_turns(tmp_path: Path, client: str, up: AssistantUpstream, wb: Workbench, proxy: RunningProxy,
               between=None):
    """Turn 1 reads notes.txt and answers; ``between(session)`` (the user's steer); turn 2 continues. The
    second turn's stored exchange and what the upstream received for it."""
    d = driver(client, tmp_path)
    d.cwd.mkdir(parents=True)
    (d.cwd / "notes.txt").write_text(NOTES)
    first = d.ask(proxy.url, "Summarise notes.txt")
    assert first.returncode == 0 and "It parses." in first.stdout, shown(first, up.calls())
    assert any(b"the parser turns tokens" in s.body for s in up.chats()), "the client sent no tool result"
    found = asking(wb, "Summarise notes.txt")
    assert found, f"no stored exchange carries the first question; upstream calls: {up.calls()}"
    info, _ = found[-1]
    if between is not None:
        between(info.id)
    sent_before = len(up.chats())
    second = d.ask(proxy.url, "And what else?", resume=True)
    assert second.returncode == 0 and "Second answer." in second.stdout, shown(second, up.calls())
    exchange = settled(wb, info.id)[-1]
    original, upstream = wb.proxy.bodies(exchange.id)
    assert b"And what else?" in original, "the second turn is not in the first turn's session"
    received = [s for s in up.chats()[sent_before:] if b"And what else?" in s.body]
    return exchange, original, upstream, received[-1]


def _script(client: str, tmp_path: Path) -> list[Turn]:
    tool, arguments = READS[client]
    notes = driver(client, tmp_path).cwd / "notes.txt"
    return [Turn(text="Reading it.", tool=tool, arguments=arguments(notes), call_id=CALL_ID),
            Turn(text="It parses."), Turn(text="Second answer.")]


@pytest.mark.parametrize("client", [recorded("claude"), recorded("codex"), recorded("gemini")])
def test_a_dropped_tool_result_leaves_exactly_that_out_upstream_and_the_client_completes(tmp_path, client):
    with proxied(tmp_path, _script(client, tmp_path), steer=True) as (up, wb, proxy):
        def drop_the_read(session: str) -> None:
            plan = wb.plans.get(settled(wb, session)[-1].plan_id)
            (atom,) = [i for i in plan.items if i.kind == "tool_atom"]
            wb.proxy.drop(session, atom.id)

        exchange, original, upstream, received = _two_turns(tmp_path, client, up, wb, proxy, drop_the_read)
        assert exchange.steered and as_stored(received.body, upstream)
        assert same_but_masked(json.loads(received.body), _without_call(client, json.loads(original), READS[client][0]))
        assert b"the parser turns tokens" in original and b"the parser turns tokens" not in received.body
        assert len(exchange.changes) == 1, exchange.changes


def test_a_steering_proxy_with_nothing_asked_forwards_claude_codes_requests_unchanged(tmp_path):
    with proxied(tmp_path, _script("claude", tmp_path), steer=True) as (up, wb, proxy):
        exchange, original, upstream, received = _two_turns(tmp_path, "claude", up, wb, proxy)
        assert upstream is None and as_stored(received.body, original) and not exchange.steered, exchange.changes


def test_the_turns_of_one_aider_run_share_a_session(tmp_path):
    d = driver("aider", tmp_path)
    with proxied(tmp_path, [Turn(text="First answer."), Turn(text="Second answer.")]) as (up, wb, proxy):
        d.prepare(proxy.url)
        argv = d.argv("unused", base_url=proxy.url)
        del argv[argv.index("--message"):argv.index("--message") + 2]  # questions typed on stdin instead
        result = subprocess.run(argv, input="Summarise notes.txt\nAnd what else?\n", env=d.environment(proxy.url),
                                cwd=d.cwd, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
        assert result.returncode == 0 and "Second answer." in result.stdout, shown(result, up.calls())
        assert len(up.chats()) == 2
        sessions = {info.id for info, _ in asking(wb, "Summarise notes.txt")}
        assert len(sessions) == 1 and len(settled(wb, sessions.pop())) == 2
