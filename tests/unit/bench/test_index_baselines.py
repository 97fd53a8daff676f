"""The index group of ``bench perf`` beside its baselines: the ast floor, the cold index against 3x that floor,
a row per phase with its share, and aider's repo map when an aider interpreter is given (no timing asserts)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from codegraph_helpers import copy_multi
from ctxbench.bench import index_baselines, perf
from ctxbench.bench.perf_records import PhaseTiming
from ctxbench.codegraph.walk import walk
from ctxbench.config import Config

AIDER_PYTHON = Path(__file__).resolve().parents[3] / ".clients" / "aider-venv" / "bin" / "python"


def test_the_ast_floor_parses_the_python_files_the_index_walks(tmp_path):
    repo = copy_multi(tmp_path)
    files = walk(repo, Config().index).files
    paths = index_baselines.python_files(repo, files)
    assert paths and all(p.suffix in (".py", ".pyi") for p in paths)
    assert {p.relative_to(repo).as_posix() for p in paths} == {f.path for f in files if f.language == "python"}
    floor = index_baselines.ast_floor(repo, files, 2)
    assert len(floor.runs) == len(floor.cpu_runs) == 2 and dict(floor.detail)["python_files"] == len(paths)


def test_the_phase_table_gives_each_phase_its_share_of_the_cold_median():
    rows = index_baselines.phase_table([[("parse", 1.0), ("store", 3.0)], [("parse", 2.0), ("store", 2.0)]],
                                       [4.0, 4.0], [[("anchors", 0.4)], [("anchors", 0.4)]])
    by_name = {r.name.strip(): r for r in rows}
    assert list(by_name) == ["cold index phase: parse", "cold index phase: store", "after the index: anchors"]
    assert by_name["cold index phase: parse"].runs == (1.0, 2.0)
    assert dict(by_name["cold index phase: parse"].detail)["share_of_index_cold"] == "37.5%"
    assert dict(by_name["cold index phase: store"].detail)["share_of_index_cold"] == "62.5%"
    assert dict(by_name["after the index: anchors"].detail)["share_of_index_cold"] == "10.0%"


def test_the_cold_index_is_held_to_three_times_the_floor_of_the_same_run():
    cold = PhaseTiming("index cold (parse+graph+cards)", (3.0, 5.0, 4.0), cpu_runs=(2.0, 2.0, 2.0))
    floor = PhaseTiming("ast floor", (1.0, 2.0, 1.5), cpu_runs=(1.0, 1.0, 1.0))
    row = index_baselines.versus_floor(cold, floor, 3.0)
    assert row.target_s == 4.5 and row.runs == cold.runs and row.meets is True
    assert dict(row.detail)["x_ast_floor"] == round(4.0 / 1.5, 2) and dict(row.detail)["x_ast_floor_cpu"] == 2.0


def test_the_index_group_reports_floor_ratio_and_phases_beside_the_cold_index(tmp_path):
    repo = copy_multi(tmp_path)
    report = perf.run(repo, Config(), repeat=2, groups=["index"])
    by_name = {p.name.strip(): p for p in report.phases}
    cold, floor = by_name["index cold (parse+graph+cards)"], by_name[
        "ast floor (read + ast.parse every Python file; baseline)"]
    ratio = by_name["index cold vs 3x the ast floor"]
    assert ratio.runs == cold.runs and ratio.target_s == pytest.approx(3 * floor.median_s)
    phases = [n for n in by_name if n.startswith("cold index phase: ")]
    assert [n.split(": ")[1] for n in phases] == ["walk", "diff", "secrets", "parse", "cards", "resolve", "store",
                                                  "capsules"]
    assert [n for n in by_name if n.startswith("after the index: ")] == [
        "after the index: load", "after the index: pagerank", "after the index: anchors"]
    assert "aider repo map, cold (baseline)" not in by_name  # no aider interpreter named


def test_a_broken_aider_interpreter_leaves_a_row_saying_why(tmp_path):
    repo = copy_multi(tmp_path)
    files = walk(repo, Config().index).files
    row = index_baselines.aider_repo_map(Path(sys.executable), repo, files, 1)  # a python without aider
    assert row.runs == () and "aider" in dict(row.detail)["failed"]
    assert not any(p.name.startswith(".aider.tags.cache") for p in repo.iterdir())


@pytest.mark.slow
@pytest.mark.skipif(not AIDER_PYTHON.exists(), reason="aider is installed by `make clients`")
def test_aiders_repo_map_is_timed_cold_over_the_same_files(tmp_path):
    repo = copy_multi(tmp_path)
    files = walk(repo, Config().index).files
    row = index_baselines.aider_repo_map(AIDER_PYTHON, repo, files, 2)
    assert len(row.runs) == 2 and "failed" not in dict(row.detail)
    assert dict(row.detail)["map_chars"] > 0
    assert not any(p.name.startswith(".aider.tags.cache") for p in repo.iterdir())


def test_the_cold_index_cpu_counts_the_child_processes_it_waited_for():
    import subprocess

    busy = "import time\nwhile time.process_time() < 0.3: pass\n"  # a child that spends 0.3 s of CPU, then ends
    with perf._Clock() as clock:
        subprocess.run([sys.executable, "-c", busy], check=True)
    assert clock.cpu >= 0.3
