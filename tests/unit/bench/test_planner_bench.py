"""The plan-latency benchmark's session generator, keyword index and report (no timing assertions)."""
from __future__ import annotations

import json

from click.testing import CliRunner

from ctxbench.bench import plan_latency
from ctxbench.store.search import MemoryGroupIndex
from ctxbench.records.messages import strategy_family
from ctxbench.tokens import get_tokenizer


def test_synthetic_session_is_deterministic_and_has_tool_calls_in_two_formats():
    a = plan_latency.synthetic_session(60)
    b = plan_latency.synthetic_session(60)
    assert a == b
    assert {m.group_id for m in a} == set(range(60))
    formats = {strategy_family(m.parsing_strategy) for m in a if m.is_tool_message}
    assert formats == {"openai", "gemini"}
    assert any(len(m.content) > 5000 for m in a if m.role == "tool")


def test_keyword_index_ranks_matching_turns_by_bm25():
    session = plan_latency.synthetic_session(40)
    index = MemoryGroupIndex(session)
    ranking = index.ranking("tabs migrations", plan_latency.KEYWORD_LIMIT)
    assert ranking and ranking[0] == 1  # the early instruction mentions both words
    assert index.ranking("", plan_latency.KEYWORD_LIMIT) == ()


def test_percentile_is_nearest_rank():
    assert plan_latency.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert plan_latency.percentile(list(map(float, range(1, 101))), 95) == 95.0


def test_report_covers_every_strategy_and_budget():
    report = plan_latency.run(get_tokenizer(), turns=30, repeat=2, budgets=(500, 2000))
    assert [(t.name, t.budget) for t in report.plans] == [
        (s, b) for s in plan_latency.DEFAULT_STRATEGIES for b in (500, 2000)
    ]
    assert all(t.runs == 2 and 0 < t.mean_used_tokens <= t.budget for t in report.plans)
    data = report.to_json()
    assert data["turns"] == 30 and data["keyword_query"]["runs"] >= 1
    json.dumps(data)


def test_cli_prints_json():
    from ctxbench.cli import main

    result = CliRunner().invoke(main, ["bench", "plan-latency", "--json", "--turns", "20", "--repeat", "1", "--budget", "800"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {p["name"] for p in data["plans"]} == set(plan_latency.DEFAULT_STRATEGIES)
    assert all(p["budget"] == 800 for p in data["plans"])
