"""A long session reopened: its first plan in a fresh process, and storing the plan of a new turn there.

    python benchmarks/long_session_reopen.py --tree before=/tmp/base --tree after=. [--turns 10000] [--runs 5]

One SQLite file on disk holds a generated session of ``--turns`` turns (``plan_latency.synthetic_session``,
imported through the workbench by the first tree). Each tree (a checkout of ctxbench: the code measured) gets
its own copy and plans it once per strategy in a process of its own, each plan stored (the session as the store
keeps it after turns were sent and the workbench closed). Then, in the same command and interleaved (run by run, strategy by
strategy, tree by tree, so a busy machine slows every tree alike):

* **reopen** — a fresh interpreter opens the workbench on the file and plans the session once (not stored):
  the seconds from opening to the plan (wall and CPU of that process) and the PlanId, which must be the same
  for every tree and run (semantic and fused plan without an embedder: the first plan shown before the
  model is loaded);
* **store** — a fresh interpreter opens the workbench and plans the session (the first plan shown), recalls what
  that plan shares with the stored ones (``Planning.recall``, in a tree that has it) and settles the heap as the
  workbench does after showing a session's first plan (``tui.session_link``), then ``--stores`` + 1 times adds a turn,
  makes its plan (not timed) and stores it: the first store (the first in that process) and the others, wall
  and CPU, and whether the plan read back equals the one stored.

Prints p50 / p95 per tree and strategy, with the load average before and after each part; ``--json PATH`` keeps it.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path

from checkouts import load_average, run_in, tree_arg

STRATEGIES = ("window", "hybrid", "levels", "semantic", "fused")
QUERY = "fix the parser and cache handling"

_BUILD = """
import json, sys
from pathlib import Path
from ctxbench.config import load_config
from ctxbench.bench.perf_large import import_session
session_id, messages, seconds = import_session(Path(sys.argv[1]), load_config(None), int(sys.argv[2]))
print(json.dumps({"session": session_id, "messages": messages, "seconds": seconds}))
"""

# the session planned once per strategy, each plan stored as a sent turn's is, then the workbench closed: what a
# user leaves behind
_PREPARE = """
import json, sys, time
from pathlib import Path
from ctxbench.config import load_config
from ctxbench.records.plan_request import PlanRequest
from ctxbench.service.workbench import Workbench
t0 = time.perf_counter()
with Workbench(Path(sys.argv[1]), load_config(None)) as wb:
    for strategy in sys.argv[3].split(","):
        settings = wb.settings(sys.argv[2]).with_choices(strategy=strategy)
        wb.planning.plan(PlanRequest(sys.argv[2], sys.argv[4], settings, store=True))
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""

_REOPEN = """
import json, sys, time
from pathlib import Path
from ctxbench.config import load_config
from ctxbench.records.plan_request import PlanRequest
from ctxbench.service.workbench import Workbench
config = load_config(None)
w0, c0 = time.perf_counter(), time.process_time()
with Workbench(Path(sys.argv[1]), config) as wb:
    settings = wb.settings(sys.argv[2]).with_choices(strategy=sys.argv[3])
    plan = wb.planning.plan(PlanRequest(sys.argv[2], sys.argv[4], settings))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
print(json.dumps({"wall": wall, "cpu": cpu, "plan_id": plan.plan_id}))
"""

