"""A long session reopened starts from the snapshot its last workbench kept (``service.history_snapshot``): the same
plans (same PlanIds) as a full read, without reading, masking, rendering or counting its history again, and
without keying its messages again for the first stored plan; what changed since is read, and a snapshot that
cannot be trusted is not used."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbench.bench.perf_large import import_session
from ctxbench.config import Config
from ctxbench.planner import atoms
from ctxbench.records.vocab import STRATEGIES
from ctxbench.redaction import forget_masks, scanner
from ctxbench.service import history_snapshot
from ctxbench.service.workbench import Workbench
from ctxbench.store import codec, message_changes
from ctxbench.tokens import TiktokenTokenizer, get_tokenizer
from plan_requests import plan_of, request

TURNS = 60
QUERY = "fix the parser and cache handling"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A generated session in a database file (copied for each test)."""
    db = tmp_path_factory.mktemp("generated") / "session.db"
    session_id, messages, _ = import_session(db, Config(), TURNS)
    return db, session_id, messages


@pytest.fixture
def session(generated, tmp_path, monkeypatch):
    monkeypatch.setattr(history_snapshot, "SNAPSHOT_MIN_MESSAGES", 1)  # the generated session is a short one
    db = tmp_path / "session.db"
    shutil.copyfile(generated[0], db)
    return db, generated[1]


def _fresh_process() -> None:
    """What a fresh process does not have: laid out turns, masked texts, token counts."""
    atoms.clear_caches()
    forget_masks()
    get_tokenizer(Config().tokenizer.name).forget()  # type: ignore[attr-defined]


def _planned_and_closed(db: Path, session_id: str) -> dict:
    """Every strategy's plan of the session in a workbench that then closes (keeping its snapshot)."""
    _fresh_process()
    with Workbench(db, Config()) as wb:
        return {s: plan_of(wb, session_id, QUERY, strategy=s, store=False) for s in STRATEGIES}


def _same(plan, other) -> None:
    assert plan.plan_id == other.plan_id
    assert plan == other
    assert plan.items == other.items
    assert json.dumps(plan.messages(), ensure_ascii=False) == json.dumps(other.messages(), ensure_ascii=False)


def _snapshots(db: Path) -> int:
    with Workbench(db, Config()) as wb:
        return wb.conn.execute("SELECT count(*) FROM history_snapshots").fetchone()[0]


def test_a_reopened_session_plans_the_same_without_reading_masking_or_counting_its_history(session, monkeypatch):
    db, sid = session
    before = _planned_and_closed(db, sid)
    _fresh_process()
    read: list[int] = []
    tokenized: list[str] = []
    real_changes, real_count = message_changes.changes_since, TiktokenTokenizer._raw_count

    def changes_since(conn, session_id, seq):
        found = real_changes(conn, session_id, seq)
        read.extend(m.id for m in found.messages)
        return found

    def count(self, text):
        tokenized.append(text)
        return real_count(self, text)

    def must_not_mask(*args, **kwargs):
        raise AssertionError("masked again although the snapshot holds the masked history")

    monkeypatch.setattr(message_changes, "changes_since", changes_since)
    monkeypatch.setattr(TiktokenTokenizer, "_raw_count", count)
    monkeypatch.setattr(scanner, "mask_text", must_not_mask)
    with Workbench(db, Config()) as reopened:
        for strategy in STRATEGIES:
            _same(plan_of(reopened, sid, QUERY, strategy=strategy, store=False), before[strategy])
    assert read == []  # no message read: the snapshot is current
    assert tokenized == []  # no text counted: the views hold their counts, the store the query's


