"""The bundled fixtures: the demo repository and the recorded sessions are what they claim to be."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbench.config import TruncationConfig
from ctxbench.records.messages import Message, ToolCall, strategy_family
from ctxbench.records.vocab import ROLES

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures"
DEMO_REPO = FIXTURES / "demo_repo"
SESSIONS = FIXTURES / "sessions"
LONG = SESSIONS / "long_session.jsonl"
SHORT = SESSIONS / "short_session.jsonl"

MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "parsing_strategy"}
STRATEGIES = {"openai", "gemini"}
MAX_SESSION_BYTES = 1_500_000
STATE_LINES = ("### STATE", "Goal:", "Context:", "Resolved:", "Technical Anchors:")


def load(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def turns(messages: list[dict]) -> list[list[dict]]:
    """Groups as ctxbench means them: a user message and everything until the next user message."""
    groups: list[list[dict]] = []
    for message in messages:
        if message["role"] == "user":
            groups.append([])
        if groups:
            groups[-1].append(message)
    return groups


def text_of(group: list[dict], roles: tuple[str, ...] = ("user", "assistant")) -> str:
    return "\n".join(m["content"] or "" for m in group if m["role"] in roles)


@pytest.fixture(scope="module")
def long_session() -> list[dict]:
    return load(LONG)


@pytest.fixture(scope="module")
def short_session() -> list[dict]:
    return load(SHORT)


@pytest.fixture(scope="module", params=["long", "short"])
def session(request, long_session, short_session) -> list[dict]:
    return long_session if request.param == "long" else short_session


# --- shape -------------------------------------------------------------------------------


def test_every_line_is_a_message_of_the_documented_shape(session):
    for n, message in enumerate(session, start=1):
        assert isinstance(message, dict), n
        assert set(message) <= MESSAGE_KEYS, (n, set(message) - MESSAGE_KEYS)
        assert message["role"] in ROLES, n
        assert isinstance(message["content"], str), n
        assert message["parsing_strategy"] in STRATEGIES, n
        if "tool_calls" in message:
            assert message["role"] == "assistant" and message["tool_calls"], n
            for call in message["tool_calls"]:
                assert set(call) == {"id", "type", "function"} and call["type"] == "function", n
                assert set(call["function"]) == {"name", "arguments"}, n
                assert isinstance(json.loads(call["function"]["arguments"]), dict), n
        assert ("tool_call_id" in message) == (message["role"] == "tool"), n


def test_system_prompt_comes_first_and_only_once(session):
    assert session[0]["role"] == "system" and session[0]["content"].strip()
    assert [m["role"] for m in session].count("system") == 1


def test_every_tool_call_is_answered_right_after_it(session):
    seen_ids: set[str] = set()
    i = 0
    while i < len(session):
        message = session[i]
        assert message["role"] != "tool", f"tool message {i + 1} answers no call right before it"
        calls = message.get("tool_calls", [])
        ids = [c["id"] for c in calls]
        assert not seen_ids & set(ids), f"tool call id reused at message {i + 1}"
        seen_ids |= set(ids)
        answers = session[i + 1 : i + 1 + len(ids)]
        assert [a["role"] for a in answers] == ["tool"] * len(ids), f"message {i + 1}"
        assert [a["tool_call_id"] for a in answers] == ids, f"message {i + 1}"
        assert all(a["parsing_strategy"] == message["parsing_strategy"] for a in answers)
        i += 1 + len(ids)


def test_every_turn_ends_with_an_assistant_reply(session):
    groups = turns(session)
    assert groups and sum(len(g) for g in groups) == len(session) - 1  # everything after the system prompt
    for n, group in enumerate(groups, start=1):
        last = group[-1]
        assert last["role"] == "assistant" and "tool_calls" not in last and last["content"].strip(), n


def test_messages_fit_the_engine_message_record(session):
    records = []
    for n, m in enumerate(session, start=1):
        calls = tuple(ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                      for c in m.get("tool_calls", []))
        records.append(Message(id=n, session_id="fixture", branch_id="main", group_id=0, role=m["role"],
                               content=m["content"], tool_calls=calls, tool_call_id=m.get("tool_call_id"),
                               parsing_strategy=m["parsing_strategy"]))
    tool_messages = [r for r in records if r.is_tool_message]
    assert tool_messages and all(r.role in ("tool", "assistant") for r in tool_messages)
    assert records[0].to_openai()["role"] == "system"


def test_sessions_stay_small(long_session, short_session):
    assert LONG.stat().st_size < MAX_SESSION_BYTES
    assert 6 <= len(turns(short_session)) <= 10


# --- what the long session has to exercise -------------------------------------------------


def test_long_session_has_at_least_200_turns(long_session):
    assert len(turns(long_session)) >= 200


def test_gemini_is_one_stretch_in_the_middle(long_session):
    groups = turns(long_session)
    per_turn = []
    for group in groups:
        strategies = {m["parsing_strategy"] for m in group}
        assert len(strategies) == 1, "a turn mixes parsing strategies"
        per_turn.append(strategies.pop())
    assert set(per_turn) == STRATEGIES
    assert strategy_family("gemini") != strategy_family("openai")
    gemini = [i for i, s in enumerate(per_turn) if s == "gemini"]
    assert gemini == list(range(gemini[0], gemini[-1] + 1)), "the Gemini turns are not contiguous"
    assert len(per_turn) * 0.25 < gemini[0] and gemini[-1] < len(per_turn) * 0.85
    openai_calls = sum(len(m.get("tool_calls", [])) for m in long_session if m["parsing_strategy"] == "openai")
    gemini_calls = sum(len(m.get("tool_calls", [])) for m in long_session if m["parsing_strategy"] == "gemini")
    assert openai_calls > gemini_calls >= 20


def test_tool_results_reach_every_truncation_tier(long_session):
    tiers = TruncationConfig()
    sizes = [len(m["content"]) for m in long_session if m["role"] == "tool"]
    assert sum(2000 <= s <= 8000 for s in sizes) >= 20
    assert max(sizes) <= 8000
    assert any(s > tiers.active_recent_chars for s in sizes)
    assert any(s < tiers.inactive_chars for s in sizes)
    # one turn has more tool results than the full-fidelity tier keeps, so the degraded tier applies
    assert max(sum(m["role"] == "tool" for m in g) for g in turns(long_session)) > tiers.active_recent_count


def test_state_blocks_follow_the_seed_format(long_session):
    blocks = [m["content"] for m in long_session if m["role"] == "assistant" and "### STATE" in m["content"]]
    assert len(blocks) >= 3
    for block in blocks:
        lines = block[block.index("### STATE"):].splitlines()
        assert [line.split(":")[0] + (":" if ":" in line else "") for line in lines[:5]] == list(STATE_LINES)


def test_early_instruction_is_what_the_late_question_needs(long_session):
    groups = turns(long_session)
    rule_turn = next(i for i, g in enumerate(groups) if "never floats" in g[0]["content"])
    assert rule_turn < 5
    rule = groups[rule_turn][0]["content"]
    assert "`Money`" in rule and "balanced" in rule
    question_turn = next(i for i, g in enumerate(groups)
                         if "rule" in g[0]["content"] and "amounts" in g[0]["content"] and i != rule_turn)
    assert question_turn >= len(groups) - 10
    answer = groups[question_turn][-1]["content"]
    assert "never floats" in answer and "balanced" in answer
    # "amounts" is said only where the rule is given and asked for, so keyword retrieval can find it
    word = re.compile(r"\bamounts\b", re.IGNORECASE)
    elsewhere = [i for i, g in enumerate(groups) if word.search(text_of(g)) and i not in (rule_turn, question_turn)]
    assert elsewhere == []


def test_short_session_has_the_rule_and_both_strategies(short_session):
    groups = turns(short_session)
    assert "never floats" in groups[1][0]["content"]
    assert "amounts" in groups[-1][0]["content"] and "never floats" in groups[-1][-1]["content"]
    assert {m["parsing_strategy"] for m in short_session} == STRATEGIES


# --- the demo repository ------------------------------------------------------------------


def test_demo_repo_is_a_small_parseable_python_project():
    modules = sorted((DEMO_REPO / "ledgerlite").glob("*.py"))
    assert 8 <= len(modules) <= 12
    symbols = 0
    for path in DEMO_REPO.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if path.parent.name == "ledgerlite":
            symbols += sum(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in tree.body)
    assert 40 <= symbols <= 80
    assert list(DEMO_REPO.rglob("*.ts")) or list(DEMO_REPO.rglob("*.go"))
    assert (DEMO_REPO / "README.md").is_file() and (DEMO_REPO / ".gitignore").is_file()


def test_sessions_talk_about_files_of_the_demo_repo(long_session, short_session):
    for session in (long_session, short_session):
        paths = {json.loads(c["function"]["arguments"])["path"]
                 for m in session for c in m.get("tool_calls", []) if c["function"]["name"] == "read_file"}
        assert paths and all((DEMO_REPO / p).is_file() for p in paths), paths


def test_demo_repo_tests_pass():
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(DEMO_REPO)],
                            cwd=DEMO_REPO, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_generator_reproduces_the_committed_sessions(tmp_path):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, str(FIXTURES / "make_fixtures.py"), "--out", str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("long_session.jsonl", "short_session.jsonl"):
        assert (tmp_path / name).read_bytes() == (SESSIONS / name).read_bytes(), f"{name} is stale: rerun the script"
