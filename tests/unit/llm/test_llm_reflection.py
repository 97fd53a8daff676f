"""Reflection after each turn: activation, promotion, lease countdown and suggestions."""
from __future__ import annotations

import pytest

from ctxbench.config import Config
from ctxbench.records import turns as ev
from ctxbench.llm.loop import TurnRunner
from ctxbench.llm.offline import OfflineClient
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet
from ctxbench.service.workbench import Workbench

TOTAL = "ledgerlite.ledger.Ledger.total"
LOAD = "ledgerlite.io.load"


class FixedRetriever:
    """Always finds the same two cards (stands in for the code index)."""

    def retrieve(self, query: str, *, mode: str, **context) -> RetrievalSet:
        hits = (
            RetrievalHit(TOTAL, "ledgerlite/ledger.py", 40, 0.9, card_text=f"# {TOTAL}\ndef total(self) -> Decimal:",
                         why="keyword rank 1", provenance="keyword", card_hash="h1"),
            RetrievalHit(LOAD, "ledgerlite/io.py", 12, 0.5, card_text=f"# {LOAD}\ndef load(path):",
                         why="keyword rank 2", provenance="keyword", card_hash="h2"),
        )
        return RetrievalSet(RetrievalSet.make_id(query, hits), query, hits)


@pytest.fixture
def setup(tmp_path):
    with Workbench(tmp_path / "ctx.db", Config()) as wb:
        wb.retriever = FixedRetriever()
        sid = wb.new_session("t")
        runner = TurnRunner(wb, OfflineClient(), wb.config)
        yield wb, sid, runner


def _turn(runner, sid, text) -> ev.Reflection:
    events = list(runner.run(sid, text))
    assert events[-1].status == "ok"
    (done,) = [e for e in events if isinstance(e, ev.ReflectionDone)]
    return done.reflection


def test_references_raise_activation_which_decays(setup):
    wb, sid, runner = setup
    first = _turn(runner, sid, "why does `Ledger.total` round wrong?")
    assert f"card:{TOTAL}" in first.referenced_by_user
    assert {f"card:{TOTAL}", f"card:{LOAD}"} <= set(first.referenced_by_model)  # the offline reply names its cards
    act = wb.config.planner.activation
    scores = wb.activation.scores(sid)
    assert scores[f"card:{TOTAL}"] == pytest.approx(act.in_plan + act.referenced_by_model + act.referenced_by_user)
    assert scores[f"card:{LOAD}"] == pytest.approx(act.in_plan + act.referenced_by_model)
    wb.update_settings(sid, mode="off")  # no cards in the plan now: only references can add
    second = _turn(runner, sid, "unrelated question")
    assert f"card:{TOTAL}" not in second.referenced_by_user
    for item in (f"card:{TOTAL}", f"card:{LOAD}"):
        gain = act.referenced_by_model if item in second.referenced_by_model else 0.0
        assert wb.activation.scores(sid)[item] == pytest.approx(scores[item] * act.decay + gain)


def test_activation_suggests_then_references_promote_to_a_lease_that_expires(setup):
    wb, sid, runner = setup
    pcfg = wb.config.planner.pins
    first = _turn(runner, sid, "look at `Ledger.total`")
    threshold = wb.config.planner.activation.suggest_threshold
    suggested = {s.target for s in first.suggestions if s.source == "activation"}
    assert suggested == {t for t, score in wb.activation.scores(sid).items() if score >= threshold}
    second = _turn(runner, sid, "and `Ledger.total` again")
    assert f"card:{TOTAL}" in {s.target for s in second.suggestions if s.source == "activation"}
    assert wb.pins.list(sid) == ()  # suggestions never pin anything by themselves
    reflections = [first, second]
    while len(reflections) < pcfg.promote_after_turns:
        reflections.append(_turn(runner, sid, "still `Ledger.total`"))
    promoted = reflections[-1].promoted
    assert len(promoted) >= 1
    pins = {p.target: p for p in wb.pins.list(sid)}
    lease = pins[f"card:{TOTAL}"]
    assert lease.kind == "leased" and lease.source == "promotion" and lease.ttl == pcfg.default_lease_ttl
    assert all(p.kind != "sticky" for p in pins.values())
    assert f"card:{TOTAL}" not in {s.target for s in reflections[-1].suggestions}  # pinned now
    assert lease.content.startswith("### SYMBOL CARD")

    wb.update_settings(sid, mode="off")
    ttls = []
    for _ in range(pcfg.default_lease_ttl):
        reflection = _turn(runner, sid, "something else")
        current = {p.target: p for p in wb.pins.list(sid)}
        ttls.append(current[f"card:{TOTAL}"].ttl if f"card:{TOTAL}" in current else 0)
    assert ttls == list(range(pcfg.default_lease_ttl - 1, -1, -1))
    assert lease.id in reflection.expired


