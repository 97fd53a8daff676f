"""Issue 12, tried as a new user would, on the command line: each case fails before its fix.

A fresh database, read-only commands that must not create one, budgets the mandatory items do not fit,
``chat --mode`` kept for the session, ``retrieve`` on a folder that is not a repository, ``--no-semantic``
named as such, and progress counters only on a terminal.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.service.workbench import Workbench

DEMO_REPO = Path(__file__).resolve().parent.parent / "fixtures" / "demo_repo"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    monkeypatch.setenv("CTXBENCH_DB", str(tmp_path / "default.db"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def small_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(DEMO_REPO / "ledgerlite", repo / "ledgerlite")
    (repo / "pyproject.toml").write_text("[project]\nname = 'ledgerlite'\n")
    return repo


# -- plan on a fresh database -------------------------------------------------------------------------

def test_plan_with_a_repo_on_a_fresh_database_plans_an_empty_history(env):
    db = env / "fresh.db"
    repo = small_repo(env)
    result = CliRunner().invoke(main, ["plan", "where is a ledger balanced", "--repo", str(repo), "--db", str(db),
                                       "--no-semantic", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    kinds = [i["kind"] for i in plan["items"] if i["included"]]
    assert "history_atom" not in kinds and "current_turn" in kinds
    assert "symbol_card" in kinds and "scaffold" in kinds  # the repository was used
    with Workbench(db, Config()) as wb:
        (info,) = wb.sessions.list()
        assert info.id == plan["session_id"] and info.message_count == 0
        assert info.repo == str(repo.resolve())
        assert wb.plans.get(plan["plan_id"]).plan_id == plan["plan_id"]  # stored: show works


def test_plan_on_a_fresh_database_says_it_made_a_session(env):
    db = env / "fresh.db"
    result = CliRunner().invoke(main, ["plan", "what next", "--db", str(db), "--no-semantic"])
    assert result.exit_code == 0, result.output
    assert "no sessions yet: planning with an empty history in a new session s_" in result.stderr
    assert "stored; show it again with: ctxbench show plan_" in result.stdout


def test_a_refused_plan_on_a_fresh_database_leaves_no_session(env):
    db = env / "fresh.db"
    result = CliRunner().invoke(main, ["plan", "what next", "--db", str(db), "--no-semantic", "--pin", "group:7"])
    assert result.exit_code == 2
    assert "group:7" in result.stderr
    with Workbench(db, Config()) as wb:
        assert list(wb.sessions.list()) == []


# -- replay: the tool definitions and the turn numbers ------------------------------------------------

def _session(db: Path, tmp: Path, turns: int = 4) -> str:
    rows = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        rows += [{"role": "user", "content": f"Question {i} about module m{i}?"},
                 {"role": "assistant", "content": f"Answer {i}."}]
    path = tmp / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(main, ["import", str(path), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return result.stdout.split()[-1]


def test_replay_counts_a_dropped_turn_and_can_budget_the_tool_definitions(env):
    db = env / "r.db"
    sid = _session(db, env)
    with Workbench(db, Config()) as wb:
        second = [m for m in wb.messages.all(sid) if m.role == "user"][1]
        wb.messages.drop(sid, second.group_id)
    runner = CliRunner()
    plain = json.loads(runner.invoke(main, ["replay", sid, "--db", str(db), "--json"]).stdout)
    assert [r["turn"] for r in plain] == [1, 2, 3, 4]
    assert [r["dropped"] for r in plain] == [False, True, False, False]
    assert plain[1]["query"] == second.content
    tools = json.loads(runner.invoke(main, ["replay", sid, "--db", str(db), "--json", "--tools"]).stdout)
    with Workbench(db, Config()) as wb:
        from ctxbench.service.model import offered_tools_tokens

        offered = offered_tools_tokens(Config(), wb.tokenizer)
    assert offered > 0
    assert all(t["sections"]["system"] == p["sections"]["system"] + offered for t, p in zip(tools, plain))
    table = runner.invoke(main, ["replay", sid, "--db", str(db)])
    assert table.exit_code == 0 and "(dropped since)" in table.stdout.splitlines()[2]


# -- a budget the mandatory items do not fit -----------------------------------------------------------

def test_chat_with_a_budget_below_the_mandatory_items_is_refused_and_nothing_is_sent(env):
    db = env / "c.db"
    runner = CliRunner()
    result = runner.invoke(main, ["chat", "hello there", "--budget", "1", "--db", str(db)])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: not sent: mandatory items need ") and "but the budget is 1" in line
    assert "tool definitions" in line and "system prompt" in line and "raise the budget" in line
    assert result.stdout == ""  # no reply: the offline model was never called
    with Workbench(db, Config()) as wb:
        assert list(wb.sessions.list()) == []  # a new session with nothing in it is not kept

    first = runner.invoke(main, ["chat", "hello there", "--db", str(db), "--json"])
    sid = json.loads(first.stdout)["session_id"]
    again = runner.invoke(main, ["chat", "and again", "--session", sid, "--budget", "100", "--db", str(db)])
    assert again.exit_code == 2 and "not sent:" in again.stderr
    with Workbench(db, Config()) as wb:
        calls = wb.traces.calls(session_id=sid)
        assert [c.status for c in calls] == ["ok", "failed"]  # the refused turn reached no model
        assert "not sent:" in calls[-1].error
