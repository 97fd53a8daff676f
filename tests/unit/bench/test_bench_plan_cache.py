"""``bench perf --only cache``: a coding session replayed turn by turn, per strategy and payload order, with the
prefix each plan shares with the plan before and the cost of a turn with and without cache reads."""
from __future__ import annotations

from pathlib import Path

from ctxbench.bench.perf import PHASE_GROUPS
from ctxbench.bench.plan_cache import replay_rows
from ctxbench.config import Config
from ctxbench.retrieval.embedder import HashingEmbedder

SESSION = Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "short_session.jsonl"


def test_every_strategy_and_order_is_replayed_with_its_prefix_share_and_cost(tmp_path):
    rows = replay_rows(SESSION, Config(), db_path=tmp_path / "c.db", embedder=HashingEmbedder(), budgets=(2000,),
                       strategies=("window", "fused"), turns=5)
    assert {(r.strategy, r.order) for r in rows} == {(s, o) for s in ("window", "fused")
                                                      for o in ("relevance", "cache")}
    for row in rows:
        f = row.figures
        assert f.plans == len(row.plan_seconds) == 5
        assert 0.0 <= f.prefix_share <= 1.0 and f.uncached_usd > 0 and f.cached_usd > 0
        assert row.to_json()["prefix_share"] == round(f.prefix_share, 4)
    by = {(r.strategy, r.order): r.figures for r in rows}
    assert by[("window", "cache")].prefix_share >= by[("window", "relevance")].prefix_share


def test_the_cache_group_is_one_of_the_perf_groups():
    assert "cache" in dict(PHASE_GROUPS)
