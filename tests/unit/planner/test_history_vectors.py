"""The semantic history strategy's similarity ranking: turn texts, the vector cache, the facade, the real model."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from ctxbench.config import Config, SemanticHistoryConfig
from ctxbench.records.messages import Message, ToolCall
from ctxbench.planner.strategies.semantic import FALLBACK_NOTE
from ctxbench.retrieval.embedder import HashingEmbedder
from counting_embedder import CountingEmbedder
from ctxbench.retrieval.history_texts import turn_text
from ctxbench.retrieval.history_vectors import cache_key, rank_turns
from ctxbench.service.workbench import Workbench
from plan_requests import inputs_of, plan_of

LONG_SESSION = Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "long_session.jsonl"
RULE_START = "Ground rule before we change anything"


class NotReady(HashingEmbedder):
    @property
    def ready(self) -> bool:
        return False


class DictCache:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], np.ndarray] = {}

    def load(self, hashes, key):
        return {h: self.rows[(h, key)] for h in hashes if (h, key) in self.rows}

    def save(self, rows, key):
        for h, v in rows:
            self.rows[(h, key)] = v


def msg(mid: int, group: int, role: str, content: str, **kw) -> Message:
    return Message(id=mid, session_id="s", branch_id="b", group_id=group, role=role, content=content, **kw)


HISTORY = (
    msg(1, 1, "user", "Please keep invoice totals in integer cents everywhere."),
    msg(2, 1, "assistant", "Noted: integer cents for invoice totals."),
    msg(3, 2, "user", "Rename the parser module."),
    msg(4, 2, "assistant", "", tool_calls=(ToolCall("c1", "read_file", '{"path": "parser.py"}'),)),
    msg(5, 2, "tool", "invoice cents invoice cents " * 50, tool_call_id="c1", tool_name="read_file"),
    msg(6, 2, "assistant", "Renamed."),
    msg(7, 3, "user", "Update the changelog."),
    msg(8, 3, "assistant", "Changelog updated."),
)


def test_turn_text_is_the_user_message_then_the_start_of_the_replies_without_tool_output():
    config = SemanticHistoryConfig(embed_reply_chars=12)
    text = turn_text([m for m in HISTORY if m.group_id == 2], config)
    assert text.startswith("Rename the parser module.\n")
    assert text.endswith("Renamed.")  # the only reply text; the tool call and its result are left out
    assert "cents" not in text and "read_file" not in text
    long_reply = turn_text([msg(1, 1, "user", "q"), msg(2, 1, "assistant", "x" * 500)], config)
    assert long_reply == "q\n" + "x" * 12
    capped = turn_text([msg(1, 1, "user", "y" * 5000)], dataclasses.replace(config, embed_max_chars=100))
    assert len(capped) == 100


def test_rank_turns_orders_by_similarity_filters_and_caps():
    config = SemanticHistoryConfig(min_similarity=0.05, candidates=5)
    ranking, stats = rank_turns(HISTORY, "invoice totals in cents", HashingEmbedder(), DictCache(), config)
    assert ranking[0][0] == 1  # the turn that talks about invoice totals, not the one whose tool output does
    assert all(s >= 0.05 for _, s in ranking)
    assert [s for _, s in ranking] == sorted((s for _, s in ranking), reverse=True)
    assert stats.turns == 3 and stats.embedded == 3
    capped, _ = rank_turns(HISTORY, "invoice totals in cents", HashingEmbedder(), DictCache(),
                           dataclasses.replace(config, candidates=1))
    assert capped == ranking[:1]
    strict, _ = rank_turns(HISTORY, "invoice totals in cents", HashingEmbedder(), DictCache(),
                           dataclasses.replace(config, min_similarity=0.99))
    assert strict == ()
    skipped, _ = rank_turns(HISTORY, "invoice totals in cents", HashingEmbedder(), DictCache(), config,
                            skip_groups=(1,))
    assert 1 not in dict(skipped)


def test_rank_turns_embeds_each_turn_once_per_model_and_again_when_it_changes():
    cache = DictCache()
    config = SemanticHistoryConfig(min_similarity=0.0)
    embedder = CountingEmbedder()
    rank_turns(HISTORY, "changelog", embedder, cache, config)
    assert len(embedder.texts) == 3 + 1  # three turns and the query
    embedder.texts.clear()
    rank_turns(HISTORY, "changelog", embedder, cache, config)
    assert embedder.texts == ["changelog"]  # turns come from the cache
    edited = HISTORY[:-1] + (msg(8, 3, "assistant", "Changelog updated and dated."),)
    embedder.texts.clear()
    rank_turns(edited, "changelog", embedder, cache, config)
    assert len(embedder.texts) == 2 and embedder.texts[0].startswith("Update the changelog.")
    longer = dataclasses.replace(config, embed_max_seq_length=128)
    assert cache_key(embedder.key, longer) != cache_key(embedder.key, config)
    embedder.texts.clear()
    rank_turns(HISTORY, "changelog", embedder, cache, longer)
    assert len(embedder.texts) == 4  # another sequence length: other vectors


def test_rank_turns_without_history_or_query_embeds_nothing():
    embedder = CountingEmbedder()
    assert rank_turns((), "anything", embedder, DictCache(), SemanticHistoryConfig())[0] == ()
    assert rank_turns(HISTORY, "  ", embedder, DictCache(), SemanticHistoryConfig())[0] == ()
    assert embedder.texts == []


@pytest.fixture
def wb(tmp_path):
    bench = Workbench(tmp_path / "store.db", Config())
    sid = bench.new_session("semantic")
    bench.messages.append(sid, "user", "Remember: invoice totals are integer cents, never floats.")
    bench.messages.append(sid, "assistant", "Understood: integer cents for invoice totals.")
    for i in range(25):
        bench.messages.append(sid, "user", f"Step {i}: tidy helper number {i} in utils.")
        call = ToolCall(f"call{i}", "read_file", f'{{"path": "utils/h{i}.py"}}')
        bench.messages.append(sid, "assistant", "", tool_calls=(call,))
        bench.messages.append(sid, "tool", f"def helper_{i}():\n" + "    pass\n" * 60, tool_call_id=call.id,
                             tool_name="read_file")
        bench.messages.append(sid, "assistant", f"Helper {i} tidied.")
    bench.session = sid  # type: ignore[attr-defined]
    yield bench
    bench.close()


def _included_groups(plan) -> set[int]:
    return {int(i.id.split(":")[1]) for i in plan.included if i.kind == "history_atom"}


def test_semantic_strategy_pulls_in_the_similar_early_turn(wb):
    sid = wb.session
    query = "how should invoice totals be stored, cents?"
    window = plan_of(wb, sid, query, strategy="window", budget=1200, window_groups=5, store=False)
    assert 1 not in _included_groups(window)
    wb.embedder = HashingEmbedder()
    inputs = inputs_of(wb, sid, query, strategy="semantic", budget=1200)
    assert inputs.semantic_ranking and inputs.semantic_ranking[0][0] == 1
    plan = plan_of(wb, sid, query, strategy="semantic", budget=1200)
    assert 1 in _included_groups(plan)
    first = [i for i in plan.items if i.id.startswith("atom:1:")]
    assert first and {i.reason for i in first} == {"semantic_match"}
    assert "similarity" in first[0].detail
    assert FALLBACK_NOTE not in plan.notes
    again = plan_of(wb, sid, query, strategy="semantic", budget=1200)
    assert again.plan_id == plan.plan_id and again == plan
    assert wb.plans.inputs(plan.plan_id).semantic_ranking == inputs.semantic_ranking


def test_without_a_ready_embedder_the_strategy_falls_back_and_says_so(wb):
    sid = wb.session
    plan = plan_of(wb, sid, "invoice totals?", strategy="semantic", budget=1200, store=False)
    assert FALLBACK_NOTE in plan.notes
    wb.embedder = NotReady()
    assert wb.history.embedder() is None
    assert inputs_of(wb, sid, "invoice totals?", strategy="semantic").semantic_ranking == ()


def test_other_strategies_embed_nothing(wb):
    wb.embedder = CountingEmbedder()
    for strategy in ("window", "hybrid", "levels"):
        plan_of(wb, wb.session, "invoice totals?", strategy=strategy, budget=1200, store=False)
    assert wb.embedder.texts == []


def test_the_model_warmed_for_the_code_index_ranks_history_too(tmp_path):
    """The workbench warms one embedding model for its repository; the semantic history strategy ranks earlier
    turns with that same model (handed over explicitly, not found through wrappers)."""
    from retrieval_fixture import write_repo

    from ctxbench.service.options import LaunchOptions
    from ctxbench.service.session import WorkbenchSession

    embedder = HashingEmbedder()
    options = LaunchOptions(db_path=tmp_path / "tui.db", repo=write_repo(tmp_path / "repo"),
                            embedder_factory=lambda config: embedder)
    session = WorkbenchSession(options, Config())
    session.open()
    try:
        wb = session.wb
        sid = session.session_id
        wb.messages.append(sid, "user", "Remember: invoice totals are integer cents.")
        wb.messages.append(sid, "assistant", "Understood.")
        assert wb.history.embedder() is None  # nothing warmed yet: semantic history falls back to recency
        session.attach_repository(lambda progress: None)
        assert session.semantic_ready and wb.history.embedder() is embedder
        assert inputs_of(wb, sid, "invoice totals in cents", strategy="semantic").semantic_ranking
    finally:
        session.close()


def test_turn_vectors_are_cached_in_the_store(wb, tmp_path):
    wb.embedder = CountingEmbedder()
    inputs_of(wb, wb.session, "invoice totals", strategy="semantic")
    assert len(wb.embedder.texts) == 26 + 1
    with Workbench(tmp_path / "store.db", Config()) as other:
        other.embedder = CountingEmbedder()
        inputs_of(other, wb.session, "invoice totals", strategy="semantic")
        assert other.embedder.texts == ["invoice totals"]


def test_semantic_is_a_setting_the_facade_accepts(wb):
    assert wb.update_settings(wb.session, strategy="semantic").strategy == "semantic"
    wb.embedder = HashingEmbedder()
    plan = plan_of(wb, wb.session, "invoice totals in cents", budget=1200, store=False)
    assert plan.strategy == "semantic" and 1 in _included_groups(plan)


# -- the real model -------------------------------------------------------------------------------

def _long_session_before_the_question(tmp_path: Path) -> Path:
    """The bundled long session up to (not including) turn 207, where the user asks the rule back."""
    lines = LONG_SESSION.read_text(encoding="utf-8").splitlines()
    users = [i for i, line in enumerate(lines) if json.loads(line)["role"] == "user"]
    path = tmp_path / "long_before_207.jsonl"
    path.write_text("\n".join(lines[: users[206]]) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.model
def test_real_model_finds_the_rule_turn_from_a_question_without_its_words(real_embedder, tmp_path):
    # a paraphrase of "what was the rule I gave you about amounts?" sharing no word with the rule's turn
    query = "which instruction did I give you about representing sums of cash?"
    with Workbench(tmp_path / "store.db", Config()) as wb:
        sid = wb.import_file(_long_session_before_the_question(tmp_path))
        rule_group = next(m.group_id for m in wb.messages.history(sid) if m.role == "user" and m.content.startswith(RULE_START))
        assert rule_group not in wb.search.groups(sid, query)  # keyword search cannot find it
        hybrid = plan_of(wb, sid, query, strategy="hybrid", store=False)
        window = plan_of(wb, sid, query, strategy="window", store=False)
        assert rule_group not in _included_groups(hybrid) | _included_groups(window)

        wb.embedder = real_embedder
        first = inputs_of(wb, sid, query, strategy="semantic").semantic_ranking
        # a plan embeds the newest turns only (fused.embed_per_plan; equal texts share a vector) ...
        assert wb.config.planner.fused.embed_per_plan <= len(first) < 206 and rule_group not in dict(first)
        seen = []
        embedded = wb.history.warm(sid, lambda done, total: seen.append((done, total)), strategy="semantic")
        assert embedded > 100 and seen[0] == (0, embedded) and seen[-1] == (embedded, embedded)  # ... the warm-up the rest
        ranking = inputs_of(wb, sid, query, strategy="semantic").semantic_ranking
        assert rule_group in dict(ranking) and len(ranking) > len(first)
        assert wb.history.warm(sid, strategy="semantic") == 0  # nothing left to embed
        plan = plan_of(wb, sid, query, strategy="semantic")
        assert rule_group in _included_groups(plan)
        rule_items = [i for i in plan.included if i.id.startswith(f"atom:{rule_group}:")]
        assert rule_items and all(i.reason == "semantic_match" for i in rule_items)
        assert FALLBACK_NOTE not in plan.notes
