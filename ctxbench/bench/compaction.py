"""``ctxbench bench compaction``: what compaction keeps, measured against no compaction in the same run.

1. **The long session** (``fixtures/sessions/long_session.jsonl``): turn 3 sets a rule about amounts that
   matters late (turn 207 asks for it). The session is compacted once to ``share`` of its history tokens
   (extractive, the rule protected as a standing instruction); then every turn after the summary's last
   turn is replayed under each strategy and budget, with the summary and without it: the share of plans
   that send the rule, and the history tokens sent.
2. **LoCoMo** (held-out conversations): each conversation is compacted (extractive) to half its history
   tokens (and, with ``auto``, to the auto-compact target of each budget); every question is planned at each
   budget under the default strategy with and without the summary. Recall is the share of evidence turns a plan
   sends *verbatim*; ``with summary credit`` also counts an evidence turn one of whose sentences the included
   summary quotes (the extractive summary quotes sentences, so this is a literal check, not a judgement). The
   plain baselines of ``bench locomo`` (BM25+recency RRF, MiniLM, RRF of both) rank the same questions in the
   same run (they never see a summary: the uncompacted reference).
"""
from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ctxbench.config import Config
from ctxbench.records.vocab import EMBEDDING_STRATEGIES
from ctxbench.records.plan_request import PlanRequest

RULE_PREFIX = "Ground rule before we change"
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class RuleRow:
    strategy: str
    budget: int
    compacted: bool
    plans: int
    rule_sent: int
    history_tokens: float  # mean tokens of history items (atoms and summaries) sent

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"history_tokens": round(self.history_tokens, 1)}


@dataclass(frozen=True)
class Compaction:
    tokens_before: int
    tokens_after: int
    summary_tokens: int
    summarised_turns: int
    protected: tuple[str, ...]
    seconds: float


@dataclass(frozen=True)
class LocomoRow:
    variant: str  # none | half | auto | plain (a baseline of ``bench locomo``, never compacted)
    budget: int
    questions: int
    recall: float  # evidence sent verbatim
    credited: float  # ... or quoted by an included summary
    summary_included: float  # share of plans whose summary was sent
    strategy: str = ""  # the planner's strategy, or the baseline's name

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "strategy": self.strategy, "budget": self.budget, "questions": self.questions,
                "recall": round(self.recall, 4), "with_summary_credit": round(self.credited, 4),
                "summary_included": round(self.summary_included, 4)}


@dataclass(frozen=True)
class CompactionReport:
    rule_rows: tuple[RuleRow, ...]
    long_session: Compaction | None
    locomo_rows: tuple[LocomoRow, ...]
    conversations: tuple[str, ...]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": "compaction",
                "long_session": None if self.long_session is None else dataclasses.asdict(self.long_session),
                "rule": [r.to_json() for r in self.rule_rows],
                "locomo": {"conversations": list(self.conversations), "rows": [r.to_json() for r in self.locomo_rows]},
                "seconds": round(self.seconds, 1)}


def _history_tokens(plan: Any) -> int:
    return sum(i.tokens for i in plan.items if i.included and i.section == "history" and i.kind != "current")


def long_session(path: Path, config: Config, *, db_path: Path, budgets: Sequence[int], strategies: Sequence[str],
                 share: float, embedder: Any, say: Callable[[str], None], rule_prefix: str = RULE_PREFIX
                 ) -> tuple[Compaction, list[RuleRow]]:
    """Compact the long session to ``share`` of its history and replay the later turns with and without it."""
    from ctxbench.llm.replay import replay
    from ctxbench.service.compaction import Compactor
    from ctxbench.service.workbench import Workbench

    rows: list[RuleRow] = []
    with Workbench(db_path, config) as wb:
        wb.embedder = embedder
        sid = wb.import_file(path)
        say("long session: embedding its messages")
        for strategy in EMBEDDING_STRATEGIES:  # a plan embeds only a few missing texts itself
            if strategy in strategies:
                wb.history.warm(sid, strategy=strategy)
        rule = next((m for m in wb.messages.history(sid) if m.content.startswith(rule_prefix)), None)
        if rule is None:
            raise ValueError(f"{path}: no message starts with the rule {rule_prefix!r}")
        compactor = Compactor(wb, config)
        t0 = time.perf_counter()
        preview = compactor.preview(sid, target_tokens=int(compactor.history_tokens(sid) * share), use_model=False)
        summary = compactor.apply(preview)
        seconds = time.perf_counter() - t0
        done = Compaction(preview.tokens_before, preview.tokens_after, preview.summary_tokens,
                          len(preview.summarised_groups),
                          tuple(f"turn {r.group_id}: {r.reason}" for r in preview.protected), round(seconds, 2))
        after = max(summary.group_ids)
        for compacted in (True, False):
            if not compacted:
                compactor.undo(sid, summary.id)
            for strategy in strategies:
                for budget in budgets:
                    say(f"long session: {strategy} at {budget:,} ({'compacted' if compacted else 'not compacted'})")
                    sent = plans = tokens = 0
                    for step in replay(wb, sid, budget=budget, strategy=strategy):
                        if step.group_id <= after:
                            continue
                        plans += 1
                        tokens += _history_tokens(step.plan)
                        sent += any(i.included and rule.id in i.message_ids for i in step.plan.items)
                    rows.append(RuleRow(strategy, budget, compacted, plans, sent, tokens / max(plans, 1)))
    return done, rows


