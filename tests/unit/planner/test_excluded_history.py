"""The history atoms a plan leaves out (``planner.excluded``) are listed the same whichever way they are read: with the
memos of earlier plans or without, and for the fused strategy in runs over its unit tables or turn by turn."""
from __future__ import annotations

import re

import pytest

from ctxbench.bench.perf_large import import_session
from ctxbench.config import Config
from ctxbench.planner import atoms, excluded
from ctxbench.records.vocab import STRATEGIES
from ctxbench.service.workbench import Workbench
from plan_requests import inputs_of

TURNS = 300
QUERY = "where is the retry loop and the cache?"


@pytest.fixture(scope="module")
def long_session(tmp_path_factory):
    db = tmp_path_factory.mktemp("excluded") / "long.db"
    session_id, _, _ = import_session(db, Config(), TURNS)
    return db, session_id


def _listed(items) -> list[str]:
    return [repr(item.to_json()) + repr((item.order, item.messages, item.external_ids)) for item in items]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_excluded_items_are_the_same_from_cold_and_warm_memos_and_either_reading(long_session, strategy, monkeypatch):
    db, session_id = long_session
    with Workbench(db, Config()) as wb:
        inputs = inputs_of(wb, session_id, QUERY, strategy=strategy, budget=3000)
        atoms.clear_caches()
        cold = wb.planning.build(inputs).items
        for budget in (1500, 6000):  # other decisions over the same turn views, memoised on them
            assert wb.planning.build(inputs_of(wb, session_id, QUERY, strategy=strategy, budget=budget)).items
        read = excluded._unit_tables
        found = []
        monkeypatch.setattr(excluded, "_unit_tables", lambda selection: found.append(read(selection)) or found[-1])
        warm = wb.planning.build(inputs).items
        assert (found[-1] is not None) == (strategy == "fused")  # fused: the turns nobody picked from read in runs
        monkeypatch.setattr(excluded, "_unit_tables", lambda selection: None)  # every turn read one by one
        turn_by_turn = wb.planning.build(inputs).items
    assert len([i for i in cold if not i.included]) > 900
    assert cold == warm == turn_by_turn
    assert _listed(cold) == _listed(warm) == _listed(turn_by_turn)


def test_each_atom_a_fused_plan_leaves_out_has_its_own_rank_and_score(long_session):
    db, session_id = long_session
    with Workbench(db, Config()) as wb:
        plan = wb.planning.build(inputs_of(wb, session_id, QUERY, strategy="fused", budget=3000))
    ranked = [i for i in plan.excluded if i.reason == "over_budget" and i.detail.startswith("rank ")]
    assert len(ranked) > 800
    ranks = [int(re.match(r"rank (\d+) of \d+, score (-?[\d.]+): the budget was full$", i.detail).group(1))
             for i in ranked]
    assert len(set(ranks)) == len(ranks)  # one rank per atom
    for item in ranked:
        shown = float(item.detail.split("score ")[1].split(":")[0])
        assert abs(shown - item.score) <= 0.0005 + 1e-9  # the detail names the atom's own score


def test_a_fused_plan_of_a_grown_history_reads_its_left_out_atoms_as_turn_by_turn(tmp_path, monkeypatch):
    """A new turn's plan extends the unit layout of the history before it (the new turns only); the atoms it leaves
    out read the same as turn by turn."""
    db = tmp_path / "grown.db"
    session_id, _, _ = import_session(db, Config(), TURNS)
    made = excluded._UnitLayout
    extended = []

    class Spy(made):
        def __init__(self, groups, units_of, base=None, shared=0):
            extended.append(base is not None and shared > 0)
            super().__init__(groups, units_of, base, shared)

    monkeypatch.setattr(excluded, "_UnitLayout", Spy)
    with Workbench(db, Config()) as wb:
        wb.planning.build(inputs_of(wb, session_id, QUERY, strategy="fused", budget=3000)).items
        for n in range(3):
            wb.messages.append(session_id, "user", f"another question {n} about the retry loop")
            wb.messages.append(session_id, "assistant", f"another answer {n}")
            inputs = inputs_of(wb, session_id, QUERY, strategy="fused", budget=3000)
            in_runs = wb.planning.build(inputs).items
            with monkeypatch.context() as patch:
                patch.setattr(excluded, "_unit_tables", lambda selection: None)
                turn_by_turn = wb.planning.build(inputs).items
            assert in_runs == turn_by_turn
            assert _listed(in_runs) == _listed(turn_by_turn)
    assert any(extended[1:])  # the layouts after the first extended the one before
