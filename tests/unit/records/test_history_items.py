"""A plan's excluded history items as columns (``records.history_items``) make exactly the items they stand for."""
from __future__ import annotations

import math

import pytest

from ctxbench.records.history_items import AtomChunk, ExcludedHistory, from_runs, runs, score_runs
from ctxbench.records.plans import PlanItem


def _rows(first: int, n: int):
    return tuple((f"atom:{i}:{i}", f"user: question {i}", i + 1, (i, i + 1), ("D1:%d" % i,) if i % 2 else ())
                 for i in range(first, first + n))


def test_columns_make_the_items_of_the_atoms_left_out_in_history_order():
    chunks = [AtomChunk(("a",), rows=_rows(0, 3)), AtomChunk(("b",), make=lambda: _rows(3, 2))]
    history = ExcludedHistory(chunks, skipped=(1, 3), reasons=["over_budget", "outside_window", "over_budget"],
                              details=["", "beyond 2 turns", "x"], scores=[0.0, 0.5, -0.0])
    expected = tuple(
        PlanItem(id=f"atom:{i}:{i}", kind="history_atom", section="history", label=f"user: question {i}",
                 tokens=i + 1, included=False, reason=reason, score=score, pin="", order=-1, message_ids=(i, i + 1),
                 messages=(), detail=detail, external_ids=("D1:%d" % i,) if i % 2 else ())
        for i, reason, detail, score in [(0, "over_budget", "", 0.0), (2, "outside_window", "beyond 2 turns", 0.5),
                                         (4, "over_budget", "x", -0.0)])
    items = history.items()
    assert items == expected
    assert [i.to_json() for i in items] == [i.to_json() for i in expected]


def test_columns_of_different_lengths_are_refused():
    with pytest.raises(ValueError):
        ExcludedHistory([], (), ["over_budget"], [], [0.0])
    with pytest.raises(ValueError):  # more reasons than atoms left out
        ExcludedHistory([AtomChunk((), rows=_rows(0, 1))], (), ["a", "b"], ["", ""], [0.0, 0.0]).items()


def test_runs_give_back_the_values_and_keep_the_sign_of_zero():
    values = ["a", "a", "b", "a", "a", "a"]
    assert runs(values) == (["a", "b", "a"], [2, 1, 3])
    assert from_runs(*runs(values)) == values
    scores = [0.0, 0.0, -0.0, -0.0, 0.5, 0.5, 0.0]
    back = from_runs(*score_runs(scores))
    assert back == scores
    assert [math.copysign(1.0, s) for s in back] == [math.copysign(1.0, s) for s in scores]
    assert score_runs([0.0] * 5 + [0.5, 0.5, 0.25]) == ([0.0, 0.5, 0.25], [5, 2, 1])  # no negative zero: plain runs
    with pytest.raises(ValueError):
        from_runs(["a"], [0])
