"""The cache-keeping selection of ``fused`` on LoCoMo (tune conversations only): recall and prefix share per budget
for each setting of ``[planner] cache_keep_share / cache_keep_margin / cache_keep_slack``, beside today's order.

    PYTHONPATH=. python benchmarks/cache_keep_sweep.py --locomo /work/shared/data/locomo10 --conversations 26
    PYTHONPATH=. python benchmarks/cache_keep_sweep.py --coding     # the bundled coding session instead, at 8k

Each setting is one ``bench.locomo.run`` (fused, orders relevance and cache, roles ab, no plain baselines): its
``relevance`` rows are today's plans, its ``cache`` rows the setting's. One more run gives fused and window today
(both orders, no keeping) for the cost columns. The bound: the share of a fresh fused plan's tokens that the previous
question's fresh plan also sent, as a set in any order, which is the most an ordering could reuse without changing
what is selected.

``--coding`` replays the bundled 211-turn coding session (``bench.plan_cache.SESSION``) turn by turn at 8,000 tokens
with fused, storing each plan so that the planning door hands the next turn its previous plan as a live session
would: today's order, then the settings ``CODING_SETTINGS``. No recall there (no questions with evidence): prefix and
cost only.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from pathlib import Path

# (cache_keep_share, cache_keep_margin, cache_keep_slack)
SETTINGS = (
    (0.5, 2.0, 0.0), (0.7, 4.0, 0.0), (1.0, 1.0, 0.0), (1.0, 1.0, 0.1), (1.0, 1.0, 0.2), (1.0, 1.0, 0.3),
    (1.0, 2.0, 0.2), (1.0, 2.0, 0.3), (1.0, 2.0, 0.4), (1.0, 4.0, 0.3), (0.7, 100.0, 0.0), (0.9, 100.0, 0.0),
)

CODING_SETTINGS = ((1.0, 1.0, 0.2), (0.7, 100.0, 0.0))
CODING_BUDGET = 8000


def _line(label: str, row) -> str:
    c = row.cache
    return (f"  {label:<28}{row.budget:>6}  recall {row.recall:.3f}  prefix {c.prefix_share:.3f}  "
            f"$/turn {c.uncached_usd:.6f} / {c.cached_usd:.6f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--coding", action="store_true", help="replay the bundled coding session instead")
    parser.add_argument("--conversations", default="26")
    parser.add_argument("--budgets", default="512,1024,2048,4096")
    parser.add_argument("--db", type=Path, default=None, help="keep the imported session and vectors here")
    args = parser.parse_args()

    from ctxbench.bench import locomo
    from ctxbench.bench.locomo_data import find_conversations
    from ctxbench.config import Config
    from ctxbench.service.attach import load_embedder

    if args.coding:
        return _coding()
    if args.locomo is None:
        parser.error("give --locomo (or --coding)")
    budgets = tuple(int(b) for b in args.budgets.split(","))
    paths = find_conversations(args.locomo, [c.strip() for c in args.conversations.split(",")])
    base = Config()
    embedder = load_embedder(base)
    with tempfile.TemporaryDirectory(prefix="ctxbench-keep-") as tmp:
        db = args.db or Path(tmp) / "locomo.db"

        def run(planner, strategies=("fused",)):
            config = dataclasses.replace(base, planner=planner)
            return locomo.run(paths, config, db_path=db, budgets=budgets, strategies=strategies, baselines=False,
                              embedder=embedder, orders=("relevance", "cache"))

        print(f"LoCoMo {args.conversations}, roles ab; prefix = share of a plan's tokens the previous question's plan "
              f"opened with; $/turn without / with cache reads")
        today = run(base.planner, ("fused", "window"))
        print(f"== today (no keeping; {today.cache_price})")
        for row in today.rows:
            if row.kind == "ctxbench":
                print(_line(f"{row.strategy} [{row.order}]", row))
        print("== bound: a fresh fused plan's tokens the previous question's fresh plan also sent (any order)")
        for budget, share in _overlap(paths, base, db, budgets, embedder).items():
            print(f"  {budget:>6}  {share:.3f}")
        for share, margin, slack in SETTINGS:
            planner = dataclasses.replace(base.planner, cache_keep_share=share, cache_keep_margin=margin,
                                          cache_keep_slack=slack)
            report = run(planner)
            print(f"== cache_keep_share {share} margin {margin} slack {slack} (order cache)")
            for row in report.rows:
                if row.kind == "ctxbench" and row.order == "cache":
                    print(_line("fused [cache, keeping]", row))
    return 0


def _coding() -> int:
    from ctxbench.bench.plan_cache import SESSION
    from ctxbench.config import Config
    from ctxbench.llm.replay import replay
    from ctxbench.planner.cache import figures, new_tally
    from ctxbench.service.attach import load_embedder
    from ctxbench.service.workbench import Workbench

    base = Config()
    embedder = load_embedder(base)
    runs = [("today, relevance order", {})] + [
        (f"keeping {share} / {margin} / {slack}", dict(order="cache", cache_keep_share=share, cache_keep_margin=margin,
                                                       cache_keep_slack=slack))
        for share, margin, slack in CODING_SETTINGS]
    print(f"{SESSION.name} replayed turn by turn, fused, {CODING_BUDGET:,} tokens; $/turn without / with cache reads")
    for label, settings in runs:
        config = dataclasses.replace(base, planner=dataclasses.replace(base.planner, **settings))
        with tempfile.TemporaryDirectory(prefix="ctxbench-keep-") as tmp, Workbench(Path(tmp) / "c.db", config) as wb:
            wb.embedder = embedder
            sid = wb.import_file(SESSION)
            wb.history.warm(sid, strategy="fused")
            tally = new_tally(config.bench.cache_price)
            keeping = 0
            for step in replay(wb, sid, budget=CODING_BUDGET, strategy="fused", store=True):
                tally.add(step.plan)
                keeping += any("kept from the previous plan" in i.detail for i in step.plan.included)
            f = figures(tally.costs)
            print(f"  {label:<28} plans {f.plans}  prefix {f.prefix_share:.3f}  $/turn {f.uncached_usd:.4f} / "
                  f"{f.cached_usd:.4f}  plans that kept atoms {keeping}", flush=True)
    return 0


def _overlap(paths, base, db, budgets, embedder) -> dict[int, float]:
    from ctxbench.bench import locomo
    from ctxbench.bench.locomo_data import load_conversation
    from ctxbench.planner import build_plan
    from ctxbench.records.plan_request import PlanRequest
    from ctxbench.service.workbench import Workbench

    config = dataclasses.replace(base, planner=dataclasses.replace(base.planner,
                                                                   system_prompt=locomo.BENCH_SYSTEM_PROMPT))
    shares: dict[int, list[float]] = {b: [] for b in budgets}
    with Workbench(db, config) as wb:
        wb.embedder = embedder
        for path in paths:
            conversation = load_conversation(path)
            sid = locomo._session(wb, conversation, "ab")
            wb.history.warm(sid, strategy="fused")
            previous: dict[int, dict[str, int]] = {}
            for question in conversation.questions:
                settings = wb.settings(sid).with_choices(strategy="fused", budget=budgets[-1], mode="off")
                inputs = wb.planning.inputs(PlanRequest(sid, question.question, settings))
                for budget in budgets:
                    plan = build_plan(dataclasses.replace(inputs, budget=budget), config.planner, wb.tokenizer)
                    atoms = {i.id: i.tokens for i in plan.included if i.kind == "history_atom"}
                    total = sum(i.tokens for i in plan.included)
                    if budget in previous:
                        shares[budget].append(sum(t for a, t in atoms.items() if a in previous[budget]) / total)
                    previous[budget] = atoms
    return {b: statistics.fmean(v) for b, v in shares.items()}


if __name__ == "__main__":
    raise SystemExit(main())