_STORE = """
import json, sys, time
from pathlib import Path
from ctxbench.config import load_config
from ctxbench.heap import settle
from ctxbench.records.plan_request import PlanRequest
from ctxbench.service.workbench import Workbench
session, strategy, query, stores = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
walls, cpus, ids = [], [], []
with Workbench(Path(sys.argv[1]), load_config(None)) as wb:
    shown = PlanRequest(session, query, wb.settings(session).with_choices(strategy=strategy))
    wb.planning.plan(shown)
    if hasattr(wb.planning, "recall"):  # as the workbench does once the first plan is shown (a tree that has it)
        wb.planning.recall(shown)
    settle()  # as the workbench does once a session is loaded (tui.session_link)
    for i in range(stores + 1):
        wb.messages.append(session, "user", f"a stored question ({strategy} {i}) about the {query}")
        wb.messages.append(session, "assistant", f"stored answer {i}")
        settings = wb.settings(session).with_choices(strategy=strategy)
        inputs = wb.planning.inputs(PlanRequest(session, query, settings))
        plan = wb.planning.build(inputs)
        w0, c0 = time.perf_counter(), time.process_time()
        wb.plans.save(inputs, plan)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        ids.append(plan.plan_id)
    equal = wb.plans.get(plan.plan_id) == plan
print(json.dumps({"walls": walls, "cpus": cpus, "plan_ids": ids, "items": len(plan.items), "read_back_equal": equal}))
"""


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    at = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[at]


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.0f} / {_pct(values, 95) * 1000:7.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a ctxbench checkout (repeat)")
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per tree and strategy (reopen)")
    parser.add_argument("--stores", type=int, default=5, help="stored plans after the first one (store)")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--template", type=Path, default=None,
                        help="a database file holding the generated session (made and kept here when missing)")
    parser.add_argument("--json", dest="json_path", type=Path, default=None)
    args = parser.parse_args()
    try:
        trees = [tree_arg(spec) for spec in args.tree]
    except ValueError as exc:
        parser.error(str(exc))
    strategies = args.strategies.split(",")
    out: dict = {"turns": args.turns, "runs": args.runs, "stores": args.stores, "load": {}, "trees": {}}
    with tempfile.TemporaryDirectory(prefix="ctxbench-reopen-") as tmp:
        work = Path(tmp)
        template = args.template or work / "template.db"
        meta = template.with_suffix(".json")
        if not template.exists():
            print(f"importing a {args.turns:,}-turn session with {trees[0][0]} ...", flush=True)
            made = run_in(trees[0][1], _BUILD, str(template), str(args.turns))
            meta.write_text(json.dumps(made))
        made = json.loads(meta.read_text())
        session = made["session"]
        print(f"session {session}: {made['messages']:,} messages; load {load_average()}", flush=True)
        out["load"]["start"] = load_average()
        dbs = {}
        for name, tree in trees:
            dbs[name] = work / f"{name}.db"
            shutil.copyfile(template, dbs[name])
            prepared = run_in(tree, _PREPARE, str(dbs[name]), session, ",".join(strategies), QUERY)
            out["trees"][name] = {"tree": str(tree), "prepare_s": prepared["seconds"], "reopen": {}, "store": {}}
            print(f"{name}: planned once per strategy and closed in {prepared['seconds']:.1f} s", flush=True)
        out["load"]["reopen_start"] = load_average()
        for run in range(args.runs):
            for strategy in strategies:
                for name, tree in trees:
                    got = run_in(tree, _REOPEN, str(dbs[name]), session, strategy, QUERY)
                    out["trees"][name]["reopen"].setdefault(strategy, []).append(got)
            print(f"reopen run {run + 1}/{args.runs} done; load {load_average()}", flush=True)
        out["load"]["store_start"] = load_average()
        for strategy in strategies if args.stores else ():
            for name, tree in trees:
                out["trees"][name]["store"][strategy] = run_in(tree, _STORE, str(dbs[name]), session, strategy, QUERY,
                                                             str(args.stores))
        out["load"]["end"] = load_average()
    _report(out, trees, strategies)
    if args.json_path is not None:
        args.json_path.write_text(json.dumps(out, indent=1))


def _report(out: dict, trees: list[tuple[str, Path]], strategies: list[str]) -> None:
    print(f"\n{out['turns']:,} turns; load average (1/5/15 min) {out['load']}")
    if out["runs"]:
        _reopen_table(out, trees, strategies)
    if out["stores"]:
        _store_table(out, trees, strategies)


def _reopen_table(out: dict, trees: list[tuple[str, Path]], strategies: list[str]) -> None:
    print(f"\nfirst plan of the session reopened in a fresh process, ms p50 / p95 of {out['runs']} (target <= 1500)")
    print(f"{'strategy':10} " + " ".join(f"{name + ' wall':>17} {name + ' cpu':>17}" for name, _ in trees) + "  same PlanId")
    for strategy in strategies:
        cells, ids = [], set()
        for name, _ in trees:
            got = out["trees"][name]["reopen"][strategy]
            cells.append(f"{_ms([g['wall'] for g in got]):>17} {_ms([g['cpu'] for g in got]):>17}")
            ids |= {g["plan_id"] for g in got}
        print(f"{strategy:10} " + " ".join(cells) + f"  {len(ids) == 1}")


def _store_table(out: dict, trees: list[tuple[str, Path]], strategies: list[str]) -> None:
    print(f"\nstoring the plan of a new turn, ms: the first in the process; p50 / p95 of the next {out['stores']} "
          "(target <= 150)")
    print(f"{'strategy':10} " + " ".join(f"{name + ' first':>12} {name + ' wall':>17} {name + ' cpu':>17}"
                                         for name, _ in trees) + "  same PlanIds, read back equal")
    for strategy in strategies:
        cells, ids, equal = [], set(), True
        for name, _ in trees:
            got = out["trees"][name]["store"][strategy]
            cells.append(f"{got['walls'][0] * 1000:12.0f} {_ms(got['walls'][1:]):>17} {_ms(got['cpus'][1:]):>17}")
            ids.add(tuple(got["plan_ids"]))
            equal = equal and got["read_back_equal"]
        print(f"{strategy:10} " + " ".join(cells) + f"  {len(ids) == 1}, {equal}")


if __name__ == "__main__":
    main()
