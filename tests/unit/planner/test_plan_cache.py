"""The prompt cache and the planner's own plans: the cache-friendly payload order, the prefix consecutive plans
share, and the cost of a turn with and without cache reads."""
from __future__ import annotations

import dataclasses

import pytest

from ctxbench.config import CachePrice, PlannerConfig
from ctxbench.planner import build_plan, plan_id
from ctxbench.planner.cache import (PrefixTally, figures, new_tally, payload_units, shared_prefix_tokens,
                                    turn_cost)
from ctxbench.records.plans import PlanInputs
from ctxbench.tokens import REPLY_PRIMING, count_messages, get_tokenizer

from planner_helpers import SessionBuilder

TOK = get_tokenizer()
RELEVANCE = PlannerConfig()
CACHE = dataclasses.replace(PlannerConfig(), order="cache")
PRICE = CachePrice(name="test price", input_per_mtok=1.0, read=0.1, write=1.25)


def _session() -> SessionBuilder:
    b = SessionBuilder()
    b.turn("from now on, always answer in British English", "understood")
    for n in range(1, 10):
        b.turn(f"topic {n}: the {'zebra' if n == 2 else 'widget'} layout question number {n} " * 3,
               f"answer {n} " * 15)
    b.turn("what did we say about the zebra layout?", reply="")
    return b


def _inputs(b: SessionBuilder, budget: int = 700, **kw) -> PlanInputs:
    history, current = b.split_current()
    return PlanInputs(session_id=b.session_id, query=current[0].content, history=history, current_turn=current,
                      budget=budget, strategy="fused", state_block="### STATE\nGoal: layout",
                      message_keyword=((5, 3.0), (6, 1.0)), **kw)  # the zebra turn (group 2) matches by keyword


def _kinds(plan) -> list[tuple[str, str]]:
    return [(i.kind, i.reason) for i in sorted(plan.included, key=lambda i: i.order)]


def test_the_cache_order_sends_the_same_items_with_the_query_picked_turns_after_the_others():
    inputs = _inputs(_session())
    today = build_plan(inputs, RELEVANCE, TOK)
    cached = build_plan(inputs, CACHE, TOK)
    assert {i.id for i in cached.included} == {i.id for i in today.included}
    assert cached.used_tokens == today.used_tokens == count_messages(TOK, cached.messages())
    assert sorted(m["content"] for m in cached.messages()) == sorted(m["content"] for m in today.messages())
    order = _kinds(cached)
    assert order[0] == ("system_prompt", "mandatory") and order[-1][0] == "current_turn"
    reasons = [reason for kind, reason in order if kind == "history_atom"]
    picked = [i for i, r in enumerate(reasons) if r in ("keyword_match", "semantic_match")]
    unpicked = [i for i, r in enumerate(reasons) if r not in ("keyword_match", "semantic_match")]
    assert picked and unpicked and max(unpicked) < min(picked)
    state = next(i for i, (kind, _r) in enumerate(order) if kind == "state")
    history = [i for i, (kind, reason) in enumerate(order) if kind == "history_atom"]
    assert history[0] < state < history[-1]  # after the turns kept whatever the query, before the picked ones
    assert [i.order for i in sorted(cached.included, key=lambda i: i.order)] == list(range(len(order)))
    assert _kinds(today)[1][0] == "state"  # today's order: the state block right after the system prompt


def test_the_relevance_order_keeps_the_plan_ids_plans_had_and_the_cache_order_has_its_own():
    inputs = _inputs(_session())
    assert plan_id(inputs, RELEVANCE, TOK.name) == build_plan(inputs, RELEVANCE, TOK).plan_id
    assert plan_id(inputs, CACHE, TOK.name) != plan_id(inputs, RELEVANCE, TOK.name)
    from ctxbench.planner import plan as plan_mod

    digest = plan_mod._config_digest(RELEVANCE)
    fields = dataclasses.asdict(RELEVANCE)
    keep = ("cache_keep_share", "cache_keep_margin", "cache_keep_slack")
    for name in ("order", "cache_page_share", "cache_stable_share", *keep):
        del fields[name]
    import hashlib
    import json

    text = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert digest == hashlib.sha256(text.encode()).hexdigest()  # the digest of the config before the setting
    # the cache order without keeping: the digest it had before the cache-keeping settings
    fields = dataclasses.asdict(CACHE)
    for name in keep:
        del fields[name]
    text = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert plan_mod._config_digest(CACHE) == hashlib.sha256(text.encode()).hexdigest()


def test_a_plan_made_again_shares_its_whole_prompt_and_a_changed_turn_ends_the_prefix():
    b = _session()
    plan = build_plan(_inputs(b), CACHE, TOK)
    units = payload_units(plan)
    total = sum(t for _k, t in units)
    assert total == plan.used_tokens - REPLY_PRIMING  # every token of the prompt, the reply's priming aside
    assert shared_prefix_tokens(units, payload_units(build_plan(_inputs(b), CACHE, TOK))) == total
    assert shared_prefix_tokens(None, units) == 0
    changed = dataclasses.replace(_inputs(b), state_block="### STATE\nGoal: something else")
    other = payload_units(build_plan(changed, CACHE, TOK))
    shared = shared_prefix_tokens(units, other)
    first_change = next(n for n, (a, c) in enumerate(zip(units, other)) if a[0] != c[0])
    assert shared == sum(t for _k, t in units[:first_change]) and 0 < shared < total


