"""``ctxbench bench locomo``: evidence recall of every history strategy on LoCoMo conversations.

Each conversation is imported as a session (``bench.locomo_data``: one speaker the user, the other the
assistant, every message keeping its dia id as its external id). Each answerable question is the current
turn of a plan — mode Off, no repository, a short conversation system prompt — under every history
strategy at every budget; a question's recall is the share of its evidence dia ids (taken literally) that
the plan's included items carry. The plain baselines (``bench.locomo_baselines``) rank the same turns in
the same run. The default strategy (``planner.default_strategy``) is reported again as ``default``.

Plans are built from inputs read once per question and strategy at the largest budget (only the budget
differs between the budgets' plans); the fused strategy's message vectors are embedded before the
questions, as the workbench's warm-up does.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ctxbench.bench.locomo_baselines import BASELINES, TurnIndex
from ctxbench.bench.locomo_data import ROLE_MAPPINGS, Conversation, load_conversation, to_transcript
from ctxbench.config import Config
from ctxbench.planner.cache import (PLAN_ORDERS, RELEVANCE_ORDER, CacheFigures, PrefixTally, TurnCost, figures,
                                    keeps_previous, new_tally, previous_history)
from ctxbench.records.plans import PreviousHistory
from ctxbench.records.vocab import EMBEDDING_STRATEGIES, STRATEGIES
from ctxbench.records.plan_request import PlanRequest

if TYPE_CHECKING:
    from ctxbench.service.workbench import Workbench

DEFAULT_BUDGETS = (512, 1024, 2048, 4096)
DEFAULT_ROW = "default"
BENCH_SYSTEM_PROMPT = "Answer from the earlier turns of this conversation that ctxbench selected below."
TURN_VECTOR_VERSION = "locomo-turn-1"
EMBED_SEQ = 256


@dataclass(frozen=True)
class Row:
    strategy: str
    budget: int
    recall: float
    questions: int
    kind: str  # ctxbench | baseline | default
    roles: str = ""  # the speaker -> role mapping (ctxbench rows)
    is_strategy: str = ""  # for the default row: the strategy it is
    categories: tuple[tuple[int, float, int], ...] = ()  # (category, recall, questions)
    plan_p50_ms: float | None = None
    plan_p95_ms: float | None = None
    order: str = ""  # the planner's payload order (ctxbench rows)
    cache: CacheFigures | None = None  # prefix shared with the previous question's plan, cost per turn

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"strategy": self.strategy, "budget": self.budget, "recall": round(self.recall, 4),
                               "questions": self.questions, "kind": self.kind}
        if self.is_strategy:
            out["is"] = self.is_strategy
        if self.roles:
            out["roles"] = self.roles
        out["categories"] = {str(c): {"recall": round(r, 4), "questions": n} for c, r, n in self.categories}
        if self.plan_p50_ms is not None:
            out["plan_p50_ms"] = round(self.plan_p50_ms, 2)
            out["plan_p95_ms"] = round(self.plan_p95_ms or 0.0, 2)
        if self.order:
            out["order"] = self.order
        if self.cache is not None:
            out["cache"] = self.cache.to_json()
        return out


@dataclass(frozen=True)
class LocomoReport:
    conversations: tuple[str, ...]
    budgets: tuple[int, ...]
    roles: tuple[str, ...]
    default_strategy: str
    rows: tuple[Row, ...]
    system_prompt_tokens: int
    seconds: float
    orders: tuple[str, ...] = (RELEVANCE_ORDER,)
    cache_price: str = ""  # the named price assumption of the cost columns

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": "locomo", "conversations": list(self.conversations), "budgets": list(self.budgets),
                "roles": list(self.roles), "default_strategy": self.default_strategy, "orders": list(self.orders),
                "cache_price": self.cache_price,
                "system_prompt_tokens": self.system_prompt_tokens, "seconds": round(self.seconds, 1),
                "results": [r.to_json() for r in self.rows]}


@dataclass
class _Tally:
    scores: list[tuple[int, float]] = field(default_factory=list)  # (category, recall) per question
    ms: list[float] = field(default_factory=list)
    costs: list[TurnCost] | None = None  # each plan's prefix and cost (ctxbench rows)


def _recall(evidence: Sequence[str], present: set[str]) -> float:
    return sum(1 for e in evidence if e in present) / len(evidence)


def run(paths: Sequence[Path], config: Config, *, db_path: Path, budgets: Sequence[int] = DEFAULT_BUDGETS,
        strategies: Sequence[str] = STRATEGIES, roles: Sequence[str] = ("ab",), baselines: bool = True,
        embedder: Any = None, progress: Callable[[str], None] | None = None,
        orders: Sequence[str] | None = None) -> LocomoReport:
    """Run the benchmark on the conversation files ``paths``; the sessions go to ``db_path``. ``orders``: the payload
    orders to plan in (default: the configured one); a row per order, the first order's rows named as today.

    Each row also carries the prompt cache's figures (``planner.cache``): the questions of a conversation are asked
    one after another in one session whose history does not change, so each plan's prefix is compared with the
    previous question's plan under the same strategy, budget and order. Where the planner keeps the previous plan's
    history (``planner.cache.keeps_previous``), each plan is handed the previous question's plan of its sequence."""
    from ctxbench.planner import build_plan
    from ctxbench.service.workbench import Workbench

    say = progress or (lambda what: None)
    started = time.perf_counter()
    default = config.planner.default_strategy
    wanted = list(dict.fromkeys([*strategies, default]))
    config = dataclasses.replace(config, planner=dataclasses.replace(config.planner, system_prompt=BENCH_SYSTEM_PROMPT))
    orders = tuple(dict.fromkeys(orders or (config.planner.order,)))
    unknown = [o for o in orders if o not in PLAN_ORDERS]
    if unknown:
        raise ValueError(f"unknown payload order {', '.join(unknown)}; known: {', '.join(PLAN_ORDERS)}")
    planners = {o: dataclasses.replace(config.planner, order=o) for o in orders}
    price = config.bench.cache_price
    tallies: dict[tuple[str, str, int] | tuple[str, str, int, str], _Tally] = {}
    if embedder is None:
        from ctxbench.service.attach import load_embedder

        say("loading the embedding model")
        embedder = load_embedder(config)
    budgets = sorted(set(budgets))
    with Workbench(db_path, config) as wb:
        wb.embedder = embedder
        ids = []
        for path in paths:
            conversation = load_conversation(path)
            ids.append(conversation.id)
            if baselines:
                say(f"{conversation.id}: plain baselines")
                _baselines(wb, conversation, budgets, embedder, tallies)
            for mapping in roles:
                sid = _session(wb, conversation, mapping)
                say(f"{conversation.id} ({mapping}): embedding its messages")
                for strategy in EMBEDDING_STRATEGIES:  # a plan embeds only a few missing texts itself
                    if strategy in wanted:
                        wb.history.warm(sid, strategy=strategy)
                sequences: dict[tuple[str, int, str], PrefixTally] = {}  # one session's plans, in question order
                previous: dict[tuple[str, int, str], PreviousHistory] = {}  # the last plan's, where one keeps it
                for qi, question in enumerate(conversation.questions, 1):
                    if qi % 25 == 0:
                        say(f"{conversation.id} ({mapping}): question {qi}/{len(conversation.questions)}")
                    for strategy in wanted:
                        t0 = time.perf_counter()
                        settings = wb.settings(sid).with_choices(strategy=strategy, budget=budgets[-1], mode="off")
                        inputs = wb.planning.inputs(PlanRequest(sid, question.question, settings))
                        read_ms = (time.perf_counter() - t0) * 1000
                        for budget in budgets:
                            for order in orders:
                                t1 = time.perf_counter()
                                key = (strategy, budget, order)
                                asked = dataclasses.replace(inputs, budget=budget, previous=previous.get(key))
                                plan = build_plan(asked, planners[order], wb.tokenizer)
                                if keeps_previous(planners[order], strategy):  # the next question's plan keeps some
                                    previous[key] = previous_history(plan, asked)
                                tally = tallies.setdefault((strategy, mapping, budget, order), _Tally(costs=[]))
                                tally.ms.append(read_ms + (time.perf_counter() - t1) * 1000)
                                present = {e for item in plan.included for e in item.external_ids}
                                tally.scores.append((question.category, _recall(question.evidence, present)))
                                sequence = sequences.setdefault((strategy, budget, order), new_tally(price))
                                assert tally.costs is not None
                                tally.costs.append(sequence.add(plan))
        prompt_tokens = wb.tokenizer.count(BENCH_SYSTEM_PROMPT)
    rows = _rows(tallies, wanted, roles, budgets, default, baselines, orders)
    return LocomoReport(tuple(ids), tuple(budgets), tuple(roles), default, tuple(rows), prompt_tokens,
                        time.perf_counter() - started, orders, price.name)


