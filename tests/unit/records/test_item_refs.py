"""Item ids and pin targets read into typed references and written back unchanged."""
from __future__ import annotations

import dataclasses

import pytest

from ctxbench.records.item_refs import (
    AtomRef, CapsuleRef, CardRef, FileRef, GroupRef, ItemRef, OtherRef, PathRef, PinRef, SummaryRef, ToolRef,
    card_symbol,
)


@pytest.mark.parametrize(("item_id", "ref"), [
    ("card:ledger.books.Ledger.post", CardRef("ledger.books.Ledger.post")),
    ("card:a:b", CardRef("a:b")),
    ("group:12", GroupRef(12)),
    ("group:-1", GroupRef(-1)),
    ("atom:12:40", AtomRef(12, "40")),
    ("atom:3:call_abc:1", AtomRef(3, "call_abc:1")),
    ("atom:7", AtomRef(7)),
    ("capsule:3", CapsuleRef(3)),
    ("summary:4", SummaryRef(4)),
    ("pin:p_ab12", PinRef("p_ab12")),
    ("path:src/app.py", PathRef("src/app.py")),
    ("memo:2", OtherRef("memo:2")),
    ("text:a label", OtherRef("text:a label")),
    ("tool:read_file", ToolRef("read_file")),
    ("tool:", ToolRef("")),
    ("file:4:1", FileRef(4, 1)),
    ("atom:5:", AtomRef(5, "")),
    ("system_prompt", OtherRef("system_prompt")),
])
def test_an_id_reads_into_its_typed_reference_and_writes_back_unchanged(item_id, ref):
    assert ItemRef.parse(item_id) == ref
    assert str(ref) == item_id


@pytest.mark.parametrize("item_id", ["group:x", "group:012", "group:", "atom:x:1", "capsule:c3", "file:4", "file:x:1",
                                     "summary:-2", "card:", "pin:", "path:", "", ":"])
def test_a_malformed_id_is_kept_as_it_was_not_misread(item_id):
    ref = ItemRef.parse(item_id)
    assert isinstance(ref, OtherRef) and str(ref) == item_id


def test_groups_and_atoms_name_their_turn_and_nothing_else_does():
    assert ItemRef.parse("group:12").group_id == 12
    assert ItemRef.parse("atom:12:40").group_id == 12
    assert ItemRef.parse("atom:12:40").message_id == 40
    assert ItemRef.parse("atom:12:call_1").message_id is None
    assert ItemRef.parse("card:group.twelve").group_id is None
    assert ItemRef.parse("memo:12").group_id is None


def test_references_are_frozen_values_and_the_kind_is_the_id_s_prefix():
    ref = ItemRef.parse("card:m.f")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.symbol = "other"  # type: ignore[misc]
    assert {ItemRef.parse(i).kind for i in ("card:a", "group:1", "atom:1:2", "capsule:1", "summary:1", "pin:p",
                                            "path:a.py", "memo:1", "text:t", "tool:t", "file:1:0")} == {
        "card", "group", "atom", "capsule", "summary", "pin", "path", "memo", "text", "tool", "file"}
    assert card_symbol("card:m.f") == "m.f" and card_symbol("path:m.py") is None


def test_every_id_a_planned_session_holds_reads_back_unchanged(tmp_path):
    from ctxbench.service.workbench import Workbench
    from plan_requests import plan_of

    fixture = __import__("pathlib").Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "short_session.jsonl"
    with Workbench(tmp_path / "w.db") as wb:
        sid = wb.import_file(fixture)
        wb.pins.add(sid, "group:2", "sticky")
        plan = plan_of(wb, sid, "where is the ledger balanced?", store=False)
        ids = [i.id for i in plan.items]
    assert any(i.startswith("atom:") for i in ids) and any(i.startswith("pin:") for i in ids)
    assert all(str(ItemRef.parse(i)) == i for i in ids)
