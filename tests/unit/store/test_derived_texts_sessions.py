"""Several sessions planned in one process (the workbench, ``serve``, the MCP server): each session's store keeps the
masking and token counts of its own texts only (``records.derived``), none is lost to another session, and deleting
a turn leaves no masked copy of its texts anywhere in the database. And what a session's last plan left to embed is
forgotten once it plans with a strategy that embeds nothing (no useless warm-ups)."""
from __future__ import annotations

import json
import threading

import pytest

from ctxbench.config import Config
from ctxbench.planner import atoms
from ctxbench.planner import build_plan
from ctxbench.records.messages import ToolCall, text_key
from ctxbench.redaction import MASK, forget_masks
from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.service.workbench import Workbench
from ctxbench.tokens import get_tokenizer
from plan_requests import inputs_of, plan_of

TOKENS = {name: "gh" + "p_" + tail for name, tail in (("alpha", "Aq8Xw2Lm4Rt6Yu1Io9Pa3Sd5Fg7Hj0Kl2Nb4"),
                                                      ("bravo", "Bz3Kd9Qw1Er5Ty7Ui2Op4As6Df8Gh0Jk1Lm3"))}


def _forget_this_process() -> None:
    atoms.clear_caches()
    forget_masks()
    get_tokenizer(Config().tokenizer.name).forget()  # type: ignore[attr-defined]


def _turn(wb: Workbench, sid: str, name: str, n: int) -> int:
    """One turn of session ``name``: every text in it names the session (``alpha-…``, ``bravo-…``)."""
    user = wb.messages.append(sid, "user", f"{name}-{n}: the deploy fails, token {TOKENS[name]} is in the log")
    args = json.dumps({"path": f"{name}-{n}.env", "token": TOKENS[name]})
    wb.messages.append(sid, "assistant", "", group_id=user.group_id,
                       tool_calls=(ToolCall(f"{name}{n}", "read_file", args),))
    wb.messages.append(sid, "tool", f"{name}-{n} GITHUB_TOKEN={TOKENS[name]}\nDEBUG=true", group_id=user.group_id,
                       tool_call_id=f"{name}{n}", tool_name="read_file")
    wb.messages.append(sid, "assistant", f"{name}-{n}: rotate it", group_id=user.group_id)
    return user.group_id


def _kept(wb: Workbench, table: str, sid: str) -> set[bytes]:
    return {bytes(r[0]) for r in wb.conn.execute(f"SELECT key FROM {table} WHERE session_id = ?", (sid,))}


def _own_texts(wb: Workbench, sid: str) -> tuple[set[bytes], set[bytes]]:
    """(keys of the stored texts of ``sid``'s messages, keys of their masked contents): what its plans mask, and
    what they count."""
    messages = wb.messages.all(sid)
    raw = {text_key(t) for m in messages for t in (m.content, *(c.arguments for c in m.tool_calls)) if t}
    masked = {text_key(m.content) for m in wb.visible_messages(sid) if m.content}
    return raw, masked


@pytest.fixture
def db(tmp_path):
    return tmp_path / "ctx.db"


def _interleaved(wb: Workbench) -> dict[str, str]:
    """Two sessions, worked on in turns in one workbench the ways the product does: plans, a what-if plan (its inputs
    by the workbench, the plan by the planner), the history read for the screen, messages appended in between."""
    ids = {name: wb.new_session(name) for name in TOKENS}
    for n in range(3):
        for name, sid in ids.items():
            _turn(wb, sid, name, n)
    alpha, bravo = ids["alpha"], ids["bravo"]
    wb.visible_messages(alpha)  # the screen shows alpha's history (masked outside any plan)
    plan_of(wb, bravo, "bravo: what should I rotate?", store=False)
    _turn(wb, alpha, "alpha", 3)
    build_plan(inputs_of(wb, alpha, "alpha: what if?"), wb.config.planner, wb.tokenizer)  # the what-if screen
    _turn(wb, bravo, "bravo", 3)
    plan_of(wb, bravo, "bravo: and now?", store=False)
    plan_of(wb, alpha, "alpha: what should I rotate?", store=True)
    plan_of(wb, bravo, "bravo: once more?", store=True)
    return ids


def test_sessions_planned_in_one_process_each_keep_only_their_own_texts(db):
    _forget_this_process()
    with Workbench(db, Config()) as wb:
        ids = _interleaved(wb)
        own = {name: _own_texts(wb, sid) for name, sid in ids.items()}
        for name, sid in ids.items():
            other = "bravo" if name == "alpha" else "alpha"
            masks, counts = _kept(wb, "masked_texts", sid), _kept(wb, "token_counts", sid)
            raw, masked = own[name]
            other_raw, other_masked = own[other]
            assert raw <= masks, f"{name}: masking of its own texts was filed elsewhere"
            assert not masks & other_raw, f"{name} keeps {other}'s masked texts"
            assert masked <= counts, f"{name}: counts of its own texts were filed elsewhere"
            assert not counts & other_masked, f"{name} keeps {other}'s token counts"
            kept_text = " ".join(r[0] for r in wb.conn.execute(
                "SELECT masked FROM masked_texts WHERE session_id = ? AND masked IS NOT NULL", (sid,)))
            assert f"{name}-" in kept_text and f"{other}-" not in kept_text and MASK in kept_text


