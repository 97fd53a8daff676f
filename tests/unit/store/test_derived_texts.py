"""A session reopened in a fresh workbench plans from the masking and token counts kept in the store
(``store.derived_texts``): the same plan (same PlanId) as the cold path, without scanning or encoding the history
again, and nothing kept in the store holds a secret unmasked."""
from __future__ import annotations

import json
import sqlite3
import string

import pytest

from ctxbench.config import Config
from ctxbench.planner import atoms
from ctxbench.records.messages import ToolCall
from ctxbench.redaction import MASK, forget_masks, scanner
from ctxbench.service import derived_texts as service_derived
from ctxbench.service.workbench import Workbench
from ctxbench.tokens import TiktokenTokenizer, get_tokenizer
from plan_requests import plan_of

KEY_ID = "AK" + "IA" + "Q7ZT3LX2M9BV4KDP"
SECRET = "wJ7rXUtnFEMI/K7MDENG/bPxRfiCYq2x9Zk3Lm0a"
GH = "gh" + "p_" + "Zq8Xw2Lm4Rt6Yu1Io9Pa3Sd5Fg7Hj0Kl2Nb4"
ENV_FILE = f"AWS_ACCESS_KEY_ID={KEY_ID}\nAWS_SECRET_ACCESS_KEY={SECRET}\nGITHUB_TOKEN={GH}\nDEBUG=true\n"
SECRETS = (KEY_ID, SECRET, GH)
STRATEGIES = ("window", "hybrid", "levels")


def _forget_this_process() -> None:
    """What a fresh process does not have: laid out groups, masked texts, token counts."""
    atoms.clear_caches()
    forget_masks()
    get_tokenizer(Config().tokenizer.name).forget()  # type: ignore[attr-defined]


def _session(wb: Workbench) -> str:
    sid = wb.new_session("reopened")
    for turn in range(6):
        wb.messages.append(sid, "user", f"question {turn}: why does the deploy of {turn} fail with {GH}?")
        call = ToolCall(f"c{turn}", "read_file", json.dumps({"path": ".env", "token": GH}))
        assistant = wb.messages.append(sid, "assistant", "", tool_calls=(call,))
        body = ENV_FILE if turn % 2 else "\n".join(f"line {i} of a long log of turn {turn}" for i in range(400))
        wb.messages.append(sid, "tool", body, group_id=assistant.group_id, tool_call_id=f"c{turn}",
                           tool_name="read_file")
        wb.messages.append(sid, "assistant", f"answer {turn}: rotate the key {KEY_ID}", group_id=assistant.group_id)
    return sid


@pytest.fixture
def db(tmp_path):
    return tmp_path / "ctx.db"


def test_a_reopened_session_plans_the_same_without_masking_or_counting_again(db, monkeypatch):
    _forget_this_process()
    with Workbench(db, Config()) as wb:
        sid = _session(wb)
        _forget_this_process()
        cold = {s: plan_of(wb, sid, "what should I rotate first?", strategy=s, store=False) for s in STRATEGIES}
    assert any(i.redacted for i in cold["window"].items)

    _forget_this_process()

    def must_not_run(*args, **kwargs):
        raise AssertionError("computed again although the store keeps it")

    monkeypatch.setattr(scanner, "mask_text", must_not_run)
    monkeypatch.setattr(TiktokenTokenizer, "_raw_count", must_not_run)
    with Workbench(db, Config()) as reopened:
        for strategy in STRATEGIES:
            warm = plan_of(reopened, sid, "what should I rotate first?", strategy=strategy, store=False)
            assert warm.plan_id == cold[strategy].plan_id
            assert warm.items == cold[strategy].items
            assert warm.messages() == cold[strategy].messages()
            assert warm.used_tokens == cold[strategy].used_tokens > 0


