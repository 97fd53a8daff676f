"""Pins only for what exists: ``plan --pin`` and the session's pin refuse a target that names nothing (one
clear line, nothing stored); suggested pins come from relevant cards the plan left out and say why."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.records.plans import ContextPlan, PlanItem
from ctxbench.service.pin_targets import check_pin_target
from ctxbench.service.workbench import Workbench

ROOT = Path(__file__).resolve().parents[3]
DEMO_REPO = ROOT / "fixtures" / "demo_repo"
SHORT_SESSION = ROOT / "fixtures" / "sessions" / "short_session.jsonl"
REAL_CARD = "card:ledgerlite.journal.Transaction.is_balanced"


@pytest.fixture
def session_db(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    db = tmp_path / "store.db"
    result = CliRunner().invoke(main, ["import", str(SHORT_SESSION), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db, result.stdout.split()[-1]


def pins_of(db: Path, sid: str) -> list[str]:
    with Workbench(db, Config()) as wb:
        return [p.target for p in wb.pins.list(sid)]


@pytest.mark.parametrize("target, words", [
    ("card:ledgerlite.journal.Transaction.is_balancd", "has no symbol"),
    ("path:ledgerlite/nowhere.py", "is not a file"),
    ("group:99999", "no turn 99999"),
    ("memo:42", "no memo 42"),
    ("bogus", "cannot pin"),
])
def test_plan_pin_refuses_a_target_that_does_not_exist(session_db, target, words):
    db, sid = session_db
    result = CliRunner().invoke(main, ["plan", "where is a transaction balanced?", "--session", sid, "--db", str(db),
                                       "--repo", str(DEMO_REPO), "--no-semantic", "--pin", REAL_CARD, "--pin", target])
    assert result.exit_code == 2
    last = result.output.strip().splitlines()[-1]  # progress lines of the indexing come first
    assert last.startswith("error: ") and words in last
    assert pins_of(db, sid) == []  # nothing stored, not even the good target given with it


def test_plan_pin_pins_existing_targets_and_the_plan_includes_them(session_db):
    db, sid = session_db
    result = CliRunner().invoke(main, ["plan", "where is a transaction balanced?", "--session", sid, "--db", str(db),
                                       "--repo", str(DEMO_REPO), "--no-semantic", "--pin", REAL_CARD,
                                       "--pin", "path:ledgerlite/journal.py", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    pinned = [i for i in plan["items"] if i["kind"] == "pin" and i["included"]]
    assert len(pinned) == 2 and all(i["pin"] == "sticky" for i in pinned)
    assert sorted(pins_of(db, sid)) == sorted([REAL_CARD, "path:ledgerlite/journal.py"])


def test_a_card_needs_an_index_and_a_suggestion_names_close_symbols(tmp_path):
    from ctxbench.codegraph.index import build_index, load_index

    with Workbench(tmp_path / "w.db", Config()) as wb:
        sid = wb.new_session()
        with pytest.raises(ValueError, match="no repository is indexed"):
            check_pin_target(wb, sid, REAL_CARD, None)
        conn = wb.database.dedicated_connection()
        build_index(DEMO_REPO, conn, wb.config.index)
        index = load_index(DEMO_REPO, conn, wb.config.index, wb.config.capsules)
        check_pin_target(wb, sid, REAL_CARD, index)  # exists: no error
        check_pin_target(wb, sid, "text:a note", index)  # text pins carry their content
        with pytest.raises(ValueError, match="did you mean card:ledgerlite.journal.Transaction.is_balanced"):
            check_pin_target(wb, sid, "card:Transaction.is_balanced", index)


def _item(sid: str, score: float, included: bool, reason: str, detail: str = "") -> PlanItem:
    return PlanItem(id=f"card:{sid}", kind="symbol_card", section="retrieval", label=f"card {sid}", tokens=10,
                    included=included, reason=reason, score=score, detail=detail)


def test_suggested_pins_are_relevant_cards_left_out_and_a_rejection_pulls_up_nothing(tmp_path):
    from ctxbench.service.session import WorkbenchSession

    items = (
        _item("a.in_plan", 0.9, True, "semantic_match", "semantic 0.61"),
        _item("a.cut1", 0.5, False, "over_budget", "retrieval share (1800 tokens) is full"),
        _item("a.cut2", 0.4, False, "card_limit", "beyond the 6 cards of mode light"),
        _item("a.cut3", 0.3, False, "over_budget", "retrieval share (1800 tokens) is full"),
        _item("a.floor", 0.8, False, "below_threshold", "below the relevance floor: semantic 0.10 < 0.35"),
        _item("a.off", 0.7, False, "mode_off", "mode off never auto-retrieves"),
    )
    plan = ContextPlan(plan_id="plan_x", session_id="s", query="q", mode="light", strategy="window", budget=8000,
                       used_tokens=0, over_budget=False, over_budget_reason="", sections=(), items=items,
                       retrieval_set_id="", tokenizer="estimate", estimated=True)
    config = Config()
    config = config.__class__(planner=config.planner.__class__(
        activation=config.planner.activation.__class__(max_suggestions=2)))
    with Workbench(tmp_path / "s.db", config) as wb:
        session = WorkbenchSession.__new__(WorkbenchSession)
        session.workbench, session.session_id, session.config, session.rejected = wb, wb.new_session(), config, set()
        shown = session.suggestions(plan, ())
        assert [s.target for s in shown] == ["card:a.cut1", "card:a.cut2"]  # not in the plan, not under the floor
        assert all(s.why.startswith("retrieved above the relevance floor (score") for s in shown)
        reasons = {i.id: i.reason for i in items}
        assert all(reasons[s.target] != "below_threshold" for s in shown)  # the list and the suggestion agree
        assert [s.tokens for s in shown] == [10, 10]  # what pinning each would add
        assert "left out: retrieval share (1800 tokens) is full" in shown[0].why
        session.rejected.add("card:a.cut1")
        assert [s.target for s in session.suggestions(plan, ())] == ["card:a.cut2"]  # a.cut3 is not pulled up
