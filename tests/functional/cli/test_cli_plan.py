"""`ctxbench plan` and `ctxbench show` end to end: CliRunner and one real subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.service.workbench import Workbench

ROWS = [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "The release checklist is in docs/RELEASING.md; follow it exactly."},
        {"role": "assistant", "content": "Understood."}]
for i in range(25):
    ROWS += [
        {"role": "user", "content": f"Change {i}: rename variable v{i} in module m{i}."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "edit", "arguments": f'{{"file": "m{i}.py"}}'}}]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"edited m{i}.py\n" + "ok\n" * 30},
        {"role": "assistant", "content": f"Renamed v{i}."},
    ]

PLAN_KEYS = {"plan_id", "mode", "strategy", "budget", "used_tokens", "over_budget", "sections", "items"}
ITEM_KEYS = {"id", "kind", "section", "label", "tokens", "included", "reason", "score", "pin"}


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    monkeypatch.setenv("CTXBENCH_DB", str(tmp_path / "default.db"))
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return tmp_path, path


def test_plan_json_is_stored_and_show_messages_is_the_payload(env):
    tmp, transcript = env
    db = tmp / "x.db"
    runner = CliRunner()
    sid = runner.invoke(main, ["import", str(transcript), "--db", str(db)]).output.split()[-1]
    result = runner.invoke(main, ["plan", "How do I cut the release?", "--session", sid, "--budget", "900",
                                  "--strategy", "hybrid", "--json", "--db", str(db)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert PLAN_KEYS <= set(data)
    assert all(ITEM_KEYS <= set(item) for item in data["items"])
    assert (data["budget"], data["strategy"], data["mode"]) == (900, "hybrid", "light")
    assert data["over_budget"] or data["used_tokens"] <= 900

    with Workbench(db, Config()) as wb:
        plan = wb.plans.get(data["plan_id"])
    assert plan.to_json() == data
    shown = runner.invoke(main, ["show", data["plan_id"], "--messages", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output) == plan.messages()
    assert json.loads(runner.invoke(main, ["show", data["plan_id"], "--json", "--db", str(db)]).output) == data


@pytest.mark.slow
def test_plan_table_lists_included_then_excluded(env):
    tmp, transcript = env
    db = tmp / "x.db"
    runner = CliRunner()
    sid = runner.invoke(main, ["import", str(transcript), "--db", str(db)]).output.split()[-1]
    result = runner.invoke(main, ["plan", "rename more variables", "--session", sid, "--budget", "700",
                                  "--window", "3", "--db", str(db)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"mode light · strategy {Config().planner.default_strategy} · budget 700" in out
    rows = [r for r in (line.split() for line in out.splitlines()) if len(r) > 2 and r[0].isdigit()
            and r[1] in ("yes", "no")]
    flags = [r[1] for r in rows]
    assert "yes" in flags and "no" in flags
    assert flags == sorted(flags, key=lambda f: f != "yes")  # every included row before every excluded one
    plan_id = out.split()[1]
    shown = runner.invoke(main, ["show", plan_id, "--db", str(db)])
    assert shown.exit_code == 0 and plan_id in shown.output


def test_plan_defaults_to_the_latest_session(env):
    tmp, transcript = env
    runner = CliRunner()
    sid = runner.invoke(main, ["import", str(transcript)]).output.split()[-1]
    data = json.loads(runner.invoke(main, ["plan", "next change", "--json"]).output)
    assert data["session_id"] == sid


def test_plan_over_a_transcript_in_a_subprocess_is_stored_in_the_user_db(env):
    tmp, transcript = env
    environ = dict(os.environ, HF_HUB_OFFLINE="1", CTXBENCH_DB=str(tmp / "user.db"),
                   CTXBENCH_CONFIG=os.devnull)
    proc = subprocess.run(
        [sys.executable, "-m", "ctxbench", "plan", "How do I cut the release?", "--transcript", str(transcript),
         "--budget", "800", "--strategy", "hybrid", "--json"],
        capture_output=True, text=True, env=environ, cwd=Path(__file__).resolve().parents[3], timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert PLAN_KEYS <= set(data)
    assert data["budget"] == 800
    assert data["over_budget"] or data["used_tokens"] <= 800
    assert any(item["included"] for item in data["items"])
    with Workbench(tmp / "user.db", Config()) as wb:
        assert wb.plans.get(data["plan_id"]).to_json() == data
        assert wb.sessions.info(data["session_id"]).title == "transcript: chat.jsonl"


def test_plan_over_a_transcript_is_stored_and_shown_afterwards(env):
    tmp, transcript = env
    runner = CliRunner()
    db = tmp / "store.db"
    result = runner.invoke(main, ["plan", "How do I cut the release?", "--transcript", str(transcript),
                                  "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    shown = runner.invoke(main, ["show", data["plan_id"], "--messages", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    messages = json.loads(shown.stdout)
    with Workbench(db, Config()) as wb:
        assert messages == wb.plans.get(data["plan_id"]).messages()
        assert [s.id for s in wb.sessions.list()] == [data["session_id"]]
    assert messages[-1] == {"role": "user", "content": "How do I cut the release?"}
    # the same transcript again: the session it was imported as is reused, so the same plan comes back
    table = runner.invoke(main, ["plan", "How do I cut the release?", "--transcript", str(transcript),
                                 "--db", str(db)])
    assert table.exit_code == 0, table.output
    assert f"session {data['session_id']}" in table.stderr and data["plan_id"] in table.stdout
    assert f"ctxbench show {data['plan_id']}" in table.stdout
    with Workbench(db, Config()) as wb:
        assert len(wb.sessions.list()) == 1