def test_the_store_keeps_masked_text_only_and_forgets_it_with_the_session(db):
    _forget_this_process()
    with Workbench(db, Config()) as wb:
        sid = _session(wb)
        plan_of(wb, sid, "what should I rotate first?", store=False)
        conn = wb.conn
        rows = conn.execute("SELECT key, redactions, masked FROM masked_texts WHERE session_id = ?", (sid,)).fetchall()
        counts = conn.execute("SELECT COUNT(*) FROM token_counts WHERE session_id = ?", (sid,)).fetchone()[0]
        assert rows and counts > 0
        dump = "\n".join(conn.iterdump())
        kept = "\n".join(line for line in dump.splitlines() if "masked_texts" in line or "token_counts" in line)
        assert not any(secret in kept for secret in SECRETS)
        masked = [r[2] for r in rows if r[1]]
        assert masked and all(MASK in text for text in masked)
        assert all(r[2] is None for r in rows if not r[1])  # unchanged texts are not stored at all
        wb.sessions.delete(sid)
        for table in ("masked_texts", "token_counts"):
            assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE session_id = ?", (sid,)).fetchone()[0] == 0


def test_a_deleted_turn_leaves_no_masking_of_its_texts_behind(db):
    """Deleting a turn purges it: the masked text of its secrets (and the hash of the original they are kept by) go
    too, the rest of the session's kept masking stays."""
    from ctxbench.records.messages import text_key

    _forget_this_process()
    with Workbench(db, Config()) as wb:
        sid = _session(wb)
        pasted = wb.messages.append(sid, "user", "db password: hunter2isnotsafe42 please store it")
        arguments = json.dumps({"note": "db password: hunter2isnotsafe42"})
        call = wb.messages.append(sid, "assistant", "", group_id=pasted.group_id,
                                  tool_calls=(ToolCall("c9", "remember", arguments),))
        plan_of(wb, sid, "what should I rotate first?", store=False)
        conn = wb.conn

        def kept(text: str) -> bool:
            return conn.execute("SELECT COUNT(*) FROM masked_texts WHERE session_id = ? AND key = ?",
                                (sid, text_key(text))).fetchone()[0] > 0

        gone = (pasted.content, arguments, "db password: hunter2isnotsafe42")
        assert all(kept(text) for text in gone) and call.group_id == pasted.group_id
        wb.messages.remove(sid, pasted.group_id)
        assert not any(kept(text) for text in gone)
        assert conn.execute("SELECT COUNT(*) FROM masked_texts WHERE session_id = ? AND masked IS NOT NULL",
                            (sid,)).fetchone()[0] > 0  # the other turns' masking is kept


def test_masking_kept_under_other_rules_is_done_again(db, monkeypatch):
    _forget_this_process()
    with Workbench(db, Config()) as wb:
        sid = _session(wb)
        cold = plan_of(wb, sid, "what should I rotate first?", store=False)
    _forget_this_process()
    scanned = []
    real = scanner.mask_text
    monkeypatch.setattr(scanner, "mask_text", lambda text, filename="": scanned.append(text) or real(text, filename))
    monkeypatch.setattr(service_derived, "rules_fingerprint", lambda: "a-newer-rule-set")
    with Workbench(db, Config()) as reopened:
        again = plan_of(reopened, sid, "what should I rotate first?", store=False)
    assert scanned and any(GH in text for text in scanned)
    assert again.plan_id == cold.plan_id


def test_a_store_that_cannot_be_written_does_not_stop_a_plan(db):
    _forget_this_process()
    with Workbench(db, Config()) as wb:
        sid = _session(wb)
    _forget_this_process()
    with Workbench(db, Config()) as wb:
        wb.derived_texts._db = _Locked()  # type: ignore[attr-defined]
        plan = plan_of(wb, sid, "what should I rotate first?", store=False)
        assert any(i.redacted for i in plan.items)
        assert wb.conn.execute("SELECT COUNT(*) FROM token_counts").fetchone()[0] == 0


class _Locked:
    """Transactions that fail as a database busy past its timeout does."""

    def transaction(self):
        raise sqlite3.OperationalError("database is locked")