def _session(wb: Workbench, conversation: Conversation, mapping: str) -> str:
    """The conversation's session in the bench database: an earlier import with the same messages is reused."""
    transcript = to_transcript(conversation, mapping)
    title = f"locomo {conversation.id} {mapping}"
    for info in wb.sessions.list():
        if info.title == title and info.message_count == len(transcript.messages):
            return info.id
    return wb.import_transcript(transcript, title=title)


def _baselines(wb: Workbench, conversation: Conversation, budgets: Sequence[int], embedder: Any,
               tallies: dict[tuple[str, str, int], _Tally]) -> None:
    from ctxbench.retrieval.history_texts import text_hash

    texts = [t.text for t in conversation.turns]
    key = f"{embedder.key}|{TURN_VECTOR_VERSION}|seq{EMBED_SEQ}"
    hashes = [text_hash(t) for t in texts]
    cached = dict(wb.vectors.load(hashes, key))
    todo = [(h, t) for h, t in dict(zip(hashes, texts)).items() if h not in cached]
    if todo:
        vectors = embedder.encode([t for _h, t in todo], max_seq_length=EMBED_SEQ)
        fresh = list(zip([h for h, _t in todo], vectors))
        wb.vectors.save(fresh, key)
        cached.update(fresh)
    import numpy as np

    index = TurnIndex(texts, np.vstack([cached[h] for h in hashes]), [wb.tokenizer.count(t) for t in texts])
    questions = conversation.questions
    question_vectors = embedder.encode([q.question for q in questions], max_seq_length=EMBED_SEQ)
    for question, vector in zip(questions, question_vectors):
        for name, order in index.rankings(question.question, vector).items():
            for budget in budgets:
                chosen = index.pack(order, budget)
                present = {conversation.turns[i].dia_id for i in chosen}
                tallies.setdefault((name, "", budget), _Tally()).scores.append(
                    (question.category, _recall(question.evidence, present)))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered))) - 1))]