def test_the_first_plan_in_a_fresh_process_equals_the_plan_before_closing(session):
    db, sid = session
    before = _planned_and_closed(db, sid)["window"]
    child = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from ctxbench.config import Config\n"
        "from ctxbench.records.plan_request import PlanRequest\n"
        "from ctxbench.service import history_snapshot\n"
        "from ctxbench.service.workbench import Workbench\n"
        "from ctxbench.store import message_changes\n"
        "read = []\n"
        "real = message_changes.changes_since\n"
        "message_changes.changes_since = lambda c, s, q: read.append(q) or real(c, s, q)\n"
        "with Workbench(Path(sys.argv[1]), Config()) as wb:\n"
        "    settings = wb.settings(sys.argv[2]).with_choices(strategy='window')\n"
        "    plan = wb.planning.plan(PlanRequest(sys.argv[2], sys.argv[3], settings))\n"
        "print(json.dumps({'plan': plan.to_json(), 'messages': plan.messages(), 'read_from': read}))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", child, str(db), sid, QUERY], capture_output=True, text=True,
                          env=env, check=True)
    after = json.loads(done.stdout.strip().splitlines()[-1])
    assert after["read_from"] and after["read_from"][0] > 0  # started from the snapshot's stamp, not a full read
    assert after["plan"] == json.loads(json.dumps(before.to_json()))
    assert after["messages"] == json.loads(json.dumps(before.messages()))


def test_turns_added_after_the_snapshot_are_read_and_planned_as_a_full_read_plans_them(session):
    db, sid = session
    _planned_and_closed(db, sid)
    with Workbench(db, Config()) as other:  # another process adds a turn and never plans
        other.messages.append(sid, "user", "and the parser cache after the restart?")
        other.messages.append(sid, "assistant", "it is rebuilt from the log")
        other.messages.drop(sid, 3)
    assert _snapshots(db) == 1  # adding and dropping keep the snapshot: its stamp says what changed since
    _fresh_process()
    with Workbench(db, Config()) as reopened:
        warm = {s: plan_of(reopened, sid, QUERY, strategy=s, store=False) for s in STRATEGIES}
        assert "and the parser cache after the restart?" in json.dumps(warm["window"].messages())
    with Workbench(db, Config()) as wb:
        wb.conn.execute("DELETE FROM history_snapshots")
        wb.conn.commit()
    _fresh_process()
    with Workbench(db, Config()) as full:
        for strategy in STRATEGIES:
            _same(warm[strategy], plan_of(full, sid, QUERY, strategy=strategy, store=False))


def test_a_deleted_or_rewritten_message_deletes_the_snapshot_holding_its_text(session):
    db, sid = session
    _planned_and_closed(db, sid)
    assert _snapshots(db) == 1
    with Workbench(db, Config()) as wb:
        wb.messages.remove(sid, 2)
    assert _snapshots(db) == 0
    _planned_and_closed(db, sid)
    assert _snapshots(db) == 1
    with Workbench(db, Config()) as wb:
        wb.conn.execute("UPDATE messages SET content = 'rewritten' WHERE id = (SELECT max(id) FROM messages)")
        wb.conn.commit()
    assert _snapshots(db) == 0


def test_a_snapshot_of_another_fingerprint_is_not_used(session, monkeypatch):
    db, sid = session
    before = _planned_and_closed(db, sid)
    with Workbench(db, Config()) as wb:
        wb.conn.execute("UPDATE history_snapshots SET fingerprint = 'made by other code or masking rules'")
        wb.conn.commit()
    _fresh_process()
    seqs: list[int] = []
    real = message_changes.changes_since
    monkeypatch.setattr(message_changes, "changes_since", lambda c, s, q: seqs.append(q) or real(c, s, q))
    with Workbench(db, Config()) as reopened:
        _same(plan_of(reopened, sid, QUERY, strategy="window", store=False), before["window"])
    assert seqs[0] == 0  # read in full


class _Loud:
    def __reduce__(self):
        return (os.system, ("echo a snapshot ran a command",))


