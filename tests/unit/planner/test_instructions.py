"""The standing-instruction detector: rules, constraints and facts for the session told apart from questions,
chit-chat and one-off requests, by cues (and meaning, when vectors are at hand); the user's flags win."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.config import InstructionConfig
from ctxbench.planner.instructions import MARK_FLAG, UNMARK_FLAG, judge, judge_all

SET = Path(__file__).resolve().parents[3] / "benchmarks" / "instructions.jsonl"
CONFIG = InstructionConfig()


@pytest.mark.parametrize("text", [
    "Important for the whole session: the staging API listens on port 8443 and every request needs the header "
    "X-Tenant: acme-eu.",
    "We use Postgres 15, not MySQL.",
    "Answer in German from here on.",
])
def test_rules_constraints_and_facts_for_the_session_are_standing_instructions(text):
    assert judge(text, (), CONFIG).instruction


@pytest.mark.parametrize("text", [
    "What port does the staging API listen on?",
    "Thanks, that worked!",
    "Run the migration now and tell me what it prints.",
    "Yesterday the staging API was down for about an hour.",
])
def test_questions_chat_and_one_off_requests_are_not(text):
    assert not judge(text, (), CONFIG).instruction


def test_the_users_flags_win_over_the_detector():
    assert judge("Thanks, that worked!", (MARK_FLAG,), CONFIG).instruction
    assert not judge("We use Postgres 15, not MySQL.", (UNMARK_FLAG,), CONFIG).instruction


def test_meaning_moves_the_score_when_vectors_are_given():
    def encode(texts):  # a toy encoder: the prototypes and our message point one way, the rest the other
        return [[1.0, 0.0] if t in CONFIG.prototypes or "Postgres" in t else [0.0, 1.0] for t in texts]

    plain = judge_all(["Postgres 15 it is."], [()], CONFIG)[0]
    meant = judge_all(["Postgres 15 it is, we use it."], [()], CONFIG, encode)[0]
    assert plain.semantic == 0.0 and meant.semantic > 0


def test_the_held_out_third_is_recognised_with_precision_and_recall_of_at_least_0_9():
    rows = [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line.strip()]
    held = [r for r in rows if r["split"] == "heldout"]
    assert len(rows) >= 60 and len(held) * 3 >= len(rows) - 2
    said = [judge(r["text"], (), CONFIG).instruction for r in held]
    truth = [bool(r["instruction"]) for r in held]
    tp = sum(s and t for s, t in zip(said, truth))
    assert tp / max(sum(said), 1) >= 0.9 and tp / max(sum(truth), 1) >= 0.9
