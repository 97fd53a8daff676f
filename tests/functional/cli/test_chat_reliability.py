"""Nothing lost, no traceback, for `ctxbench chat` against a real loopback endpoint:

- a slow endless stream ends at the total deadline, its text kept; ``max_tokens`` is sent (capped by what the
  context window leaves);
- SIGTERM stores the partial reply as Ctrl-C does;
- two `chat` processes on one session take turns (the second says it waits) instead of interleaving;
- a failed turn is not sent again as a second user turn in a row; the tool-round limit ends with a line.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.service.workbench import Workbench
from llm_server import LLMServer, Reply, error, text, tool_call

LONG = "".join(f"word{n} " for n in range(2000))


def _env(**extra):
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "CTXBENCH_CONFIG": os.devnull,
            "CTXBENCH_TEST_KEY": "k", **extra}


def _args(server, db, *more):
    return ["chat", *more, "--db", str(db), "--base-url", server.base_url, "--model", "m",
            "--api-key-env", "CTXBENCH_TEST_KEY"]


def _cli(server, db, *more, env=None):
    return CliRunner().invoke(main, _args(server, db, *more), env={"CTXBENCH_CONFIG": os.devnull,
                                                                   "CTXBENCH_TEST_KEY": "k", **(env or {})})


def _proc(server, db, *more):
    return subprocess.Popen([sys.executable, "-m", "ctxbench", *_args(server, db, *more)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())


def test_a_slow_endless_stream_ends_at_the_deadline_and_keeps_its_text(tmp_path):
    db = tmp_path / "ctx.db"
    # 2000 words in 5-character pieces, 20 ms apart: 40 s of reply; every read is quick, so --timeout never fires
    with LLMServer([Reply(content=LONG, chunk_chars=5, delay_s=0.02)]) as server:
        started = time.monotonic()
        result = _cli(server, db, "talk to me", "--deadline", "1.5", "--timeout", "30")
        elapsed = time.monotonic() - started
    assert result.exit_code == 1
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert "no complete reply within the deadline of 1.5s" in line and "the partial reply is stored" in line
    assert elapsed < 15
    with Workbench(db, Config()) as wb:
        (session,) = wb.sessions.list()
        reply = wb.messages.history(session.id)[-1]
    assert reply.role == "assistant" and reply.partial and LONG.startswith(reply.content) and len(reply.content) > 20
    assert result.stdout.startswith(reply.content)


def test_max_tokens_is_sent_and_capped_by_what_the_window_leaves(tmp_path):
    db = tmp_path / "ctx.db"
    with LLMServer([text("short"), text("again")]) as server:
        assert _cli(server, db, "hi", "--max-reply-tokens", "300").exit_code == 0
        assert _cli(server, db, "hi", "--context-limit", "4500").exit_code == 0
        first, second = server.payloads()
    assert first["max_tokens"] == 300
    assert 0 < second["max_tokens"] < 4096 and second["max_tokens"] == 4500 - _prompt_estimate(db, second)


def _prompt_estimate(db, payload) -> int:
    with Workbench(db, Config()) as wb:
        sessions = wb.sessions.list()
        plans = [p for s in sessions for p in wb.plans.list(s.id)]
        for summary in plans:
            plan = wb.plans.get(summary.plan_id)
            if plan.messages() == payload["messages"]:
                return plan.used_tokens
    raise AssertionError("no stored plan sent that payload")


def test_the_deadline_and_the_cap_have_config_keys_and_environment_variables(tmp_path):
    db = tmp_path / "ctx.db"
    config = tmp_path / "c.toml"
    config.write_text("[llm]\nmax_reply_tokens = 123\nreply_deadline_s = 0.5\n")
    with LLMServer([Reply(content=LONG, chunk_chars=5, delay_s=0.02)]) as server:
        result = _cli(server, db, "hi", "--config", str(config))
        env_result = _cli(server, db, "hi", env={"CTXBENCH_LLM_MAX_REPLY_TOKENS": "77", "CTXBENCH_LLM_DEADLINE": "0.4"})
        payloads = server.payloads()
    assert result.exit_code == 1 and "deadline of 0.5s" in result.stderr
    assert env_result.exit_code == 1 and "deadline of 0.4s" in env_result.stderr
    assert [p["max_tokens"] for p in payloads] == [123, 77]


def test_sigterm_stores_the_partial_reply_like_ctrl_c(tmp_path):
    db = tmp_path / "ctx.db"
    with LLMServer([Reply(content=LONG, chunk_chars=5, delay_s=0.02)]) as server:
        proc = _proc(server, db, "tell me everything")
        seen = ""
        deadline = time.monotonic() + 120
        while len(seen) < 30 and time.monotonic() < deadline:
            seen += proc.stdout.read(1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert "terminated; the partial reply is stored (session s_" in err
    with Workbench(db, Config()) as wb:
        (session,) = wb.sessions.list()
        history = wb.messages.history(session.id)
    assert [(m.role, m.partial) for m in history] == [("user", False), ("assistant", True)]
    assert history[-1].content.startswith(seen) and LONG.startswith(history[-1].content)


def test_two_chat_processes_on_one_session_take_turns(tmp_path):
    db = tmp_path / "ctx.db"
    with LLMServer([text("first answer"), text(LONG[:3000], chunk_chars=20, delay_s=0.05), text("third answer")]) \
            as server:
        assert _cli(server, db, "start").exit_code == 0
        with Workbench(db, Config()) as wb:
            (session,) = wb.sessions.list()
        slow = _proc(server, db, "second question", "--session", session.id)
        deadline = time.monotonic() + 120
        while len(server.received) < 2 and time.monotonic() < deadline:  # the slow turn is streaming
            time.sleep(0.02)
        fast = _proc(server, db, "third question", "--session", session.id)
        outs = [slow.communicate(timeout=120), fast.communicate(timeout=120)]
        payloads = server.payloads()
    assert slow.returncode == 0 and fast.returncode == 0, outs
    assert f"another turn of session {session.id} is running (process {slow.pid}); waiting" in outs[1][1]
    with Workbench(db, Config()) as wb:
        history = [(m.role, m.content) for m in wb.messages.history(session.id)]
    assert history == [("user", "start"), ("assistant", "first answer"), ("user", "second question"),
                       ("assistant", LONG[:3000]), ("user", "third question"), ("assistant", "third answer")]
    # the third turn was planned after the second finished: it saw the second's reply
    third = payloads[2]["messages"]
    assert [m["content"] for m in third if m["role"] == "assistant"][-1] == LONG[:3000]


def test_a_failed_turn_is_not_sent_as_a_second_user_turn_in_a_row(tmp_path):
    db = tmp_path / "ctx.db"
    config = tmp_path / "c.toml"
    config.write_text("[llm]\nmax_retries = 0\n")
    with LLMServer([text("hello back"), error(400, "bad"), text("fine")]) as server:
        assert _cli(server, db, "hello").exit_code == 0
        with Workbench(db, Config()) as wb:
            (session,) = wb.sessions.list()
        failed = _cli(server, db, "this one fails", "--session", session.id, "--config", str(config))
        assert failed.exit_code == 1
        assert "left out of later plans" in failed.stderr
        assert _cli(server, db, "try again", "--session", session.id).exit_code == 0
        last = server.payloads()[-1]["messages"]
    roles = [m["role"] for m in last if m["role"] != "system"]
    assert all(not (a == b == "user") for a, b in zip(roles, roles[1:])), roles
    assert "this one fails" not in json.dumps(last)
    with Workbench(db, Config()) as wb:  # kept in the store, flagged
        kept = [m for m in wb.messages.all(session.id) if m.content == "this one fails"]
        assert kept and kept[0].flags == ("unanswered",) and kept[0].status == "dropped"


def test_a_failed_first_turn_leaves_no_session_and_a_partial_one_keeps_it(tmp_path):
    db = tmp_path / "ctx.db"
    with LLMServer([error(400, "bad")]) as server:
        result = _cli(server, db, "hi")
    assert result.exit_code == 1 and "nothing was stored (the new session was removed)" in result.stderr
    with Workbench(db, Config()) as wb:
        assert wb.sessions.list() == []
    with LLMServer([Reply(content=LONG, chunk_chars=50, drop_after_chunks=3)]) as server:
        dropped = _cli(server, db, "hi", "--config", os.devnull)
    assert dropped.exit_code == 1 and "the partial reply is stored (session s_" in dropped.stderr
    with Workbench(db, Config()) as wb:
        (session,) = wb.sessions.list()
        assert wb.messages.history(session.id)[-1].partial


def test_the_tool_round_limit_ends_with_a_clear_line_not_an_empty_success(tmp_path):
    db = tmp_path / "ctx.db"
    config = tmp_path / "c.toml"
    config.write_text("[llm]\nmax_tool_rounds = 1\n")
    with LLMServer([tool_call("manage_scratchpad", {"action": "read"})]) as server:
        result = _cli(server, db, "loop", "--config", str(config))
    assert result.exit_code == 1
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert "after 1 tool rounds (llm.max_tool_rounds)" in line and "(session s_" in line


def test_cancel_while_waiting_for_the_session_stores_nothing(tmp_path):
    from ctxbench.llm.client import CancelToken
    from ctxbench.llm.offline import OfflineClient
    from ctxbench.llm.loop import TurnRunner
    from ctxbench.records import turns as ev

    with Workbench(tmp_path / "ctx.db", Config()) as wb:
        sid = wb.new_session("s")
        lock = wb.turn_lock(sid)
        assert lock.try_acquire()
        cancel = CancelToken()
        threading.Timer(0.3, cancel.cancel).start()
        try:
            events = list(TurnRunner(wb, OfflineClient(), Config()).run(sid, "hi", cancel=cancel))
        finally:
            lock.release()
        assert isinstance(events[0], ev.TurnWaiting) and events[0].holder == "this process"
        assert events[-1].status == "cancelled" and wb.messages.all(sid) == ()


def _wait_for(predicate, limit_s=120.0):
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def _read_at_least(proc, chars):
    """What the process printed once it printed ``chars`` characters (or ended)."""
    seen = ""
    while len(seen) < chars:
        piece = proc.stdout.read(1)
        if not piece:
            raise AssertionError(f"the process ended first: {seen!r} {proc.communicate(timeout=60)}")
        seen += piece
    return seen


def _no_two_user_turns_in_a_row(payload):
    roles = [m["role"] for m in payload["messages"] if m["role"] != "system"]
    return all(not (a == b == "user") for a, b in zip(roles, roles[1:])), roles


def test_a_chat_killed_mid_stream_keeps_the_text_saved_as_it_streamed(tmp_path):
    db = tmp_path / "ctx.db"
    config = tmp_path / "c.toml"
    config.write_text("[llm]\nstream_save_every_s = 0.1\nstream_save_every_chars = 50\n")
    with LLMServer([text("hello back"), Reply(content=LONG, chunk_chars=5, delay_s=0.02), text("fine")]) as server:
        assert _cli(server, db, "hello").exit_code == 0
        with Workbench(db, Config()) as wb:
            (session,) = wb.sessions.list()
        proc = _proc(server, db, "tell me everything", "--session", session.id, "--config", str(config))
        _read_at_least(proc, 400)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        with Workbench(db, Config()) as wb:  # the next process finds the chunks saved, marked partial
            saved = wb.messages.history(session.id)[-1]
        assert saved.role == "assistant" and saved.partial and len(saved.content) >= 300
        assert LONG.startswith(saved.content)
        after = _cli(server, db, "go on", "--session", session.id)
        payloads = server.payloads()
    assert after.exit_code == 0, after.output
    assert "ended with its process" in after.stderr and "its partial reply is kept" in after.stderr
    well_formed, roles = _no_two_user_turns_in_a_row(payloads[-1])
    assert well_formed, roles
    assert saved.content in [m["content"] for m in payloads[-1]["messages"] if m["role"] == "assistant"]


def test_a_chat_killed_before_any_reply_leaves_its_message_flagged_unanswered(tmp_path):
    db = tmp_path / "ctx.db"
    with LLMServer([text("hello back"), Reply(content="too late", chunk_chars=100, delay_s=60), text("fine")]) \
            as server:
        assert _cli(server, db, "hello").exit_code == 0
        with Workbench(db, Config()) as wb:
            (session,) = wb.sessions.list()
        proc = _proc(server, db, "this one dies", "--session", session.id)
        _wait_for(lambda: len(server.received) == 2 or proc.poll() is not None)  # asked, nothing streamed back yet
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        planned = CliRunner().invoke(main, ["plan", "what next", "--session", session.id, "--db", str(db),
                                            "--no-semantic"], env={"CTXBENCH_CONFIG": os.devnull})
        assert planned.exit_code == 0, planned.output
        assert "its message got no reply and is flagged unanswered" in planned.stderr
        after = _cli(server, db, "try again", "--session", session.id)
        last = server.payloads()[-1]
    assert after.exit_code == 0, after.output
    well_formed, roles = _no_two_user_turns_in_a_row(last)
    assert well_formed, roles
    assert "this one dies" not in json.dumps(last)
    with Workbench(db, Config()) as wb:
        (kept,) = [m for m in wb.messages.all(session.id) if m.content == "this one dies"]
    assert kept.flags == ("unanswered",) and kept.status == "dropped"


def test_sighup_stores_the_partial_reply(tmp_path):
    db = tmp_path / "ctx.db"
    with LLMServer([Reply(content=LONG, chunk_chars=5, delay_s=0.02)]) as server:
        proc = _proc(server, db, "tell me everything", "--config", os.devnull)
        seen = _read_at_least(proc, 30)
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, err
    assert "Traceback" not in err and "hung up (the terminal closed); the partial reply is stored" in err
    with Workbench(db, Config()) as wb:
        (session,) = wb.sessions.list()
        history = wb.messages.history(session.id)
    assert [(m.role, m.partial) for m in history] == [("user", False), ("assistant", True)]
    assert history[-1].content.startswith(seen) and LONG.startswith(history[-1].content)


def test_a_closed_port_says_connection_refused_with_its_url_not_the_deadline(tmp_path):
    import socket

    with socket.socket() as sock:  # a loopback port nothing listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    result = CliRunner().invoke(main, ["chat", "hello", "--db", str(tmp_path / "ctx.db"), "--base-url", url,
                                       "--model", "m", "--api-key-env", "CTXBENCH_TEST_KEY", "--deadline", "5"],
                                env={"CTXBENCH_CONFIG": os.devnull, "CTXBENCH_TEST_KEY": "k"})
    assert result.exit_code == 1, result.output
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert f"cannot reach {url}: connection refused" in line, line
    assert "no complete reply" not in line


def test_opening_a_session_whose_turn_ended_with_its_process_flags_the_message_and_says_so(tmp_path):
    from ctxbench.service.options import LaunchOptions
    from ctxbench.service.session import WorkbenchSession

    db = tmp_path / "ctx.db"
    with Workbench(db, Config()) as wb:
        sid = wb.new_session("s")
        wb.messages.append(sid, "user", "hello")
        wb.messages.append(sid, "assistant", "hi")
        wb.messages.append(sid, "user", "lost with its process")
        lock = wb.turn_lock(sid)
    lock.path.write_text("999999")  # what a turn killed mid-way leaves: the lock file still names its process
    session = WorkbenchSession(LaunchOptions(db_path=db, session_id=sid, index_repo=False, warm_embedder=False),
                               Config())
    try:
        snapshot = session.open()
    finally:
        session.close()
    assert "ended with its process (process 999999) mid-turn" in snapshot.notice
    assert "flagged unanswered" in snapshot.notice
    (lost,) = [m for m in snapshot.history if m.content == "lost with its process"]
    assert lost.flags == ("unanswered",) and lost.status == "dropped" and lost.group_id in snapshot.dropped
    again = WorkbenchSession(LaunchOptions(db_path=db, session_id=sid, index_repo=False, warm_embedder=False),
                             Config())
    try:
        assert again.open().notice == ""  # settled once: the lock was released
    finally:
        again.close()
