"""Hostile transcripts: a lone surrogate escape and 100,000-deep nesting exit 2 with the line (no traceback);
a Claude Code tool_result that answers no call is refused like the OpenAI importer refuses one."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ctxbench.config import Config
from ctxbench.records.transcripts import TranscriptError
from ctxbench.service.workbench import Workbench
from ctxbench.transcripts import claude_code


def _import(path, db, fmt="openai"):
    return subprocess.run([sys.executable, "-m", "ctxbench", "import", str(path), "--format", fmt, "--db", str(db)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def _sessions(db):
    if not db.exists():
        return []
    with Workbench(db, Config()) as wb:
        return wb.sessions.list()


GOOD = json.dumps({"role": "user", "content": "hello"})


@pytest.mark.parametrize("bad, reason", [
    ('{"role": "user", "content": "cut emoji \\ud800 here"}', "lone surrogate escape (\\ud800)"),
    ('{"role": "user", "content": "low half \\udc00"}', "lone surrogate escape (\\udc00)"),
    ('{"role": "user", "content": "ok", "flags": ["\\udfff"]}', "lone surrogate escape (\\udfff)"),
    ('{"role": "user", "content": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
], ids=["high-half", "low-half", "in-flags", "deep-content", "deep-line"])
def test_hostile_json_is_exit_2_with_the_line(tmp_path, bad, reason):
    path = tmp_path / "t.jsonl"
    path.write_text(GOOD + "\n" + bad + "\n", encoding="utf-8")
    db = tmp_path / "ctx.db"
    out = _import(path, db)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "line 2" in line and reason in line
    assert _sessions(db) == []


def test_a_real_surrogate_pair_is_fine(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(GOOD + "\n" + json.dumps({"role": "assistant", "content": "smile \U0001f600"}) + "\n")
    db = tmp_path / "ctx.db"
    out = _import(path, db)
    assert out.returncode == 0, out.stderr
    (session,) = _sessions(db)
    with Workbench(db, Config()) as wb:
        assert wb.messages.history(session.id)[-1].content == "smile \U0001f600"


def _claude(records):
    return [json.dumps(r) for r in records]


def _user(content, uuid="u"):
    return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": content}}


def _assistant(blocks, mid="m1"):
    return {"type": "assistant", "message": {"id": mid, "role": "assistant", "content": blocks}}


def test_claude_code_orphan_tool_result_is_refused_with_its_line(tmp_path):
    lines = _claude([
        _user("list files"),
        _assistant([{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]),
        _user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]),
        _user([{"type": "tool_result", "tool_use_id": "toolu_404", "content": "from nowhere"}]),
    ])
    with pytest.raises(TranscriptError) as caught:
        claude_code.parse_lines(lines)
    assert caught.value.line == 4 and "toolu_404" in str(caught.value) and "no earlier assistant message called" \
        in str(caught.value)
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    db = tmp_path / "ctx.db"
    out = _import(path, db, "claude-code")
    assert out.returncode == 2 and "line 4" in out.stderr and "Traceback" not in out.stderr
    assert _sessions(db) == []


def test_claude_code_result_answered_twice_is_refused(tmp_path):
    lines = _claude([
        _user("list files"),
        _assistant([{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]),
        _user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]),
        _user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "again"}]),
    ])
    with pytest.raises(TranscriptError) as caught:
        claude_code.parse_lines(lines)
    assert caught.value.line == 4 and "already answered on line 3" in str(caught.value)


def test_claude_code_answered_calls_still_import(tmp_path):
    lines = _claude([
        _user("list files"),
        _assistant([{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]),
        _user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]),
        _assistant([{"type": "text", "text": "one file"}], mid="m2"),
    ])
    transcript = claude_code.parse_lines(lines)
    assert [m.role for m in transcript.messages] == ["user", "assistant", "tool", "assistant"]
