"""The overlay's action keys after the warm-up, in two or more checkouts of ctxbench, alternated in one command.

    python benchmarks/action_keys_ab.py --tree before=/tmp/base --tree after=. [--rounds 8] [--alternations 2]
        [--no-semantic] [--json PATH]

Each tree runs ``ctxbench.bench.ui_actions.run_action_latency`` (what ``ctxbench bench ui --actions`` runs for its
"after the warm-up" row: the workbench on textual's source, warmed up, each key pressed once the app settled from the
one before, key to its effect painted) in a fresh interpreter of its own, tree after tree, ``--alternations`` times,
so a machine that gets busier slows every tree alike. Prints each run's p50 / p95 per key and, per tree, the p95 over
all its runs (the largest of the runs' p95s), with the load average before each run.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from checkouts import load_average, run_in, tree_arg

_RUN = """
import dataclasses, json, sys
from ctxbench.bench.ui import default_repo
from ctxbench.bench.ui_actions import run_action_latency
from ctxbench.config import load_config
config = load_config(None)
config = dataclasses.replace(config, ui=dataclasses.replace(config.ui, live_preview=False))
report = run_action_latency(default_repo(), int(sys.argv[1]), sys.argv[2] == "1", config, phase="idle")
print(json.dumps({action: [stats.runs, stats.p50, stats.p95, stats.max] for action, stats in report.timings}))
"""


def _run(tree: Path, rounds: int, semantic: bool) -> dict[str, list[float]]:
    return run_in(tree, _RUN, str(rounds), "1" if semantic else "0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a ctxbench checkout (repeat)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds of action keys per run (each key once a round)")
    parser.add_argument("--alternations", type=int, default=2, help="runs of each tree, alternated")
    parser.add_argument("--no-semantic", dest="semantic", action="store_false", help="semantic search off")
    parser.add_argument("--json", type=Path, help="keep each run's n, p50, p95 and max per key here")
    args = parser.parse_args()
    try:
        trees = [tree_arg(spec) for spec in args.tree]
    except ValueError as exc:
        parser.error(str(exc))
    out: dict[str, list[dict[str, list[float]]]] = {name: [] for name, _ in trees}
    for turn in range(args.alternations):
        for name, tree in trees:
            print(f"== {name} run {turn + 1} ({load_average()})", flush=True)
            run = _run(tree, args.rounds, args.semantic)
            out[name].append(run)
            for action, (n, p50, p95, top) in run.items():
                print(f"  {action:<14} n={n:<3} p50 {p50:7.1f}  p95 {p95:7.1f}  max {top:7.1f} ms")
    print("the largest p95 of each tree's runs, ms:")
    actions = list(next(iter(out.values()))[0])
    print("  " + " " * 8 + "".join(f"{a:>14}" for a in actions))
    for name, runs in out.items():
        print(f"  {name:<8}" + "".join(f"{max(r[a][2] for r in runs if a in r):14.1f}" for a in actions))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