def _row(strategy: str, budget: int, tally: _Tally, kind: str, roles: str = "", is_strategy: str = "",
         order: str = "") -> Row:
    cats: dict[int, list[float]] = {}
    for category, recall in tally.scores:
        cats.setdefault(category, []).append(recall)
    categories = tuple((c, statistics.fmean(v), len(v)) for c, v in sorted(cats.items()))
    recall = statistics.fmean(r for _c, r in tally.scores) if tally.scores else 0.0
    p50 = statistics.median(tally.ms) if tally.ms else None
    p95 = _percentile(tally.ms, 95) if tally.ms else None
    cache = figures(tally.costs) if tally.costs is not None else None
    return Row(strategy, budget, recall, len(tally.scores), kind, roles, is_strategy, categories, p50, p95, order,
               cache)


def _rows(tallies: dict[Any, _Tally], strategies: list[str], roles: Sequence[str],
          budgets: Sequence[int], default: str, baselines: bool, orders: Sequence[str]) -> list[Row]:
    rows: list[Row] = []
    for mapping in roles:
        for order in orders:
            for budget in budgets:
                rows.append(_row(DEFAULT_ROW, budget, tallies[(default, mapping, budget, order)], "default", mapping,
                                 default, order))
            for strategy in strategies:
                rows.extend(_row(strategy, b, tallies[(strategy, mapping, b, order)], "ctxbench", mapping, "", order)
                            for b in budgets)
    if baselines:
        for name in BASELINES:
            rows.extend(_row(name, b, tallies[(name, "", b)], "baseline") for b in budgets)
    return rows


def check_roles(value: str) -> tuple[str, ...]:
    """``ab``, ``ba`` or ``both``; ValueError otherwise."""
    if value == "both":
        return tuple(ROLE_MAPPINGS)
    if value not in ROLE_MAPPINGS:
        raise ValueError(f"unknown role mapping {value!r}; expected ab, ba or both")
    return (value,)
