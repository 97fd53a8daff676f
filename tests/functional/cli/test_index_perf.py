"""``ctxbench bench perf`` runs its phase groups on a repository and reports every phase (no timing asserts)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from codegraph_helpers import copy_multi
from ctxbench.bench import perf
from ctxbench.config import Config


@pytest.mark.slow
def test_perf_phases_on_the_fixture(tmp_path):
    repo = copy_multi(tmp_path)
    report = perf.run(repo, Config(), repeat=1,
                      options={"plan_turns": 40, "plan_repeat": 3, "mode_presses": 3, "paint_runs": 1,
                               "cache_turns": 6})
    names = [p.name for p in report.phases]
    assert names[:3] == ["index cold (parse+graph+cards)", "index unchanged", "index one file changed"]
    assert "scaffold" in names and "pagerank (personalized, cached matrix)" in names
    assert any(n.startswith("plan cache: fused, cache order, 8,000 (6 turns replayed)") for n in names)
    by_name = {p.name: p for p in report.phases}
    assert dict(by_name["index unchanged"].detail)["files_parsed"] == 0
    assert dict(by_name["index one file changed"].detail)["files_parsed"] == 1
    assert dict(report.counts)["files"] == 19
    scaffold = dict(by_name["scaffold"].detail)
    assert scaffold["tokens"] <= scaffold["budget_tokens"]
    assert (repo / "pkg" / "util.py").read_text() == (tmp_path / "multi" / "pkg" / "util.py").read_text()
    # the rest of the suite: start-up, plan latency (the default with its query encoded), the mode hotkey, memory
    startup = by_name["start-up imports (all packages)"]
    assert dict(startup.detail)["engine packages imported"] == "none"  # torch & co. stay off the start-up path
    assert any(n.startswith("  import textual") for n in names)
    assert by_name["first paint (ctxbench demo, p95)"].target_s == 0.8
    default = [p for p in report.phases if p.name.startswith("plan default @ ")]
    assert [dict(p.detail)["strategy"] for p in default] == ["fused", "fused"] and default[0].target_s == 0.02
    # one pass per run asked for (repeat=1 here): the row's value is the median of the passes' p95s, each kept
    assert [len(dict(p.detail)["p95_of_each_pass_ms"]) for p in default] == [1, 1]
    assert [len(p.runs) for p in default] == [1, 1] and dict(default[0].detail)["plans_per_pass"] == 3
    assert dict(default[0].detail)["p95_of_each_pass_ms"] == [round(default[0].runs[0] * 1000, 2)]
    assert any(n.startswith("plan window @ 8k") for n in names)
    assert by_name["mode toggle -> replanned meter (p95)"].median_s > 0
    assert by_name["peak memory (MiB)"].median_s > 100
    # cold embedding is reported beside the plain library's encode of the same cards, run in the same process
    cold, plain = by_name["embed cold (seconds per card)"], by_name[
        "embed cold, plain sentence-transformers (baseline, seconds per card)"]
    assert dict(plain.detail)["cards"] == dict(cold.detail)["cards_embedded"] > 0
    assert plain.cpu_runs and cold.cpu_runs and dict(plain.detail)["ctxbench_vs_plain"] > 0


def test_extra_groups_can_be_registered(tmp_path, monkeypatch):
    repo = copy_multi(tmp_path)
    monkeypatch.setattr(perf, "PHASE_GROUPS", list(perf.PHASE_GROUPS))
    seen = {}

    def extra(ctx):
        seen["db"] = ctx.shared["db_path"]
        return [perf.PhaseTiming("extra", (0.5,), 1.0)]

    perf.register_group("extra", extra)
    report = perf.run(repo, Config(), repeat=1, groups=["extra"])
    assert [p.name for p in report.phases][-1] == "extra"
    assert "load_index (cached)" not in [p.name for p in report.phases]  # the graph group was not asked for
    assert seen["db"].name == "perf.db"
    assert report.phases[-1].meets is True


def test_cli_json(tmp_path):
    from ctxbench.cli import main

    repo = copy_multi(tmp_path)
    out = tmp_path / "results"
    result = CliRunner().invoke(main, ["bench", "perf", "--repo", str(repo), "--repeat", "1", "--only", "index",
                                       "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    cold = data["phases"][0]
    assert cold["target_s"] == perf.COLD_TARGET_S and "cpu_median_s" in cold and "meets" in cold
    assert data["rows"][0]["target"] == "<= 2.00 s" and data["machine"]["cores"] >= 1
    saved = json.loads((out / "perf.json").read_text())
    assert saved["report"]["rows"] == data["rows"] and "load_average" in saved["machine"]


def test_an_aider_python_given_relative_to_the_working_folder_reaches_the_bench_as_an_absolute_path(
        tmp_path, monkeypatch):
    """The bench runs aider from another folder: a relative --aider-python (as the help suggests,
    .clients/aider-venv/bin/python) must not become a missing file there; the venv's link itself is kept."""
    from ctxbench.cli import main

    repo = copy_multi(tmp_path)
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to("/bin/true")
    monkeypatch.chdir(tmp_path)
    seen: dict = {}

    def fake_run(source, config, **kwargs):
        seen.update(kwargs.get("options") or {})
        raise SystemExit(0)

    monkeypatch.setattr(perf, "run", fake_run)
    CliRunner().invoke(main, ["bench", "perf", "--repo", str(repo), "--only", "index", "--aider-python",
                              "venv/bin/python"])
    assert seen["aider_python"] == str(tmp_path / "venv" / "bin" / "python")