def test_a_deleted_turn_leaves_no_masked_copy_in_any_session(db):
    _forget_this_process()
    with Workbench(db, Config()) as wb:
        ids = _interleaved(wb)
        alpha = ids["alpha"]
        doomed = _turn(wb, alpha, "alpha", 9)  # its texts masked outside a plan of alpha, then others plan
        wb.visible_messages(alpha)
        plan_of(wb, ids["bravo"], "bravo: after alpha's paste?", store=False)
        build_plan(inputs_of(wb, alpha, "alpha: what if?"), wb.config.planner, wb.tokenizer)
        plan_of(wb, ids["bravo"], "bravo: and again?", store=False)
        gone = [m for m in wb.messages.all(alpha) if m.group_id == doomed]
        keys = {text_key(t) for m in gone for t in (m.content, *(c.arguments for c in m.tool_calls)) if t}
        kept = {bytes(r[0]) for r in wb.conn.execute("SELECT key FROM masked_texts")}
        assert keys <= kept  # kept (in some session's store), as plans masked them
        wb.messages.remove(alpha, doomed)
        plan_of(wb, alpha, "alpha: is it gone?", store=False)
        plan_of(wb, ids["bravo"], "bravo: is it gone?", store=False)
        every = wb.conn.execute("SELECT session_id, key, masked FROM masked_texts").fetchall()
        assert {r[0] for r in every} == set(ids.values())
        assert not [r[0] for r in every if bytes(r[1]) in keys]
        assert not [r[0] for r in every if r[2] and "alpha-9" in r[2]]


def test_what_a_deleted_session_derived_is_not_kept_by_another(db):
    _forget_this_process()
    with Workbench(db, Config()) as wb:
        ids = _interleaved(wb)
        alpha, bravo = ids["alpha"], ids["bravo"]
        _turn(wb, alpha, "alpha", 7)
        wb.visible_messages(alpha)  # masked, not stored yet
        wb.delete_session(alpha)
        plan_of(wb, bravo, "bravo: alone now?", store=False)
        every = wb.conn.execute("SELECT session_id, masked FROM masked_texts").fetchall()
        assert {r[0] for r in every} == {bravo}
        assert not [r for r in every if r[1] and "alpha-" in r[1]]


def test_text_derived_outside_a_session_goes_to_the_session_that_uses_it(db):
    """A message's tokens are counted as it is appended (no session is being planned): the count is held unclaimed,
    and the plan that uses the text claims it for its session only."""
    _forget_this_process()
    with Workbench(db, Config()) as wb:
        alpha, bravo = wb.new_session("alpha"), wb.new_session("bravo")
        said = wb.messages.append(alpha, "user", "alpha says something nobody else says")
        plan_of(wb, bravo, "bravo: anything?", store=False)
        assert text_key(said.content) not in _kept(wb, "token_counts", bravo)
        plan_of(wb, alpha, "alpha: anything?", store=False)
        assert text_key(said.content) in _kept(wb, "token_counts", alpha)


def _with_history(wb: Workbench, turns: int = Config().planner.fused.embed_per_plan) -> str:
    sid = wb.new_session("warm")
    for g in range(turns):
        wb.messages.append(sid, "user", f"question {g}: what about invoice number {g}?")
        wb.messages.append(sid, "assistant", f"answer {g}: invoice {g} is paid in cents")
    return sid


@pytest.mark.parametrize("switch", ["settings", "plan"])
def test_a_strategy_that_embeds_nothing_leaves_nothing_to_warm(tmp_path, switch):
    with Workbench(tmp_path / "w.db", Config()) as wb:
        sid = _with_history(wb)
        wb.embedder = HashingEmbedder()
        wb.update_settings(sid, strategy="fused")
        inputs_of(wb, sid, "which invoice is unpaid?")
        assert wb.history.pending(sid) > 0  # more than a plan embeds itself
        if switch == "settings":
            wb.update_settings(sid, strategy="hybrid")
        else:
            inputs_of(wb, sid, "which invoice is unpaid?", strategy="window")
        assert wb.history.pending(sid) == 0
        wb.update_settings(sid, strategy="fused")
        inputs_of(wb, sid, "which invoice is unpaid?")
        assert wb.history.pending(sid) > 0  # the embedding strategy back: its missing texts again
        wb.delete_session(sid)
        assert wb.history.pending(sid) == 0


def test_the_workbench_starts_no_warm_up_after_switching_to_a_strategy_that_embeds_nothing(tmp_path):
    from ctxbench.service.options import LaunchOptions
    from ctxbench.service.session import WorkbenchSession

    session = WorkbenchSession(LaunchOptions(db_path=tmp_path / "tui.db", strategy="fused"), Config())
    session.open()
    started: list[str] = []
    session._warm_in_background = lambda: started.append(threading.current_thread().name)  # type: ignore[method-assign]
    try:
        for g in range(2 * Config().planner.fused.embed_per_plan):  # more than a plan embeds itself
            session.wb.messages.append(session.session_id, "user", f"question {g} about invoice {g}")
        session.wb.embedder = HashingEmbedder()
        session.plan("which invoice is unpaid?")
        assert len(started) == 1  # the fused plan left texts without a vector
        hybrid = session.with_settings(strategy="hybrid")
        for _ in range(3):
            session.plan("which invoice is unpaid?", hybrid)
        assert len(started) == 1  # hybrid embeds nothing: no warm-up to start
    finally:
        session.close()
