"""``/bench``: the last results of bench locomo and bench perf as a table and a chart, from the palette too."""
from __future__ import annotations

import dataclasses
import json

from ctxbench.bench.results import save_result
from ctxbench.config import BenchConfig
from ctxbench.service.bench_results import load_results
from ctxbench.tui.screens.bench import BenchScreen
from tui_helpers import make_app, quiet_config, settle

LOCOMO = {"conversations": ["47", "48"], "budgets": [1024, 2048], "results": [
    {"strategy": "default", "budget": 1024, "recall": 0.81, "questions": 300, "kind": "default", "is": "fused",
     "roles": "ab", "plan_p95_ms": 18.5},
    {"strategy": "default", "budget": 2048, "recall": 0.88, "questions": 300, "kind": "default", "is": "fused",
     "roles": "ab", "plan_p95_ms": 19.0},
    {"strategy": "window", "budget": 1024, "recall": 0.01, "questions": 300, "kind": "ctxbench", "roles": "ab",
     "plan_p95_ms": 9.0},
    {"strategy": "window", "budget": 2048, "recall": 0.04, "questions": 300, "kind": "ctxbench", "roles": "ab",
     "plan_p95_ms": 9.5},
    {"strategy": "plain rrf minilm+bm25", "budget": 1024, "recall": 0.68, "questions": 300, "kind": "baseline"},
    {"strategy": "plain rrf minilm+bm25", "budget": 2048, "recall": 0.78, "questions": 300, "kind": "baseline"},
]}
PERF = {"rows": [{"name": "first paint (ctxbench demo, p95)", "value": "412.0 ms", "target": "<= 800.0 ms",
                  "meets": True, "detail": {}},
                 {"name": "plan default @ 8k (p95, query encode + keyword search included)", "value": "31.0 ms",
                  "target": "<= 20.0 ms", "meets": False, "detail": {}}]}


def _results(folder):
    save_result("locomo", LOCOMO, folder)
    save_result("perf", PERF, folder)
    return folder


def test_results_are_read_back_per_strategy(tmp_path):
    results = load_results(_results(tmp_path / "r"))
    rows = {r.strategy: r for r in results.recall}
    assert results.budgets == (1024, 2048)
    assert rows["default"].is_strategy == "fused" and rows["default"].recalls == ((1024, 0.81), (2048, 0.88))
    assert rows["plain rrf minilm+bm25"].kind == "baseline" and rows["window"].plan_p95_ms == 9.5
    assert [p.meets for p in results.perf] == [True, False]
    assert "load average" in results.perf_source
    assert load_results(tmp_path / "nothing").empty


def test_an_unreadable_file_is_named(tmp_path):
    (tmp_path / "locomo.json").write_text("{not json", encoding="utf-8")
    results = load_results(tmp_path)
    assert results.empty and results.problems and "locomo.json" in results.problems[0]


async def test_slash_bench_shows_the_table_and_the_chart(tmp_path):
    folder = _results(tmp_path / "results")
    config = dataclasses.replace(quiet_config(), bench=BenchConfig(results_dir=str(folder)))
    app = make_app(tmp_path, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        main.run_slash("/bench")
        for _ in range(50):
            await app.workers.wait_for_complete()
            await pilot.pause()
            if isinstance(app.screen, BenchScreen):
                break
        screen = app.screen
        assert isinstance(screen, BenchScreen)
        text = "\n".join(line.text for line in screen.query_one("#viewer-content").render_lines(
            screen.query_one("#viewer-content").region.reset_offset))
        assert "default (fused)" in text and "0.810" in text and "0.880" in text
        assert "recall at 2,048 tokens" in text and "█" in text
        assert "MISSES" in text and "meets" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, BenchScreen)


async def test_bench_without_results_says_how_to_make_them(tmp_path):
    config = dataclasses.replace(quiet_config(), bench=BenchConfig(results_dir=str(tmp_path / "none")))
    app = make_app(tmp_path, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.main_screen.run_slash("/bench")
        for _ in range(50):
            await app.workers.wait_for_complete()
            await pilot.pause()
            if isinstance(app.screen, BenchScreen):
                break
        assert isinstance(app.screen, BenchScreen) and app.screen.results.empty
        assert "ctxbench bench locomo" in str(app.screen.body())


def test_the_palette_offers_bench():
    from ctxbench.tui.palette import PALETTE_ENTRIES

    assert any(command == "/bench" for _title, _help, command in PALETTE_ENTRIES)
    assert json.dumps(LOCOMO)  # the fixture itself is plain JSON
