"""Replay streams: each turn is planned and printed before the next is, and a long session's first turns are
planned from its start alone — the rest is read as replay gets there. The plans are those of the whole history."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.llm.replay import replay
from ctxbench.service import history_cache
from ctxbench.service.planning import Planning
from ctxbench.service.workbench import Workbench

TURNS = 30


def _session(db, turns: int = TURNS) -> str:
    """A session of ``turns`` turns, turn 4 dropped, and a branch forked after turn 20 (the active one) that adds
    three turns of its own."""
    with Workbench(db, Config()) as wb:
        sid = wb.new_session("long")
        for g in range(turns):
            wb.messages.append(sid, "user", f"question {g}: how is the parser of module {g % 7} doing?")
            wb.messages.append(sid, "assistant", f"reply {g}: " + "the parser is fine " * (g % 5 + 1))
        groups = wb.messages.group_ids(sid)
        wb.messages.drop(sid, groups[3])
        wb.branches.fork(sid, "side", at_turn=groups[19])
        for g in range(3):
            wb.messages.append(sid, "user", f"side question {g} about the parser")
            wb.messages.append(sid, "assistant", f"side reply {g}")
    return sid


def _summary(step) -> tuple:
    plan = step.plan
    return (step.turn, step.group_id, step.user_message.content, step.user_message.status, step.history_messages,
            plan.plan_id, [(i.id, i.included, i.reason, i.detail) for i in plan.items])


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(history_cache, "PREFIX_PART", (8, 16))  # a 30-turn session read in many parts


def test_the_first_turn_is_planned_before_the_session_is_read_or_the_rest_planned(tmp_path, small_parts):
    db = tmp_path / "r.db"
    sid = _session(db)
    with Workbench(db, Config()) as wb:
        built = []
        original = wb.planning.build
        wb.planning.build = lambda inputs, **kw: built.append(inputs) or original(inputs, **kw)
        steps = replay(wb, sid)
        first = next(steps)
        assert first.turn == 1 and len(built) == 1  # one plan made, 23 to go
        (prefix,) = wb.history_cache._sessions[sid].prefixes.values()
        last_id = max(m.id for m in wb.messages.all(sid))
        assert prefix.read_to < last_id / 2 and not prefix.done  # the start of the session, not all of it
        rest = list(steps)
        assert len(built) == 1 + len(rest) == 20 + 3  # the branch sees 20 turns of its parent and 3 of its own
        assert prefix.done


def test_plans_from_the_start_of_a_session_are_those_from_the_whole_of_it(tmp_path, small_parts):
    db = tmp_path / "r.db"
    sid = _session(db)
    for strategy in ("fused", "window", "hybrid", "levels"):
        with Workbench(db, Config()) as wb:
            streamed = [_summary(s) for s in replay(wb, sid, strategy=strategy, budget=600)]
            assert wb.history_cache._sessions[sid].prefixes  # read in parts
        with Workbench(db, Config()) as wb:
            wb.visible_messages(sid)  # the whole view is read first and kept: replay answers from it
            whole = [_summary(s) for s in replay(wb, sid, strategy=strategy, budget=600)]
            assert not wb.history_cache._sessions[sid].prefixes
        assert streamed == whole
    turns = {s[0]: s for s in streamed}
    assert turns[4][3] == "dropped" and all(s[3] == "active" for t, s in turns.items() if t != 4)
    assert [s[2] for s in streamed[-3:]] == [f"side question {g} about the parser" for g in range(3)]
    # each turn sees what came before it, the dropped turn 4 as dropped (its messages are not active history)
    grows = [t[4] - s[4] for s, t in zip(streamed, streamed[1:])]
    assert grows[3] == 0 and all(g == 2 for i, g in enumerate(grows) if i != 3)


def test_replay_json_prints_each_turn_before_planning_the_next(tmp_path, monkeypatch):
    db = tmp_path / "r.db"
    sid = _session(db)
    printed_before: list[str] = []
    original = Planning.build

    def spying(self, inputs, **kw):
        import sys

        sys.stdout.flush()
        printed_before.append(sys.stdout.buffer.getvalue().decode())  # what the user sees when this plan starts
        return original(self, inputs, **kw)

    monkeypatch.setattr(Planning, "build", spying)
    result = CliRunner().invoke(main, ["replay", sid, "--json", "--db", str(db)],
                                env={"CTXBENCH_CONFIG": os.devnull})
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["turn"] for r in rows] == list(range(1, 24)) and len(printed_before) == 23
    for k, seen in enumerate(printed_before):
        lines = [line for line in seen.splitlines() if line.startswith("{")]
        assert [json.loads(line.rstrip(","))["turn"] for line in lines] == list(range(1, k + 1))


def test_an_interrupted_replay_json_is_still_a_json_array(tmp_path, monkeypatch):
    db = tmp_path / "r.db"
    sid = _session(db)
    original = Planning.build
    calls = []

    def interrupted(self, inputs, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(self, inputs, **kw)

    monkeypatch.setattr(Planning, "build", interrupted)
    result = CliRunner().invoke(main, ["replay", sid, "--json", "--db", str(db)],
                                env={"CTXBENCH_CONFIG": os.devnull})
    assert result.exit_code != 0
    assert [r["turn"] for r in json.loads(result.stdout)] == [1, 2]