def test_the_models_suggest_pins_are_kept_until_the_user_decides(setup):
    wb, sid, runner = setup
    wb.update_settings(sid, mode="off")
    reflection = _turn(runner, sid, '!tool suggest_pins {"items": ["ledgerlite.io.load"], "reason": "core loader"}')
    (model,) = [s for s in reflection.suggestions if s.source == "model"]
    assert (model.target, model.reason) == (f"card:{LOAD}", "core loader")
    assert wb.pins.list(sid) == ()
    again = _turn(runner, sid, "next")
    assert f"card:{LOAD}" in {s.target for s in again.suggestions}
    assert runner.traces.decide_suggestion(sid, f"card:{LOAD}", accepted=False)
    after = _turn(runner, sid, "and next")
    assert f"card:{LOAD}" not in {s.target for s in after.suggestions}


def test_everything_is_attributable_to_the_plan_id(setup):
    wb, sid, runner = setup
    events = list(runner.run(sid, '!tool query_db {"sql": "SELECT count(*) AS n FROM messages"}'))
    finished = events[-1]
    first, second = finished.plan_ids
    plan = wb.plans.get(first)
    assert wb.plans.retrieval_set(plan.retrieval_set_id).hits[0].symbol == TOTAL
    (trace,) = runner.traces.tool_traces(plan_id=first)
    assert trace.name == "query_db" and trace.ok
    calls = runner.traces.calls(session_id=sid)
    assert [(c.plan_id, c.round, c.status) for c in calls] == [(first, 0, "ok"), (second, 1, "ok")]
    assert [r.plan_id for p in (first, second) for r in wb.plans.usage_reports(p)] == [first, second]
    result_msg = next(m for m in wb.messages.history(sid) if m.id == trace.result_message_id)
    assert result_msg.role == "tool" and result_msg.content == '{"n": 2}'


def test_the_user_accepts_or_rejects_suggestions_and_rejections_stick(setup):
    from ctxbench.llm.suggestions import decide, open_suggestions

    wb, sid, runner = setup
    _turn(runner, sid, '!tool suggest_pins {"items": ["ledgerlite.io.load"], "reason": "core loader"}')
    _turn(runner, sid, "look at `Ledger.total`")
    shown = {s.target: s.source for s in open_suggestions(wb, sid)}
    assert shown[f"card:{LOAD}"] == "model" and shown[f"card:{TOTAL}"] == "activation"

    pin = decide(wb, sid, f"card:{LOAD}", accept=True, kind="sticky", content="card text")
    assert (pin.target, pin.kind, pin.source, pin.content) == (f"card:{LOAD}", "sticky", "user", "card text")
    assert decide(wb, sid, f"card:{TOTAL}", accept=False) is None
    assert open_suggestions(wb, sid) == ()
    later = _turn(runner, sid, "`Ledger.total` once more")  # activation rises again, the answer stands
    assert f"card:{TOTAL}" not in {s.target for s in later.suggestions}
    with pytest.raises(ValueError):
        decide(wb, sid, f"card:{TOTAL}", accept=True, kind="ephemeral")
