"""``ctxbench wrap``: a proxy started for one command, the command pointed at it, run, and the proxy gone when
it exits. Driven as a user would: the ``ctxbench`` command in a subprocess, a plain Python command and the real
assistants (tests/client_drivers.py), a scripted upstream on loopback."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from assistant_upstream import AssistantUpstream, Turn
from client_drivers import CLIENT_TIMEOUT_S, Driver, shown

from ctxbench.service.workbench import Workbench
from ctxbench.config import Config

REPLY = "PONG from the scripted upstream"
SHOW_ENV = textwrap.dedent("""
    import json, os, sys, urllib.request
    names = ["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE", "GOOGLE_GEMINI_BASE_URL", "CTXBENCH_PROXY_URL"]
    print(json.dumps({n: os.environ.get(n) for n in names} | {"argv": sys.argv[1:]}))
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello through wrap"}]}).encode()
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer sk-x"})
    with urllib.request.urlopen(request, timeout=30) as response:
        print(json.loads(response.read())["choices"][0]["message"]["content"])
    sys.exit(3)
""")


def ctxbench(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``ctxbench ARGS`` in a subprocess, in this environment or only in ``env`` (with this checkout's code)."""
    base = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "ctxbench", *args], env={**(os.environ if env is None else env), **base},
                          cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CLIENT_TIMEOUT_S)


def closed(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as sock:
        return sock.connect_ex((parts.hostname, parts.port)) != 0


def test_wrap_runs_any_command_pointed_at_its_proxy_and_exits_with_its_code(tmp_path):
    script = tmp_path / "show_env.py"
    script.write_text(SHOW_ENV)
    db = tmp_path / "ctx.db"
    with AssistantUpstream([Turn(text=REPLY)]) as up:
        result = ctxbench("wrap", "--upstream", f"{up.url}/v1", "--db", str(db), "--", sys.executable, str(script),
                          "--flag", "value")
        assert result.returncode == 3, result.stderr
        lines = result.stdout.splitlines()
        got = json.loads(lines[0])
        proxy = got["CTXBENCH_PROXY_URL"]
        assert urlsplit(proxy).hostname == "127.0.0.1" and urlsplit(proxy).port not in (None, 8788)
        assert got["ANTHROPIC_BASE_URL"] == got["GOOGLE_GEMINI_BASE_URL"] == proxy
        assert got["OPENAI_BASE_URL"] == got["OPENAI_API_BASE"] == f"{proxy}/v1"
        assert got["argv"] == ["--flag", "value"]  # the command's own arguments, untouched
        assert lines[1] == REPLY
        assert [s.path for s in up.chats()] == ["/v1/chat/completions"]
        assert "ctxbench open --watch" in result.stderr and "1 request(s) recorded" in result.stderr
        assert closed(proxy)  # the proxy stopped with the command
    with Workbench(db, Config()) as wb:
        (exchange,) = wb.proxy.exchanges(wb.proxy.latest_session())
        assert exchange.reply == REPLY and exchange.outcome == "ok"


def test_wrap_of_an_unknown_command_without_an_upstream_is_a_one_line_error(tmp_path):
    result = ctxbench("wrap", "--db", str(tmp_path / "ctx.db"), "--", sys.executable, "-c", "print('ran')")
    assert result.returncode == 2 and "ran" not in result.stdout
    assert result.stderr.startswith("error: --upstream URL is needed") and len(result.stderr.splitlines()) == 1


def test_wrap_of_a_client_that_is_not_installed_says_so(tmp_path):
    result = ctxbench("wrap", "--db", str(tmp_path / "ctx.db"), "claude", "-p", "hi",
                      env={"PATH": str(tmp_path), "HOME": str(tmp_path)})
    assert result.returncode == 127
    assert result.stderr.strip() == "error: claude: command not found (is it installed and on PATH?)"


def test_wrap_help_names_each_client_and_how_to_watch():
    result = ctxbench("wrap", "--help")
    assert result.returncode == 0
    for words in ("claude", "codex", "aider", "gemini", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL",
                  "ctxbench open --watch", "--upstream"):
        assert words in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("client", ["claude", "codex", "aider", "gemini"])
def test_wrap_points_each_real_client_at_its_proxy(tmp_path, client):
    d = Driver(client, tmp_path / "home", tmp_path / "work")
    d.prepare("")  # the client's config as a user has it: no base URL of ours anywhere
    question = "Which files define the parser?"
    with AssistantUpstream() as up:
        upstream = f"{up.url}/v1" if client in ("codex", "aider") else up.url
        env = d.environment("")
        result = ctxbench("wrap", "--upstream", upstream, "--db", str(tmp_path / "ctx.db"),
                          *d.argv(question, base_url=""), env=env, cwd=d.cwd)
        assert result.returncode == 0 and REPLY in result.stdout, shown(result, up.calls())
        assert any(question.encode() in s.body for s in up.chats()), shown(result, up.calls())
        assert "ctxbench open --watch" in result.stderr


def test_wrap_of_a_command_that_cannot_be_run_is_a_one_line_error(tmp_path):
    program = tmp_path / "not_a_program"
    program.write_bytes(b"\x7fELF\x00garbage")  # executable, but no format the system can run
    program.chmod(0o755)
    result = ctxbench("wrap", "--upstream", "http://127.0.0.1:9", "--db", str(tmp_path / "ctx.db"), "--", str(program))
    assert result.returncode == 126
    assert f"error: cannot run {program}: Exec format error" in result.stderr
    assert "Traceback" not in result.stderr


CHILD_AT_A_TERMINAL = textwrap.dedent("""
    import sys, time
    try:
        print("tty", sys.stdin.isatty(), sys.stdout.isatty(), flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        print("the child got ctrl+c", flush=True)
        sys.exit(130)
""")


def test_wrap_runs_the_command_at_the_terminal_and_leaves_ctrl_c_to_it(tmp_path):
    import pty
    import time

    script = tmp_path / "at_terminal.py"
    script.write_text(CHILD_AT_A_TERMINAL)
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "wrap", "--upstream", "http://127.0.0.1:9", "--db",
                             str(tmp_path / "ctx.db"), "--", sys.executable, str(script)],
                            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    seen = b""

    def read_until(marker: bytes, timeout: float = CLIENT_TIMEOUT_S) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while marker not in seen and time.monotonic() < deadline:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
        assert marker in seen, seen.decode(errors="replace")

    try:
        read_until(b"tty True True")  # the command has the terminal itself
        os.killpg(proc.pid, signal.SIGINT)  # ctrl+c: a terminal signals its whole foreground group (wrap and the command)
        read_until(b"the child got ctrl+c")
        assert proc.wait(timeout=30) == 130  # wrap waited for the command and exits with its code
        read_until(b"exited with 130")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
