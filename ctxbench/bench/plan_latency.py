"""Planning latency benchmark: p50/p95 milliseconds per plan on a long synthetic session.

The session is generated deterministically in memory (no store, no model): ``turns`` turns, each a
user message, zero to three tool calls with results of very different sizes (some from another
provider format, so isolation is exercised), and an assistant reply; a system message and an early
standing instruction open it. Every strategy is timed at every budget, without retrieval.

The hybrid strategy's keyword ranking is an input to the planner (the store computes it with
SQLite FTS5 BM25). It is computed once per query outside the timed call, and the time of that
FTS5 query over the same turns (an in-memory FTS5 table built here) is reported on its own, so the
figure for a hybrid plan can be read as planner time + keyword query time.
"""
from __future__ import annotations

import dataclasses
import gc
import json
import random
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from ctxbench.config import PlannerConfig
from ctxbench.heap import settle as settle_heap
from ctxbench.records.messages import Message, ToolCall
from ctxbench.planner import atoms as atoms_mod
from ctxbench.planner import build_plan
from ctxbench.records.plans import PlanInputs
from ctxbench.store.search import MemoryGroupIndex
from ctxbench.tokens import Tokenizer

DEFAULT_TURNS = 1000
DEFAULT_BUDGETS = (8000, 32000)
DEFAULT_STRATEGIES = ("window", "hybrid", "levels", "semantic")
DEFAULT_REPEAT = 50
QUERY_COUNT = 8
KEYWORD_LIMIT = 200
SEED = 20260121
TARGET_P95_MS = 20.0  # issue 2: p95 per plan without retrieval on the 2-core machine

_TOPICS = (
    "parser", "tokenizer", "ledger", "invoice", "migration", "schema", "cache", "retry", "timeout", "budget",
    "plan", "render", "widget", "theme", "config", "logging", "metrics", "index", "embedding", "search",
    "branch", "session", "pin", "lease", "scaffold", "symbol", "graph", "pagerank", "excerpt", "card",
)
_VERBS = ("fix", "explain", "refactor", "test", "document", "speed up", "review", "rename", "split", "profile")
_TOOLS = ("read_file", "grep", "run_tests", "list_dir", "query_db", "edit_file")
_FILLER = (
    "def handler(request):\n    return process(request.payload)\n",
    "ERROR: assertion failed in test_ledger_balance (expected 10, got 12)\n",
    "src/ledger/core.py:41: class Ledger:\n",
    "OK 132 passed, 2 skipped in 3.41s\n",
)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_TOPICS) if rng.random() < 0.4 else rng.choice(_VERBS) for _ in range(words))


