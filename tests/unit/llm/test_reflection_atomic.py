"""Reflection writes (activation, reference counts, promotion, leases) commit together or not at all."""
from __future__ import annotations

import pytest

from ctxbench.config import Config
from ctxbench.llm import reflection
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet
from ctxbench.service.workbench import Workbench
from plan_requests import plan_of

TOTAL = "ledgerlite.ledger.Ledger.total"
HITS = (RetrievalHit(TOTAL, "ledgerlite/ledger.py", 40, 0.9, card_text=f"# {TOTAL}\ndef total(self):",
                     provenance="keyword", card_hash="h1"),)


@pytest.fixture
def bench(tmp_path):
    with Workbench(tmp_path / "ctx.db", Config()) as wb:
        sid = wb.new_session("t")
        yield wb, wb.traces, sid


def _snapshot(wb, traces, sid):
    refs = wb.conn.execute("SELECT item_id, turns, last_turn FROM reference_turns WHERE session_id = ? "
                           "ORDER BY item_id", (sid,)).fetchall()
    return wb.activation.scores(sid), wb.pins.list(sid), [tuple(r) for r in refs]


def _reflect(wb, traces, sid, turn: int):
    query = "why does `Ledger.total` round wrong?"
    gid = wb.messages.append(sid, "user", query).group_id
    plan = plan_of(wb, sid, query, retrieval=RetrievalSet(RetrievalSet.make_id(query, HITS), query, HITS))
    return reflection.reflect(wb, sid, gid, plans=(plan,), user_text=query,
                              assistant_texts=(f"`{TOTAL}` rounds half-even",), usage=(),
                              config=wb.config)


def test_a_failure_mid_reflection_changes_nothing(bench, monkeypatch):
    wb, traces, sid = bench
    wb.pins.add(sid, "text:note", "leased", ttl=2)  # a lease that the countdown would change
    wb.pins.add(sid, f"card:{TOTAL}", "ephemeral")  # referenced: promotion would change it
    _reflect(wb, traces, sid, 0)
    before = _snapshot(wb, traces, sid)
    assert before[0] and before[2]  # there is activation and there are reference counts to protect

    from ctxbench.planner import pins as pin_rules

    def broken(*args, **kwargs):
        raise RuntimeError("injected after activation, references and promotion were written")

    monkeypatch.setattr(pin_rules, "advance_turn", broken)
    with pytest.raises(RuntimeError, match="injected"):
        _reflect(wb, traces, sid, 1)
    assert _snapshot(wb, traces, sid) == before
    assert not wb.conn.in_transaction

    monkeypatch.undo()  # the next reflection works and sees the state as it was
    after = _reflect(wb, traces, sid, 2)
    assert after.activation


def test_counting_the_same_turn_again_does_not_count_twice(bench):
    wb, traces, sid = bench
    first = traces.count_references(sid, 7, ["card:a", "card:b"])
    again = traces.count_references(sid, 7, ["card:a", "card:b"])
    assert first == again == {"card:a": 1, "card:b": 1}
    assert traces.count_references(sid, 8, ["card:a"])["card:a"] == 2
