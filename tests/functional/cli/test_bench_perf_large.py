"""``ctxbench bench perf --large`` at small sizes: it generates its session and repository from a seed, measures
every strategy, replay and indexing, and says which figures meet their targets."""
from __future__ import annotations


import pytest
from click.testing import CliRunner

from ctxbench.bench import perf_large
from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.retrieval.embedder import HashingEmbedder


@pytest.mark.slow
def test_the_load_suite_measures_every_strategy_replay_and_the_index(tmp_path):
    seen: list[str] = []
    report = perf_large.run(Config(), turns=60, symbols=600, repeat=3, embedder=HashingEmbedder(), progress=seen.append)
    names = [p.name for p in report.phases]
    assert report.turns == 60 and report.messages > 60 * 2
    for strategy in perf_large.STRATEGIES:
        warm = next(p for p in report.phases if p.name == f"plan {strategy} @ 60 turns (p95, warm)")
        assert warm.target_s == perf_large.PLAN_TARGET_S and warm.meets is not None
        detail = dict(warm.detail)
        assert detail["runs"] == 3 and 0 < detail["p50_ms"] <= detail["p95_ms"]
        if strategy in perf_large.EMBEDDING:  # the history was embedded first, its time reported
            assert detail["embedded"] > 0 and "query_encode_p50_ms" in detail
        assert any(n.startswith(f"  {strategy}: plan right after a new turn") for n in names)
        reopened = [p for p in report.phases if p.name == f"  {strategy}: first plan, session reopened (fresh process)"]
        if strategy in perf_large.EMBEDDING:
            assert not reopened  # a fresh process would load the embedding model first: not measured
        else:  # timed in a child process that planned the same PlanId from the store's kept masking and counts
            assert len(reopened) == 1 and reopened[0].median_s > 0
            assert dict(reopened[0].detail)["process_s"] > reopened[0].median_s
        store = next(p for p in report.phases if p.name.startswith(f"  {strategy}: store the plan of a new turn"))
        detail = dict(store.detail)
        assert store.target_s == perf_large.STORE_TARGET_S and 0 < store.median_s <= detail["max_ms"] / 1000
        assert detail["read_back_equal"] is True and detail["items"] > 60 and detail["first_store_ms"] > 0
    replay = next(p for p in report.phases if p.name.startswith("replay --json: first record"))
    assert 0 < replay.median_s and replay.target_s == perf_large.REPLAY_FIRST_TARGET_S
    index = next(p for p in report.phases if p.name.startswith("index of "))
    detail = dict(index.detail)
    assert report.symbols == detail["symbols"] and abs(detail["symbols"] - 600) <= 10 and detail["parse_errors"] == 0
    assert detail["edges"] > detail["symbols"] and detail["peak_rss_mib"] > 0
    assert any("embedding the history" in what for what in seen)


def test_the_generated_repository_is_the_same_every_time(tmp_path):
    files = perf_large.write_repository(tmp_path / "a", 400)
    perf_large.write_repository(tmp_path / "b", 400)
    a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.py"))
    assert a == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.py")) and files == 4
    assert all((tmp_path / "a" / p).read_bytes() == (tmp_path / "b" / p).read_bytes() for p in a)


def test_large_options_are_checked():
    runner = CliRunner()
    alone = runner.invoke(main, ["bench", "perf", "--large-turns", "100"])
    assert alone.exit_code == 2 and "go with --large" in alone.stderr
    mixed = runner.invoke(main, ["bench", "perf", "--large", "--only", "plan"])
    assert mixed.exit_code == 2 and "--only" in mixed.stderr
    small = runner.invoke(main, ["bench", "perf", "--large", "--large-turns", "5"])
    assert small.exit_code == 2