def synthetic_session(turns: int = DEFAULT_TURNS, seed: int = SEED, session_id: str = "bench") -> tuple[Message, ...]:
    """A deterministic session of ``turns`` turns (group ids 0..turns-1) with tool calls in two formats."""
    rng = random.Random(seed)
    out: list[Message] = []
    mid = 0

    def add(group: int, role: str, content: str, **kw: object) -> Message:
        nonlocal mid
        mid += 1
        msg = Message(id=mid, session_id=session_id, branch_id="main", group_id=group, role=role, content=content, **kw)
        out.append(msg)
        return msg

    add(0, "system", "Project rules: Python 3.11, type hints everywhere, tests with pytest.")
    for group in range(turns):
        if group == 1:
            add(group, "user", "From now on always use tabs in the ledger module and never touch the migrations.",
                flags=("instruction",))
        else:
            add(group, "user", f"Please {rng.choice(_VERBS)} the {rng.choice(_TOPICS)} code: {_text(rng, rng.randint(6, 30))}")
        strategy = "gemini" if (group // 10) % 5 == 4 else "openai"  # provider switches: 1 block in 5
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            call_id = f"call_{mid + 1}"
            tool = rng.choice(_TOOLS)
            args = json.dumps({"path": f"src/{rng.choice(_TOPICS)}.py", "q": rng.choice(_TOPICS)})
            add(group, "assistant", "", tool_calls=(ToolCall(call_id, tool, args),), parsing_strategy=strategy)
            size = rng.choice((120, 400, 1500, 6000, 12000))
            body = (rng.choice(_FILLER) * (size // 40 + 1))[:size]
            flags = ("error",) if "ERROR" in body[:80] else ()
            add(group, "tool", body, tool_call_id=call_id, tool_name=tool, parsing_strategy=strategy, flags=flags)
        reply_flags = ("solution",) if rng.random() < 0.05 else ()
        add(group, "assistant", f"Done: {_text(rng, rng.randint(10, 60))}", flags=reply_flags)
    return tuple(out)


def queries(seed: int = SEED, count: int = QUERY_COUNT) -> list[str]:
    rng = random.Random(seed + 1)
    return [f"{rng.choice(_VERBS)} the {rng.choice(_TOPICS)} and {rng.choice(_TOPICS)} handling" for _ in range(count)]


def semantic_ranking(history: Sequence[Message], query: str) -> tuple[tuple[int, float], ...]:
    """A deterministic stand-in for embedding similarity (word overlap), so the semantic path does real work."""
    q = set(query.lower().split())
    sims: dict[int, float] = {}
    for m in history:
        if m.role == "user":
            words = set(m.content.lower().split())
            sims[m.group_id] = len(q & words) / (len(q) or 1)
    ranked = sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple((gid, round(sim, 6)) for gid, sim in ranked if sim > 0)


class GCPauses:
    """Counts full (generation 2) garbage collections and their pauses while active."""

    def __init__(self) -> None:
        self.pauses_ms: list[float] = []
        self._start = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses_ms.append((time.perf_counter() - self._start) * 1000)

    def __enter__(self) -> "GCPauses":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


@dataclass(frozen=True)
class Timing:
    name: str
    budget: int | None
    runs: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    mean_used_tokens: float = 0.0
    frozen_p50_ms: float | None = None  # the same plans with the long-lived heap frozen (gc.freeze)
    frozen_p95_ms: float | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "name": self.name, "budget": self.budget, "runs": self.runs, "p50_ms": round(self.p50_ms, 3),
            "p95_ms": round(self.p95_ms, 3), "max_ms": round(self.max_ms, 3),
            "mean_used_tokens": round(self.mean_used_tokens, 1),
        }
        if self.frozen_p95_ms is not None:
            out["gc_frozen_p50_ms"] = round(self.frozen_p50_ms or 0.0, 3)
            out["gc_frozen_p95_ms"] = round(self.frozen_p95_ms, 3)
        return out


@dataclass(frozen=True)
class PlanLatencyReport:
    turns: int
    messages: int
    repeat: int
    plans: tuple[Timing, ...]
    keyword_query: Timing
    cold_first_plan_ms: float  # first plan after the caches are cleared (renders and counts every turn)
    target_p95_ms: float
    reloaded: Timing | None = None  # window plans over equal but new Message objects (as loaded from a store)
    gc_full_collections: int = 0  # full GCs during the timed plans (they make the tail)
    gc_max_pause_ms: float = 0.0

    @property
    def worst_p95_ms(self) -> float:
        return max(t.p95_ms for t in self.plans)

    @property
    def worst_frozen_p95_ms(self) -> float:
        return max((t.frozen_p95_ms for t in self.plans if t.frozen_p95_ms is not None), default=0.0)

    def to_json(self) -> dict[str, object]:
        return {
            "turns": self.turns, "messages": self.messages, "repeat": self.repeat,
            "target_p95_ms": self.target_p95_ms, "worst_p95_ms": round(self.worst_p95_ms, 3),
            "meets_target": self.worst_p95_ms <= self.target_p95_ms,
            "worst_gc_frozen_p95_ms": round(self.worst_frozen_p95_ms, 3),
            "cold_first_plan_ms": round(self.cold_first_plan_ms, 3),
            "keyword_query": self.keyword_query.to_json(),
            "reloaded_history": self.reloaded.to_json() if self.reloaded else None,
            "gc_full_collections": self.gc_full_collections,
            "gc_max_pause_ms": round(self.gc_max_pause_ms, 3),
            "plans": [t.to_json() for t in self.plans],
        }


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def _timing(name: str, budget: int | None, samples: list[float], used: list[int] | None = None) -> Timing:
    return Timing(name, budget, len(samples), statistics.median(samples), percentile(samples, 95), max(samples),
                  statistics.fmean(used) if used else 0.0)


def run(
    tokenizer: Tokenizer,
    config: PlannerConfig | None = None,
    *,
    turns: int = DEFAULT_TURNS,
    repeat: int = DEFAULT_REPEAT,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    target_p95_ms: float = TARGET_P95_MS,
    progress: Callable[[str], None] | None = None,
) -> PlanLatencyReport:
    config = config or PlannerConfig()
    messages = synthetic_session(turns)
    last_group = turns
    history = messages
    qs = queries()
    current = {
        q: (Message(id=len(messages) + 1, session_id="bench", branch_id="main", group_id=last_group, role="user", content=q),)
        for q in qs
    }
    index = MemoryGroupIndex(history)
    keyword_samples: list[float] = []
    keyword: dict[str, tuple[int, ...]] = {}
    for _ in range(max(1, repeat // len(qs) + 1)):
        for q in qs:
            t0 = time.perf_counter()
            keyword[q] = index.ranking(q, KEYWORD_LIMIT)
            keyword_samples.append((time.perf_counter() - t0) * 1000)
    semantic = {q: semantic_ranking(history, q) for q in qs}

    def inputs(q: str, strategy: str, budget: int) -> PlanInputs:
        return PlanInputs(
            session_id="bench", query=q, history=history, current_turn=current[q], budget=budget, mode="off",
            strategy=strategy, window_groups=0, provider_family="openai", system_prompt=config.system_prompt,
            keyword_ranking=keyword[q] if strategy == "hybrid" else (),
            semantic_ranking=semantic[q] if strategy == "semantic" else (), tokenizer=tokenizer.name,
        )

    atoms_mod.clear_caches()
    t0 = time.perf_counter()
    build_plan(inputs(qs[0], strategies[0], budgets[0]), config, tokenizer)
    cold = (time.perf_counter() - t0) * 1000

    timings: list[Timing] = []
    pauses = GCPauses()
    with pauses:
        timings = _time_strategies(strategies, budgets, repeat, qs, inputs, config, tokenizer, progress)
    # Again as the workbench runs: after loading it settles the heap (ctxbench.heap.settle: collect, then
    # freeze what is alive), so full collections skip the session and the planner's caches.
    settle_heap()
    try:
        frozen = _time_strategies(strategies, budgets, repeat, qs, inputs, config, tokenizer,
                                  (lambda what: progress(what + " (gc frozen)")) if progress else None)
    finally:
        gc.unfreeze()
    timings = [dataclasses.replace(t, frozen_p50_ms=f.p50_ms, frozen_p95_ms=f.p95_ms) for t, f in zip(timings, frozen)]
    # The session facade loads the history from SQLite for every plan: equal messages, new objects.
    if progress:
        progress(f"window @ {budgets[0]} over reloaded history")
    samples = []
    for i in range(repeat):
        reloaded = tuple(dataclasses.replace(m, content=_copy_str(m.content)) for m in history)
        plan_inputs = dataclasses.replace(inputs(qs[i % len(qs)], "window", budgets[0]), history=reloaded)
        t0 = time.perf_counter()
        build_plan(plan_inputs, config, tokenizer)
        samples.append((time.perf_counter() - t0) * 1000)
    return PlanLatencyReport(
        turns=turns, messages=len(messages), repeat=repeat, plans=tuple(timings),
        keyword_query=_timing("fts5_bm25_query", None, keyword_samples), cold_first_plan_ms=cold,
        target_p95_ms=target_p95_ms, reloaded=_timing("window_reloaded_history", budgets[0], samples),
        gc_full_collections=len(pauses.pauses_ms), gc_max_pause_ms=max(pauses.pauses_ms, default=0.0),
    )


def _time_strategies(
    strategies: Sequence[str],
    budgets: Sequence[int],
    repeat: int,
    qs: list[str],
    inputs: Callable[[str, str, int], PlanInputs],
    config: PlannerConfig,
    tokenizer: Tokenizer,
    progress: Callable[[str], None] | None,
) -> list[Timing]:
    timings: list[Timing] = []
    for strategy in strategies:
        for budget in budgets:
            if progress:
                progress(f"{strategy} @ {budget}")
            samples: list[float] = []
            used: list[int] = []
            build_plan(inputs(qs[0], strategy, budget), config, tokenizer)  # warm the strategy's own caches
            for i in range(repeat):
                plan_inputs = inputs(qs[i % len(qs)], strategy, budget)
                t0 = time.perf_counter()
                plan = build_plan(plan_inputs, config, tokenizer)
                samples.append((time.perf_counter() - t0) * 1000)
                used.append(plan.used_tokens)
            timings.append(_timing(strategy, budget, samples, used))
    return timings


def _copy_str(text: str) -> str:
    """An equal string that is a different object (as a fresh read from SQLite would be)."""
    return (text + " ")[:-1]
