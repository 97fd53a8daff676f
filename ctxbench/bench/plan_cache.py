"""The prompt cache of the planner's own plans, on a coding session replayed turn by turn (``bench perf --only cache``;
the option ``cache_turns`` replays only the session's first turns).

Each user turn of the session is planned as it was sent (``llm.replay``: the history before it, the user's message
as the current turn) under every history strategy and payload order; each plan's payload is compared with the plan
of the turn before (``planner.cache``): the longest prefix they share, in tokens, and what the turn costs with and
without cache reads under the configured price assumption (``[bench.cache_price]``).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ctxbench.bench.perf_records import PerfContext, PhaseTiming
from ctxbench.config import Config
from ctxbench.planner.cache import PLAN_ORDERS, CacheFigures, figures, new_tally
from ctxbench.records.vocab import EMBEDDING_STRATEGIES, STRATEGIES

SESSION = Path(__file__).resolve().parents[2] / "fixtures" / "sessions" / "long_session.jsonl"
CACHE_BUDGETS = (8000,)


@dataclass(frozen=True)
class CacheRow:
    strategy: str
    order: str
    budget: int
    figures: CacheFigures
    plan_seconds: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "order": self.order, "budget": self.budget, **self.figures.to_json()}


def replay_rows(session: Path, config: Config, *, db_path: Path, embedder: Any, budgets: Sequence[int] = CACHE_BUDGETS,
                strategies: Sequence[str] = STRATEGIES, orders: Sequence[str] = PLAN_ORDERS,
                say: Callable[[str], None] = lambda what: None, turns: int | None = None) -> list[CacheRow]:
    """Replay ``session`` turn by turn under each strategy, order and budget (its first ``turns`` turns; all when
    None); a row each."""
    from ctxbench.llm.replay import replay
    from ctxbench.service.workbench import Workbench

    rows: list[CacheRow] = []
    price = config.bench.cache_price
    for order in orders:
        ordered = dataclasses.replace(config, planner=dataclasses.replace(config.planner, order=order))
        with Workbench(db_path, ordered) as wb:
            wb.embedder = embedder
            sid = next((s.id for s in wb.sessions.list()), None) or wb.import_file(session)
            for strategy in strategies:
                if strategy in EMBEDDING_STRATEGIES:
                    wb.history.warm(sid, strategy=strategy)
                for budget in budgets:
                    say(f"cache: {strategy}, {order} order, {budget:,}")
                    tally = new_tally(price)
                    seconds: list[float] = []
                    t0 = time.perf_counter()
                    for step in replay(wb, sid, budget=budget, strategy=strategy):
                        if turns is not None and step.turn > turns:
                            break
                        tally.add(step.plan)
                        t1 = time.perf_counter()
                        seconds.append(t1 - t0)
                        t0 = t1
                    rows.append(CacheRow(strategy, order, budget, figures(tally.costs), tuple(seconds)))
    return rows


def cache_group(ctx: PerfContext) -> list[PhaseTiming]:
    """A phase per strategy and order: the replayed plans' seconds, with the prefix and cost figures as detail."""
    from ctxbench.bench.perf_retrieval import _load_embedder

    embedder = _load_embedder(ctx)
    rows = replay_rows(SESSION, ctx.config, db_path=ctx.workdir / "cache.db", embedder=embedder, say=ctx.progress,
                       turns=ctx.shared.get("cache_turns"))
    price = ctx.config.bench.cache_price
    out = []
    for row in rows:
        f = row.figures
        out.append(PhaseTiming(
            f"plan cache: {row.strategy}, {row.order} order, {row.budget:,} ({f.plans} turns replayed)",
            row.plan_seconds,
            detail=(("prefix share", round(f.prefix_share, 3)), ("$/turn uncached", round(f.uncached_usd, 5)),
                    ("$/turn with cache reads", round(f.cached_usd, 5)), ("price", price.name))))
    return out