def _sentences(text: str) -> list[str]:
    return [" ".join(s.split()) for s in SENTENCE_SPLIT.split(text) if len(s.split()) >= 3]


def _quoted(summary_text: str, message: Any) -> bool:
    flat = " ".join(summary_text.split())
    return any(s in flat for s in _sentences(message.content))


def locomo(paths: Sequence[Path], config: Config, *, db_path: Path, budgets: Sequence[int], embedder: Any,
           say: Callable[[str], None], auto: bool = False, baselines: bool = True) -> list[LocomoRow]:
    """Evidence recall at each budget under the default strategy: no compaction, half (and the auto target of each
    budget with ``auto``); the plain baselines beside them."""
    from ctxbench.bench.locomo import BENCH_SYSTEM_PROMPT, _baselines, _session
    from ctxbench.bench.locomo_data import load_conversation
    from ctxbench.planner import build_plan
    from ctxbench.service.compaction import Compactor
    from ctxbench.service.workbench import Workbench

    config = dataclasses.replace(config, planner=dataclasses.replace(config.planner, system_prompt=BENCH_SYSTEM_PROMPT))
    strategy = config.planner.default_strategy
    tallies: dict[tuple[str, int], list[tuple[float, float, bool]]] = {}
    plain: dict[tuple[str, str, int], Any] = {}
    with Workbench(db_path, config) as wb:
        wb.embedder = embedder
        for path in paths:
            conversation = load_conversation(path)
            sid = _session(wb, conversation, "ab")
            if baselines:
                say(f"locomo {conversation.id}: plain baselines")
                _baselines(wb, conversation, budgets, embedder, plain)
            say(f"locomo {conversation.id}: embedding its messages")
            wb.history.warm(sid)
            by_external = {m.external_id: m for m in wb.messages.history(sid) if m.external_id}
            compactor = Compactor(wb, config)
            history = compactor.history_tokens(sid)
            runs: list[tuple[str, int | None, Sequence[int]]] = [("none", None, budgets), ("half", history // 2, budgets)]
            if auto:
                runs += [("auto", compactor.auto_target(b), (b,)) for b in budgets]
            for variant, target, at in runs:
                summary = None
                if target is not None:
                    preview = compactor.preview(sid, target_tokens=target, use_model=False)
                    summary = compactor.apply(preview)
                say(f"locomo {conversation.id}: {len(conversation.questions)} questions, compaction {variant}")
                for budget, question in ((b, q) for b in at for q in conversation.questions):
                    settings = wb.settings(sid).with_choices(strategy=strategy, budget=budget, mode="off")
                    inputs = wb.planning.inputs(PlanRequest(sid, question.question, settings))
                    plan = build_plan(inputs, config.planner, wb.tokenizer)
                    sent = {e for i in plan.items if i.included for e in i.external_ids}
                    summary_sent = summary is not None and any(
                        i.included and i.kind == "summary" for i in plan.items)
                    verbatim = sum(1 for e in question.evidence if e in sent)
                    credited = sum(1 for e in question.evidence if e in sent or (
                        summary_sent and e in by_external and _quoted(summary.text, by_external[e])))
                    n = len(question.evidence)
                    tallies.setdefault((variant, budget), []).append((verbatim / n, credited / n, summary_sent))
                if summary is not None:
                    compactor.undo(sid, summary.id)
    rows = []
    for (variant, budget), scores in sorted(tallies.items(), key=lambda kv: (kv[0][1], kv[0][0] != "none")):
        if scores:
            rows.append(LocomoRow(variant, budget, len(scores), sum(s[0] for s in scores) / len(scores),
                                  sum(s[1] for s in scores) / len(scores), sum(s[2] for s in scores) / len(scores),
                                  strategy))
    for (name, _roles, budget), tally in sorted(plain.items(), key=lambda kv: (kv[0][2], kv[0][0])):
        recalls = [r for _c, r in tally.scores]
        if recalls:
            mean = sum(recalls) / len(recalls)
            rows.append(LocomoRow("plain", budget, len(recalls), mean, mean, 0.0, name))
    return rows


def run(config: Config, *, db_dir: Path, session: Path | None, locomo_paths: Sequence[Path], budgets: Sequence[int],
        strategies: Sequence[str], share: float, locomo_budget: int | Sequence[int], embedder: Any = None,
        progress: Callable[[str], None] | None = None, rule_prefix: str = RULE_PREFIX, auto: bool = False,
        baselines: bool = True) -> CompactionReport:
    say = progress or (lambda what: None)
    started = time.perf_counter()
    if embedder is None:
        from ctxbench.service.attach import load_embedder

        say("loading the embedding model")
        embedder = load_embedder(config)
    done, rule_rows = (None, [])
    if session is not None:
        done, rule_rows = long_session(session, config, db_path=db_dir / "long.db", budgets=budgets,
                                       strategies=strategies, share=share, embedder=embedder, say=say,
                                       rule_prefix=rule_prefix)
    locomo_rows: list[LocomoRow] = []
    ids: tuple[str, ...] = ()
    if locomo_paths:
        ids = tuple(p.stem for p in locomo_paths)
        at = (locomo_budget,) if isinstance(locomo_budget, int) else tuple(locomo_budget)
        locomo_rows = locomo(locomo_paths, config, db_path=db_dir / "locomo.db", budgets=at, embedder=embedder,
                             say=say, auto=auto, baselines=baselines)
    return CompactionReport(tuple(rule_rows), done, tuple(locomo_rows), ids, time.perf_counter() - started)
