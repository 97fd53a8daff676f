"""`ctxbench import`, `sessions` and `show` error paths through click's CliRunner, on a real database file."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.service.workbench import Workbench

ROWS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Use tabs, never spaces, in the Makefile."},
    {"role": "assistant", "content": "Will do."},
    {"role": "user", "content": "run the tests"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "pytest", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "t1", "content": "3 passed"},
    {"role": "assistant", "content": "All green."},
]


@pytest.fixture
def transcript(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def env(tmp_path, monkeypatch):
    # keep the user's real config and database out of the tests
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    monkeypatch.setenv("CTXBENCH_DB", str(tmp_path / "default.db"))
    return tmp_path


def _tables(db):
    with Workbench(db, Config()) as wb:
        return tuple(wb.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                     for t in ("sessions", "messages", "message_groups", "group_search"))


def test_import_prints_the_session_id_last(env, transcript):
    db = env / "x.db"
    result = CliRunner().invoke(main, ["import", str(transcript), "--db", str(db)])
    assert result.exit_code == 0, result.output
    session_id = result.output.strip().splitlines()[-1]
    assert session_id.startswith("s_")
    with Workbench(db, Config()) as wb:
        history = wb.messages.history(session_id)
    assert [m.content for m in history][:2] == ["Be brief.", "Use tabs, never spaces, in the Makefile."]
    assert len(history) == len(ROWS)


def test_import_uses_ctxbench_db_when_no_db_option(env, transcript):
    result = CliRunner().invoke(main, ["import", str(transcript)])
    assert result.exit_code == 0, result.output
    assert _tables(env / "default.db")[0] == 1


def test_malformed_import_exits_2_with_line_and_changes_nothing(env, transcript):
    db = env / "x.db"
    CliRunner().invoke(main, ["import", str(transcript), "--db", str(db)])
    before = _tables(db)
    bad = env / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[1]) + "\n" + json.dumps({"role": "narrator", "content": "x"}) + "\n")
    result = CliRunner().invoke(main, ["import", str(bad), "--db", str(db)])
    assert result.exit_code == 2
    assert "line 2: unknown role 'narrator'" in result.output
    assert _tables(db) == before


def test_import_rejects_unknown_formats_clearly(env, transcript):
    result = CliRunner().invoke(main, ["import", str(transcript), "--format", "msword", "--db", str(env / "x.db")])
    assert result.exit_code == 2
    assert "format 'msword' is not supported" in result.output and "openai" in result.output


def test_sessions_table_and_json(env, transcript):
    db = env / "x.db"
    runner = CliRunner()
    empty = runner.invoke(main, ["sessions", "--db", str(db)])
    assert empty.exit_code == 0 and "no sessions" in empty.output
    sid = runner.invoke(main, ["import", str(transcript), "--db", str(db), "--title", "tabs"]).output.split()[-1]
    table = runner.invoke(main, ["sessions", "--db", str(db)])
    assert table.exit_code == 0
    assert sid in table.output and "tabs" in table.output
    data = json.loads(runner.invoke(main, ["sessions", "--json", "--db", str(db)]).output)
    assert [(s["id"], s["title"], s["message_count"], s["group_count"]) for s in data] == [(sid, "tabs", 7, 3)]


def test_show_unknown_plan_exits_2(env):
    result = CliRunner().invoke(main, ["show", "p_doesnotexist", "--db", str(env / "x.db")])
    assert result.exit_code == 2
    assert "unknown plan 'p_doesnotexist'" in result.output


def test_plan_errors_are_one_line_exit_2(env, transcript):
    db = env / "x.db"
    runner = CliRunner()
    sid = runner.invoke(main, ["import", str(transcript), "--db", str(db)]).output.split()[-1]
    cases = [
        (["plan", "q", "--session", "s_missing", "--db", str(db)], "unknown session 's_missing'"),
        (["plan", "q", "--session", sid, "--mode", "turbo", "--db", str(db)], "unknown context mode 'turbo'"),
        (["plan", "q", "--session", sid, "--budget", "0", "--db", str(db)], "--budget must be a number of tokens from 1"),
        (["plan", "q", "--session", sid, "--transcript", str(transcript), "--db", str(db)], "not both"),
    ]
    for args, message in cases:
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output
        assert len(result.output.strip().splitlines()) == 1
