"""``ctxbench chat`` with the default offline model, and ``ctxbench replay``."""
from __future__ import annotations

import json
import os

from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.records.state import extract_state
from ctxbench.service.workbench import Workbench


def _chat(db, *args):
    return CliRunner().invoke(main, ["chat", *args, "--db", str(db)], env={"CTXBENCH_CONFIG": os.devnull})


def test_offline_chat_json_describes_the_plan_and_stores_the_turn(tmp_path):
    db = tmp_path / "ctx.db"
    result = _chat(db, "what will you see?", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out) >= {"session_id", "plan_id", "reply", "usage"}
    assert out["reply"].startswith("Offline model (no network)")
    assert f"Plan {out['plan_id']}" in out["reply"]
    assert out["usage"]["estimated_prompt_tokens"] == out["usage"]["reported_prompt_tokens"] > 0
    with Workbench(db, Config()) as wb:
        assert [m.role for m in wb.messages.history(out["session_id"])] == ["user", "assistant"]
        assert wb.memory.state(out["session_id"]) == extract_state(out["reply"])
    shown = CliRunner().invoke(main, ["show", out["plan_id"], "--messages", "--db", str(db)])
    assert json.loads(shown.stdout)[-1] == {"role": "user", "content": "what will you see?"}


def test_offline_chat_streams_the_reply_and_continues_a_session(tmp_path):
    db = tmp_path / "ctx.db"
    first = json.loads(_chat(db, "first question", "--json").stdout)
    second = _chat(db, "second question", "--session", first["session_id"])
    assert second.exit_code == 0, second.output
    assert second.stdout.startswith("Offline model (no network)")
    assert "You asked: second question" in second.stdout
    with Workbench(db, Config()) as wb:
        assert [m.content for m in wb.messages.history(first["session_id"]) if m.role == "user"] == [
            "first question", "second question"]


def test_offline_chat_runs_tools_and_reports_them_on_stderr(tmp_path):
    db = tmp_path / "ctx.db"
    result = _chat(db, 'plan it\n!tool manage_scratchpad {"action": "update", "content": "1. do it"}')
    assert result.exit_code == 0, result.output
    assert "· manage_scratchpad" in result.stderr
    assert "- manage_scratchpad: scratchpad replaced" in result.stdout


def test_chat_rejects_an_unknown_session_and_a_model_less_endpoint(tmp_path):
    db = tmp_path / "ctx.db"
    unknown = _chat(db, "hi", "--session", "s_nope")
    assert unknown.exit_code == 2 and "s_nope" in unknown.stderr
    no_model = _chat(db, "hi", "--base-url", "http://127.0.0.1:9/v1")
    assert no_model.exit_code == 2 and "model name" in no_model.stderr


def _imported(tmp_path, lines):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in lines) + "\n")
    db = tmp_path / "ctx.db"
    result = CliRunner().invoke(main, ["import", str(path), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db, result.stdout.strip().splitlines()[-1]


TRANSCRIPT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "q1 about ledgers"},
    {"role": "assistant", "content": "a1 " + "word " * 200},
    {"role": "user", "content": "q2 about importers"},
    {"role": "assistant", "content": "a2 " + "word " * 200},
    {"role": "user", "content": "q3 about ledgers again"},
    {"role": "assistant", "content": "a3"},
]


def test_replay_shows_each_turn_with_only_earlier_history(tmp_path):
    db, sid = _imported(tmp_path, TRANSCRIPT)
    result = CliRunner().invoke(main, ["replay", sid, "--json", "--db", str(db)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["query"] for r in rows] == ["q1 about ledgers", "q2 about importers", "q3 about ledgers again"]
    assert [r["turn"] for r in rows] == [1, 2, 3]
    with Workbench(db, Config()) as wb:
        history = wb.messages.history(sid)
        for row in rows:
            user = next(m for m in history if m.role == "user" and m.group_id == row["group_id"])
            later_groups = {m.group_id for m in history if m.id > user.id and m.group_id != row["group_id"]}
            assert not any(i == f"group:{g}" or i.startswith(f"atom:{g}:") for g in later_groups for i in row["included"])
    # the third turn has the most history to choose from, and a small budget leaves some out
    small = json.loads(CliRunner().invoke(main, ["replay", sid, "--json", "--budget", "400", "--db", str(db)]).stdout)
    assert small[2]["history_excluded"] > 0 and all(r["used_tokens"] <= 400 or r["over_budget"] for r in small)
    assert small[2]["budget"] == 400


def test_replay_says_how_much_of_each_plan_the_previous_turns_plan_opened_with(tmp_path):
    from ctxbench.planner.cache import payload_units, shared_prefix_tokens
    from ctxbench.llm.replay import replay

    db, sid = _imported(tmp_path, TRANSCRIPT)
    rows = json.loads(CliRunner().invoke(main, ["replay", sid, "--json", "--db", str(db), "--strategy", "window"]).stdout)
    assert rows[0]["prefix_tokens"] == 0  # nothing before the first turn
    with Workbench(db, Config()) as wb:
        steps = list(replay(wb, sid, strategy="window"))
    for before, step, row in zip(steps, steps[1:], rows[1:]):
        expected = shared_prefix_tokens(payload_units(before.plan), payload_units(step.plan))
        assert row["prefix_tokens"] == step.prefix_tokens == expected > 0
    table = CliRunner().invoke(main, ["replay", sid, "--db", str(db), "--strategy", "window"])
    assert "cached" in table.stdout.splitlines()[0]


def test_replay_table_and_single_turn(tmp_path):
    db, sid = _imported(tmp_path, TRANSCRIPT)
    table = CliRunner().invoke(main, ["replay", sid, "--db", str(db), "--strategy", "hybrid"])
    assert table.exit_code == 0, table.output
    assert len([line for line in table.stdout.splitlines() if "plan_" in line]) == 3
    one = CliRunner().invoke(main, ["replay", sid, "--turn", "2", "--db", str(db)])
    assert one.exit_code == 0 and one.stdout.startswith("turn 2")
    missing = CliRunner().invoke(main, ["replay", sid, "--turn", "9", "--db", str(db)])
    assert missing.exit_code == 2


def test_chat_with_a_repository_retrieves_cards_and_expands_bodies(tmp_path):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3] / "fixtures" / "demo_repo"
    db = tmp_path / "ctx.db"
    message = 'how does the Ledger record a transfer?\n!tool request_code_context {"symbol": "Ledger.transfer"}'
    result = _chat(db, message, "--repo", str(repo), "--no-semantic", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    with Workbench(db, Config()) as wb:
        first = wb.plans.get(out["plan_ids"][0])
        cards = [i.id for i in first.included if i.kind == "symbol_card"]
        assert "card:ledgerlite.ledger.Ledger.transfer" in cards
        assert wb.plans.retrieval_set(first.retrieval_set_id).hits  # stored with the plan
        tool = next(m for m in wb.messages.history(out["session_id"]) if m.role == "tool")
        assert tool.content.startswith("# ledgerlite.ledger.Ledger.transfer (method)")
        assert "def transfer(" in tool.content