def test_a_snapshot_naming_any_other_class_is_refused_and_the_session_read_again(session):
    db, sid = session
    before = _planned_and_closed(db, sid)
    with pytest.raises(pickle.UnpicklingError):
        history_snapshot.loads(pickle.dumps((sid, 1, {}, {}, [], {}, _Loud())))
    with Workbench(db, Config()) as wb:
        wb.conn.execute("UPDATE history_snapshots SET data = ?", (pickle.dumps((sid, 1, {}, {}, [], {}, _Loud())),))
        wb.conn.commit()
    _fresh_process()
    with Workbench(db, Config()) as reopened:
        _same(plan_of(reopened, sid, QUERY, strategy="window", store=False), before["window"])


def test_the_first_stored_plan_after_reopening_keys_only_the_new_messages(session, monkeypatch):
    db, sid = session
    _fresh_process()
    with Workbench(db, Config()) as wb:
        plan_of(wb, sid, QUERY, strategy="window")  # stored: every message keyed once
    new, keyed = _keyed_by_a_new_turns_store(db, sid, monkeypatch)
    assert keyed == [new]  # (0: the pending turn, keyed with every plan, is left out)


def _keyed_by_a_new_turns_store(db: Path, sid: str, monkeypatch) -> tuple[int, list[int]]:
    """In a fresh process, a new turn's plan stored: the new message's id and the ids of the messages keyed."""
    _fresh_process()
    keyed: list[int] = []
    real = codec.canonical_json

    def canonical_json(value):
        if hasattr(value, "group_id") and hasattr(value, "role"):
            keyed.append(value.id)
        return real(value)

    monkeypatch.setattr(codec, "canonical_json", canonical_json)
    with Workbench(db, Config()) as reopened:
        new = reopened.messages.append(sid, "user", "one more question about the parser")
        stored = plan_of(reopened, sid, QUERY, strategy="window")
        assert reopened.plans.get(stored.plan_id) == stored
        assert reopened.plans.inputs(stored.plan_id).history[-1].id == new.id
    monkeypatch.setattr(codec, "canonical_json", real)
    return new.id, [i for i in keyed if i]


def test_a_snapshot_kept_without_keys_is_kept_again_once_a_later_process_knows_them(session, monkeypatch):
    """A snapshot made where no plan was stored holds no keys (the session's plans were stored by a version whose
    snapshot no longer fits); the next process that learns them (storing a plan, or recalling the plan it shows)
    keeps the snapshot again with them, though no message changed, so the one after keys no stored message."""
    db, sid = session
    _fresh_process()
    with Workbench(db, Config()) as wb:
        plan_of(wb, sid, QUERY, strategy="window")  # the session's plans stored: every message keyed once
    with Workbench(db, Config()) as wb:
        wb.conn.execute("DELETE FROM history_snapshots")  # as a new version's code digest does
        wb.conn.commit()
    _fresh_process()
    _planned_and_closed(db, sid)  # a snapshot again, of a process that stored no plan: no keys
    _fresh_process()
    with Workbench(db, Config()) as wb:
        plan_of(wb, sid, QUERY, strategy="window", store=False)
        shown = request(wb, sid, QUERY, strategy="window", store=False)
        assert wb.planning.recall(shown) > 0  # the plan shown shares chunks with the stored one: their keys learned
    new, keyed = _keyed_by_a_new_turns_store(db, sid, monkeypatch)
    assert keyed == [new]


def test_a_short_session_keeps_no_snapshot(generated, tmp_path):
    db = tmp_path / "session.db"
    shutil.copyfile(generated[0], db)
    _planned_and_closed(db, generated[1])  # fewer messages than SNAPSHOT_MIN_MESSAGES: read fast anyway
    assert _snapshots(db) == 0


def test_closing_twice_neither_reopens_nor_keeps_anything_again(session, monkeypatch):
    db, sid = session
    wb = Workbench(db, Config())
    plan_of(wb, sid, QUERY, strategy="window", store=False)
    wb.close()
    saved: list[str] = []
    monkeypatch.setattr(history_snapshot.store, "save", lambda conn, session_id, *rest: saved.append(session_id))
    db.unlink()  # the user deleted the store after the workbench closed
    wb.close()
    assert saved == []
    assert not db.exists()  # not made again by a second close