def test_a_new_state_block_leaves_the_history_cached_in_the_cache_order_only():
    b = _session()
    changed = dataclasses.replace(_inputs(b), state_block="### STATE\nGoal: something else")
    shares = {}
    for name, config in (("relevance", RELEVANCE), ("cache", CACHE)):
        tally = new_tally(PRICE)
        tally.add(build_plan(_inputs(b), config, TOK))
        shares[name] = tally.add(build_plan(changed, config, TOK)).prefix_share
    assert shares["cache"] > shares["relevance"]


def test_a_cached_turn_reads_the_prefix_and_writes_the_rest():
    cost = turn_cost(1_000_000, 600_000, PRICE)
    assert cost.uncached_usd == pytest.approx(1.0)
    assert cost.cached_usd == pytest.approx(0.6 * 0.1 + 0.4 * 1.25)
    assert cost.prefix_share == pytest.approx(0.6)
    # with little shared a cache costs more than none: every turn writes what it cannot read
    assert turn_cost(1_000_000, 100_000, PRICE).cached_usd > 1.0
    assert turn_cost(1_000, 5_000, PRICE).prefix_tokens == 1_000


def test_the_figures_are_means_over_the_plans_the_first_one_written_whole():
    tally = PrefixTally(PRICE, [])
    b = _session()
    first = tally.add(build_plan(_inputs(b), CACHE, TOK))
    second = tally.add(build_plan(_inputs(b), CACHE, TOK))
    assert first.prefix_tokens == 0 and second.prefix_share == 1.0
    f = figures(tally.costs)
    assert f.plans == 2 and f.prefix_share == pytest.approx(0.5)
    assert f.cached_usd == pytest.approx((first.cached_usd + second.cached_usd) / 2)
    assert figures([]).plans == 0


def test_an_unknown_order_is_refused_by_the_config():
    from ctxbench.config import ConfigError, config_from

    with pytest.raises(ConfigError, match="order"):
        config_from({"planner": {"order": "sideways"}})


def _growing(turns: int) -> SessionBuilder:
    b = SessionBuilder()
    for n in range(turns):
        b.turn(f"step {n}: change the ledger widget number {n} " * 4, f"done with step {n} " * 12)
    b.turn("next step please", reply="")
    return b


def _window_share(config: PlannerConfig, strategy: str = "window") -> list[float]:
    tally = new_tally(PRICE)
    shares = []
    for turns in range(40, 70):
        b = _growing(turns)
        history, current = b.split_current()
        inputs = PlanInputs(session_id="s1", query=current[0].content, history=history, current_turn=current,
                            budget=3000, strategy=strategy)
        shares.append(tally.add(build_plan(inputs, config, TOK)).prefix_share)
    return shares[1:]


def test_a_growing_session_keeps_its_window_cached_when_the_window_starts_at_a_page_boundary():
    sliding = _window_share(RELEVANCE)
    anchored = _window_share(CACHE)
    assert max(sliding) < 0.3  # the oldest turn leaves each turn: only the system prompt stays
    assert sum(anchored) / len(anchored) >= 0.7
    assert 1 <= sum(1 for s in anchored if s < 0.3) <= 6  # the window moves on by a page now and then


def test_the_anchored_window_takes_whole_turns_from_a_boundary_and_never_more_than_the_budget():
    b = _growing(30)
    history, current = b.split_current()
    inputs = PlanInputs(session_id="s1", query=current[0].content, history=history, current_turn=current,
                        budget=1500, strategy="window")
    plan = build_plan(inputs, CACHE, TOK)
    assert plan.used_tokens <= 1500 and not plan.over_budget
    groups = sorted({int(i.id.split(":")[1]) for i in plan.included if i.kind == "history_atom"})
    assert groups == list(range(groups[0], 30))  # the latest turns, none left out between
    assert all(i.detail.startswith("latest turns from a page boundary") for i in plan.included
               if i.kind == "history_atom")
    older = [i for i in plan.items if i.kind == "history_atom" and not i.included]
    assert older and all(i.reason == "over_budget" for i in older)


def test_fused_in_the_cache_order_gives_its_stable_share_to_the_latest_turns_and_the_rest_by_relevance():
    config = dataclasses.replace(CACHE, cache_stable_share=0.5)
    inputs = _inputs(_session(), budget=900)
    plan = build_plan(inputs, config, TOK)
    reasons = [i.reason for i in sorted(plan.included, key=lambda i: i.order) if i.kind == "history_atom"]
    assert "recent_window" in reasons and "keyword_match" in reasons
    window = [i for i in plan.included if i.reason == "recent_window"]
    assert sum(i.tokens for i in window) <= 0.5 * 900
    assert build_plan(inputs, CACHE, TOK).plan_id != plan.plan_id


def test_a_window_of_the_last_turns_counts_its_pages_from_the_sessions_first_turn():
    def shares(window_groups: int) -> list[float]:
        tally = new_tally(PRICE)
        out = []
        for turns in range(40, 60):
            b = _growing(turns)
            history, current = b.split_current()
            inputs = PlanInputs(session_id="s1", query=current[0].content, history=history, current_turn=current,
                                budget=3000, strategy="window", window_groups=window_groups)
            out.append(tally.add(build_plan(inputs, CACHE, TOK)).prefix_share)
        return out[1:]

    limited = shares(35)  # 35 turns do not fit in 3,000 tokens: the budget ends the window, not its 35 turns
    assert sum(limited) / len(limited) >= 0.7
