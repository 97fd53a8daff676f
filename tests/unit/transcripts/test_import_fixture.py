"""The bundled long session (fixtures/sessions/long_session.jsonl) through import, keyword search and plans."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.config import Config
from ctxbench.service.workbench import Workbench
from plan_requests import plan_of

LONG = Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "long_session.jsonl"
RULE_QUESTION = "what was the rule I gave you about amounts?"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    wb = Workbench(tmp_path_factory.mktemp("fixture") / "store.db", Config())
    sid = wb.import_file(LONG)
    yield wb, sid
    wb.close()


def _rows():
    return [json.loads(line) for line in LONG.read_text(encoding="utf-8").splitlines() if line.strip()]


def _rule_group(wb, sid):
    (rule,) = [m for m in wb.messages.history(sid) if m.role == "user" and "never floats" in m.content]
    return rule


def test_long_session_imports_every_message_and_turn(imported):
    wb, sid = imported
    rows = _rows()
    info = wb.sessions.info(sid)
    users = sum(r["role"] == "user" for r in rows)
    assert users >= 200
    assert info.message_count == len(rows)
    assert info.group_count == users + sum(r["role"] == "system" for r in rows)
    history = wb.messages.history(sid)
    assert [m.content for m in history] == [r["content"] or "" for r in rows]
    assert [m.parsing_strategy for m in history] == [r.get("parsing_strategy", "openai") for r in rows]
    assert {"openai", "gemini"} <= {m.parsing_strategy for m in history}


def test_keyword_search_finds_the_early_rule(imported):
    wb, sid = imported
    rule = _rule_group(wb, sid)
    history = wb.messages.history(sid)
    assert rule.group_id <= history[-1].group_id // 10  # early in the session
    assert rule.group_id in wb.search.groups(sid, RULE_QUESTION)[:2]
    # one-word turns carry no keywords
    for filler in ("continue", "go on", "ok", "next"):
        assert wb.search.groups(sid, filler) == ()


def test_hybrid_plan_recalls_the_rule_that_the_window_loses(imported):
    wb, sid = imported
    rule = _rule_group(wb, sid)

    def included(strategy):
        plan = plan_of(wb, sid, RULE_QUESTION, strategy=strategy, budget=8000)
        assert plan.over_budget or plan.used_tokens <= 8000
        return {mid for item in plan.included for mid in item.message_ids}

    assert rule.id not in included("window")
    assert rule.id in included("hybrid")
