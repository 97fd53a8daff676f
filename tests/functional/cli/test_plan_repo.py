"""``ctxbench plan … --repo PATH``: the plan gets the repository's scaffold and symbol cards (CliRunner, demo repo)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.planner.strategies.semantic import FALLBACK_NOTE
from ctxbench.service.workbench import Workbench

ROOT = Path(__file__).resolve().parents[3]
DEMO_REPO = ROOT / "fixtures" / "demo_repo"
SHORT_SESSION = ROOT / "fixtures" / "sessions" / "short_session.jsonl"
QUESTION = "where is a transaction checked to be balanced?"
CHAT = "thanks, that's all for today"
CARD_REASONS = {"keyword_match", "semantic_match", "graph_neighbour"}


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    monkeypatch.setenv("CTXBENCH_DB", str(tmp_path / "default.db"))
    return tmp_path


@pytest.fixture
def session_db(env):
    """A database holding the short session (imported once per test)."""
    db = env / "store.db"
    result = CliRunner().invoke(main, ["import", str(SHORT_SESSION), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db, result.stdout.split()[-1]


def plan_json(*args: str) -> tuple[dict, str]:
    result = CliRunner().invoke(main, ["plan", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def cards(plan: dict) -> list[dict]:
    return [i for i in plan["items"] if i["kind"] == "symbol_card"]


def test_plan_with_repo_has_the_scaffold_and_cards_with_reasons(env):
    plan, stderr = plan_json(QUESTION, "--transcript", str(SHORT_SESSION), "--repo", str(DEMO_REPO), "--no-semantic")
    assert stderr == ""  # --json: no progress
    scaffold = [i for i in plan["items"] if i["kind"] == "scaffold"]
    assert len(scaffold) == 1 and scaffold[0]["included"] and scaffold[0]["reason"] == "scaffold"
    included = [c for c in cards(plan) if c["included"]]
    assert len(included) == Config().planner.mode("light").max_cards
    assert {c["reason"] for c in included} <= CARD_REASONS
    assert all(c["detail"] for c in included)  # the hit's why, e.g. "keyword rank 2"
    assert "card:ledgerlite.journal.Transaction.is_balanced" in {c["id"] for c in included}
    assert plan["sections"]["retrieval"] > 0 and plan["sections"]["scaffold"] > 0
    assert "retrieval: semantic search off (--no-semantic)" in plan["notes"]


def test_mode_off_lists_the_cards_but_excludes_them(env):
    plan, _ = plan_json(QUESTION, "--transcript", str(SHORT_SESSION), "--repo", str(DEMO_REPO), "--no-semantic",
                        "--mode", "off")
    listed = [i for i in plan["items"] if i["kind"] in ("symbol_card", "scaffold")]
    assert len(listed) > 1
    assert all(not i["included"] and i["reason"] == "mode_off" for i in listed)
    assert plan["sections"]["retrieval"] == 0 and plan["sections"]["scaffold"] == 0


def test_the_retrieval_set_is_stored_with_the_plan(session_db):
    db, sid = session_db
    plan, _ = plan_json(QUESTION, "--session", sid, "--db", str(db), "--repo", str(DEMO_REPO), "--no-semantic")
    with Workbench(db, Config()) as wb:
        stored = wb.plans.retrieval_set(plan["retrieval_set_id"])
        assert wb.plans.get(plan["plan_id"]).to_json() == plan
    assert stored is not None and stored.query == QUESTION and stored.scaffold
    assert {f"card:{h.symbol}" for h in stored.hits} == {c["id"] for c in cards(plan)}


def test_without_json_progress_goes_to_stderr_and_the_table_to_stdout(session_db):
    db, sid = session_db
    result = CliRunner().invoke(main, ["plan", QUESTION, "--session", sid, "--db", str(db), "--repo",
                                       str(DEMO_REPO), "--no-semantic"])
    assert result.exit_code == 0, result.output
    # the first index is announced on stderr; counters that update in place are for a terminal only
    assert "not indexed yet" in result.stderr and "not indexed yet" not in result.stdout
    assert "parse:" not in result.stdout and "parse:" not in result.stderr
    assert "card ledgerlite.journal.Transaction.is_balanced" in result.stdout


def test_a_chit_chat_turn_gets_no_cards_a_code_question_does(session_db):
    db, sid = session_db
    common = ("--session", sid, "--db", str(db), "--repo", str(DEMO_REPO), "--no-semantic")
    chat, _ = plan_json(CHAT, *common)
    assert cards(chat) and not any(c["included"] for c in cards(chat))
    assert {c["reason"] for c in cards(chat)} == {"below_threshold"}
    code, _ = plan_json(QUESTION, *common)
    assert any(c["included"] for c in cards(code))


def test_semantic_strategy_is_accepted_and_falls_back_without_the_model(session_db):
    db, sid = session_db
    plan, _ = plan_json("what was the rule about amounts?", "--session", sid, "--db", str(db), "--strategy",
                        "semantic", "--no-semantic")
    assert plan["strategy"] == "semantic" and FALLBACK_NOTE in plan["notes"]


@pytest.fixture
def shared_model(real_embedder, monkeypatch):
    """The CLI's embedder is the test session's already loaded model."""
    monkeypatch.setattr("ctxbench.retrieval.embedder.Embedder", lambda *a, **k: real_embedder)
    return real_embedder


@pytest.mark.slow
@pytest.mark.model
def test_with_the_model_plans_use_semantic_search_and_the_floor(session_db, shared_model):
    db, sid = session_db
    common = ("--session", sid, "--db", str(db), "--repo", str(DEMO_REPO))
    code, _ = plan_json(QUESTION, *common)
    assert not any("semantic search not available" in n for n in code["notes"])
    assert "semantic_match" in {c["reason"] for c in cards(code) if c["included"]}
    with Workbench(db, Config()) as wb:
        assert wb.plans.retrieval_set(code["retrieval_set_id"]).semantic_available
    chat, _ = plan_json(CHAT, *common)
    assert cards(chat) and not any(c["included"] for c in cards(chat))
    assert all("semantic" in c["detail"] for c in cards(chat) if c["reason"] == "below_threshold")
    # the same model ranks earlier turns: the rule turn of the short session comes back by meaning
    rule, _ = plan_json("remind me of the instruction I gave you about representing sums of cash", *common,
                        "--strategy", "semantic", "--budget", "1500")
    assert FALLBACK_NOTE not in rule["notes"]
    assert any(i["reason"] == "semantic_match" and i["label"].startswith("user: Always use the `Money` type")
               for i in rule["items"] if i["included"])
