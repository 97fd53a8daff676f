"""How a proxied exchange ends when the proxy or the upstream stops mid-reply: ``ctxbench proxy`` as a real
subprocess (SIGTERM, SIGKILL, restart), a slow scripted upstream on loopback, and what its log says."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from upstream_server import Answer, Upstream

from ctxbench.config import Config
from ctxbench.service.workbench import Workbench
from test_proxy import proxied, settled

SLOW = Answer(text="The first words arrive. ", events=2000, filler="more words, ", delay_s=0.01)  # ~20 s
CHAT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "tell me a long story"}]}


class ProxyProcess:
    """``ctxbench proxy`` in a subprocess; its log lines read in the background."""

    def __init__(self, upstream: str, db: Path, config: Path) -> None:
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "proxy", "--upstream", upstream, "--port", "0",
                                      "--db", str(db), "--config", str(config)], stderr=subprocess.PIPE, text=True,
                                     env=env)
        self.lines: list[str] = []
        self.url = ""
        while not self.url:
            line = self.proc.stderr.readline()
            assert line, f"the proxy did not start: {self.lines}"
            self.lines.append(line)
            if line.startswith("ctxbench proxy on "):
                self.url = line.split()[3]
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def wait(self) -> int:
        code = self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
        return code

    def __enter__(self) -> "ProxyProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:  # a failed test leaves no proxy behind
            self.proc.kill()
            self.proc.wait(timeout=30)

    def log(self) -> str:
        return "".join(self.lines)


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("[proxy]\nreply_save_s = 0.1\nstop_grace_s = 0.2\n", encoding="utf-8")
    return path


def _stream_in_background(url: str, got: list[bytes]) -> threading.Thread:
    def run() -> None:
        try:
            with httpx.Client(timeout=60) as raw, raw.stream("POST", url + "/v1/chat/completions", json=CHAT) as r:
                for chunk in r.iter_raw():
                    got.append(chunk)
        except httpx.HTTPError:
            pass  # the proxy went away mid-reply: the cut is what is tested

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _exchanges(db: Path):
    with Workbench(db, Config()) as wb:
        return [e for s in wb.sessions.list() for e in wb.proxy.exchanges(s.id)]


def _wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl+C"])
def test_sigterm_mid_stream_records_the_exchange_cut_with_what_arrived(tmp_path, sig):
    db = tmp_path / "ctx.db"
    with Upstream([SLOW]) as up:
        with ProxyProcess(up.url, db, _config(tmp_path)) as proxy:
            got: list[bytes] = []
            client = _stream_in_background(proxy.url, got)
            _wait_for(lambda: sum(map(len, got)) > 2000)
            proxy.proc.send_signal(sig)
            assert proxy.wait() == 0
            client.join(timeout=30)
    (exchange,) = _exchanges(db)
    assert exchange.outcome == "cut" and "stopped" in exchange.error
    assert exchange.reply.startswith("The first words arrive. more words, ")
    assert len(exchange.reply) < len(SLOW.text) + SLOW.events * len(SLOW.filler)
    assert "Traceback" not in proxy.log()


def test_sigkill_mid_stream_then_restart_closes_the_pending_exchange_as_cut(tmp_path):
    db = tmp_path / "ctx.db"
    with Upstream([SLOW]) as up:
        with ProxyProcess(up.url, db, _config(tmp_path)) as proxy:
            got: list[bytes] = []
            client = _stream_in_background(proxy.url, got)
            _wait_for(lambda: any(e.reply for e in _exchanges(db)))  # the reply so far is saved as it streams
            proxy.proc.send_signal(signal.SIGKILL)
            proxy.wait()
            client.join(timeout=30)
        (left,) = _exchanges(db)
        assert left.outcome == "pending"
        with ProxyProcess(up.url, db, _config(tmp_path)) as again:
            assert any(line.startswith("closed 1 exchange(s)") for line in again.lines)
            again.proc.send_signal(signal.SIGTERM)
            again.wait()
    (exchange,) = _exchanges(db)
    assert exchange.outcome == "cut" and "stopped" in exchange.error and exchange.finished_at
    assert exchange.reply.startswith("The first words arrive.") and exchange.reply == left.reply


def test_a_cut_upstream_stream_is_one_line_in_the_log_and_unrecorded_requests_say_why(tmp_path):
    db = tmp_path / "ctx.db"
    with Upstream([Answer(text="a" * 200, cut_after_events=6), Answer()]) as up:
        with ProxyProcess(up.url, db, _config(tmp_path)) as proxy:
            got: list[bytes] = []
            _stream_in_background(proxy.url, got).join(timeout=30)
            with httpx.Client() as raw:
                assert raw.get(proxy.url + "/v1/models").status_code == 200
                raw.post(proxy.url + "/v1/chat/completions", content=json.dumps(CHAT),
                         headers={"Content-Type": "text/plain"})
            _wait_for(lambda: proxy.log().count("\n") >= 7)
            proxy.proc.send_signal(signal.SIGTERM)
            proxy.wait()
    log = proxy.log()
    assert "Traceback" not in log and "Error handling request" not in log
    (cut,) = [line for line in log.splitlines() if " cut · " in line]
    assert cut.startswith("POST /v1/chat/completions → 200 cut · #1") and "the upstream stream was cut" in cut
    assert "GET /v1/models → 200 ok · (not recorded: not a chat request)" in log
    assert "(not recorded: the body is text/plain, not application/json)" in log


def test_a_stream_that_ends_without_its_finish_event_is_recorded_cut(tmp_path):
    head = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    events = b"".join(
        b"data: " + json.dumps(head | {"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
                               ).encode() + b"\n\n" for word in ("half ", "a ", "reply"))
    with proxied(tmp_path, [Answer(raw_stream=events)]) as (up, wb, proxy):
        with httpx.Client() as raw, raw.stream("POST", proxy.url + "/v1/chat/completions", json=CHAT) as r:
            body = b"".join(r.iter_raw())
        assert body == events  # the client gets what the upstream sent, as it sent it
        (exchange,) = settled(wb)
        assert exchange.outcome == "cut" and "before its end" in exchange.error and exchange.reply == "half a reply"


def test_a_close_delimited_stream_with_its_end_is_ok(tmp_path):
    head = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    events = (b"data: " + json.dumps(head | {"choices": [{"index": 0, "delta": {"content": "whole"},
                                                          "finish_reason": None}]}).encode() + b"\n\n"
              + b"data: " + json.dumps(head | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                                       ).encode() + b"\n\ndata: [DONE]\n\n")
    with proxied(tmp_path, [Answer(raw_stream=events)]) as (up, wb, proxy):
        with httpx.Client() as raw, raw.stream("POST", proxy.url + "/v1/chat/completions", json=CHAT) as r:
            assert b"".join(r.iter_raw()) == events
        (exchange,) = settled(wb)
        assert exchange.outcome == "ok" and exchange.reply == "whole"


def test_the_log_says_no_session_was_kept_for_a_conversations_first_request_no_model_answered(tmp_path):
    db = tmp_path / "ctx.db"
    error = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).encode()
    with Upstream([Answer(status=529, error_body=error), Answer()]) as up:
        with ProxyProcess(up.url, db, _config(tmp_path)) as proxy:
            with httpx.Client(timeout=30) as raw:
                assert raw.post(proxy.url + "/v1/chat/completions", json=dict(CHAT, stream=False)).status_code == 529
                assert raw.post(proxy.url + "/v1/chat/completions", json=dict(CHAT, stream=False)).status_code == 200
            _wait_for(lambda: proxy.log().count("POST /v1/chat/completions → ") >= 2)
            proxy.proc.send_signal(signal.SIGTERM)
            proxy.wait()
        with Workbench(db, Config()) as wb:
            (kept,) = [s.id for s in wb.sessions.list()]
    failed, answered = [line for line in proxy.log().splitlines() if line.startswith("POST ")]
    assert failed.startswith("POST /v1/chat/completions → 529 upstream_error · (no session kept: ")
    assert "#1" not in failed and "Overloaded" in failed
    assert answered.startswith(f"POST /v1/chat/completions → 200 ok · #2 {kept} · ")


def test_a_stop_while_the_recording_is_still_being_written_records_the_exchange_cut(tmp_path, monkeypatch):
    """On a busy machine the reply may start streaming before the request's recording is stored (it waits only
    ``record_wait_s``); a stop then must wait for that recording and close it as cut, not leave it pending."""
    from ctxbench.config import load_config
    from ctxbench.proxy.server import ProxyServer, RunningProxy
    from ctxbench.service.proxy.service import ProxyService

    slow_begin = ProxyService.begin

    def begin_on_a_busy_machine(self, *args, **kwargs):
        time.sleep(3.0)
        return slow_begin(self, *args, **kwargs)

    monkeypatch.setattr(ProxyService, "begin", begin_on_a_busy_machine)
    db = tmp_path / "ctx.db"
    config = load_config(_config(tmp_path))
    with Upstream([SLOW]) as up, Workbench(db, config) as wb:
        proxy = RunningProxy(ProxyServer(ProxyService(wb), up.url, config.proxy), "127.0.0.1", 0).start()
        try:
            got: list[bytes] = []
            client = _stream_in_background(proxy.url, got)
            _wait_for(lambda: sum(map(len, got)) > 2000)
            assert wb.sessions.list() == []  # the reply streams while the recording is still being written
        finally:
            proxy.stop()
        client.join(timeout=30)
    (exchange,) = _exchanges(db)
    assert exchange.outcome == "cut" and "stopped" in exchange.error
