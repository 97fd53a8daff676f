"""Code retrieval quality: Recall@k of gold symbols and whether all gold reaches a Light / Heavy plan.

A query file is JSONL, one ``{id, query, gold: [symbol ids], split?, kind?, lines?}`` per line;
``split`` is ``tune`` or ``holdout`` (default ``tune``), ``kind`` one of ``how``/``where``/``bug``/
``concept``, ``lines`` maps a gold symbol to the ``[first, last]`` file lines that answer the question
(marked for how/bug questions whose gold is a long function). For every query the fused retrieval and two baselines
(keyword-only, semantic-only) run on the same index; Recall@k is the share of a query's gold
symbols among its first k hits, averaged over queries. ``plan_all_gold`` is the share of queries
for which every gold symbol is an included ``symbol_card`` of a plan built at ``budget`` tokens
with an empty history and the query as the current turn.

``excerpt_answer`` is the share of how/bug questions with marked lines whose marked lines are all
inside the excerpt a Heavy plan at ``budget`` sends (the gold card included with its excerpt, the
excerpt's file lines covering the range). ``gold_named`` is the share of a set's questions that
write a gold symbol's name verbatim (case-sensitive, whole word): those are the easy ones.

Several repositories run one after the other (a manifest, ``load_manifest``, names each one's query
file and role, tune or holdout); ``pool`` sums their outcomes per role into pooled figures.

The fused retrieval goes through the app's own seam (``service.attach.ModeRetrieval``) once per Context
Mode, with what a fresh session passes (the names and paths the query mentions, no pins, no
activation) and the scaffold folded to the plan's share: the Light plan is checked on the Light set
(no graph expansion), the Heavy plan on the Heavy set, as users get them. Recall is the Heavy set's
(every source); ``recall_light`` is the Light set's. The baselines restrict the sources and get the
same scaffold.

``capsules`` (when a retriever with capsules in its symbol ranking is given) is the fused retrieval with the
``capsule`` component on (``[capsules] retrieval_weight`` above 0), through the same seam: capsules on vs off
(``fused``) in one run. ``capsule_covers_gold`` is the share of queries for which a capsule the Heavy set
offers covers the file of a gold symbol (capsules as candidates, whatever the symbol ranking).

``pinned_followup`` measures what pins add (personalized retrieval): for each query with two or more
gold symbols, each gold symbol in turn is pinned, as a user would after a first answer, and the
Recall@5/10 of the query's *other* gold symbols is averaged, per mode.
"""
from __future__ import annotations

import json
import re
import statistics
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ctxbench.records.item_refs import card_symbol

KS = (5, 10, 20)
SPLITS = ("tune", "holdout", "all")
VARIANTS: dict[str, tuple[str, ...]] = {
    "fused": ("semantic", "keyword", "name", "graph"),
    "keyword": ("keyword",),
    "semantic": ("semantic",),
}
PLAN_MODES = ("light", "heavy")
PLAN_BUDGET = 8000
KINDS = ("how", "where", "bug", "concept")
EXCERPT_KINDS = ("how", "bug", "")  # the kinds whose marked lines the excerpt check counts ("" = not given)
# holdout2..holdout6: later held-out sets, each written after the one before had been looked at
ROLES = ("tune", "holdout", "holdout2", "holdout3", "holdout4", "holdout5", "holdout6")


class QueryFileError(ValueError):
    """The query file (or the manifest) is not what this benchmark reads."""


@dataclass(frozen=True)
class CodeQuery:
    id: str
    query: str
    gold: tuple[str, ...]
    split: str = "tune"
    kind: str = ""
    lines: tuple[tuple[str, int, int], ...] = ()  # (gold symbol, first line, last line) that answer

    @property
    def names_gold(self) -> bool:
        """True when the question writes a gold symbol's name verbatim (case-sensitive, whole word)."""
        return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(g.rsplit('.', 1)[-1])}(?![A-Za-z0-9_])", self.query)
                   for g in self.gold)


@dataclass(frozen=True)
class QueryOutcome:
    id: str
    split: str
    gold: tuple[str, ...]
    hits: tuple[str, ...]  # symbol ids, best first (up to max(KS))
    recall: tuple[tuple[int, float], ...]
    plan_all_gold: tuple[tuple[str, bool], ...] = ()
    semantic_available: bool = True
    milliseconds: float = 0.0
    recall_light: tuple[tuple[int, float], ...] = ()  # of the Light set (fused only, with plans)
    excerpt_ok: bool | None = None  # the marked lines are inside the Heavy plan's excerpts (None: none marked)
    capsule_gold: bool | None = None  # an offered capsule covers a gold symbol's file (None: no capsule offered)


@dataclass(frozen=True)
class Figures:
    queries: int
    recall: dict[str, float]  # "5" / "10" / "20" -> mean recall
    plan_all_gold: dict[str, float]  # light / heavy -> share of queries
    semantic_available: bool = True
    ms_per_query: float = 0.0
    recall_light: dict[str, float] = field(default_factory=dict)  # the Light set's (fused, with plans)
    excerpt_questions: int = 0  # how/bug questions with marked lines
    excerpt_answer: float = 0.0  # share of them whose marked lines the Heavy plan's excerpts hold
    ms_p95: float = 0.0
    capsule_queries: int = 0  # queries for which the set offered a capsule
    capsule_covers_gold: float = 0.0  # share of all queries for which an offered capsule covers a gold file

    def to_json(self) -> dict[str, Any]:
        out = {"queries": self.queries, "recall": self.recall, "plan_all_gold": self.plan_all_gold,
               "semantic_available": self.semantic_available, "ms_per_query": round(self.ms_per_query, 2),
               "ms_p95": round(self.ms_p95, 2)}
        if self.capsule_queries:
            out["capsules"] = {"queries_offered": self.capsule_queries, "covers_gold": self.capsule_covers_gold}
        if self.recall_light:
            out["recall_light"] = self.recall_light
        if self.excerpt_questions:
            out["excerpt_answer"] = {"questions": self.excerpt_questions, "share": self.excerpt_answer}
        return out


@dataclass(frozen=True)
class PinnedFollowUp:
    """Recall of a query's other gold symbols once one of its gold symbols is pinned."""

    queries: int  # queries with two or more gold symbols
    cases: int  # (query, pinned gold symbol) pairs
    recall: dict[str, dict[str, float]]  # mode -> "5" / "10" -> mean recall of the other gold symbols

    def to_json(self) -> dict[str, Any]:
        return {"queries": self.queries, "cases": self.cases, "recall": self.recall}


@dataclass(frozen=True)
class CodeBenchReport:
    split: str
    variants: dict[str, Figures]
    outcomes: dict[str, tuple[QueryOutcome, ...]] = field(default_factory=dict)
    pinned: PinnedFollowUp | None = None

    def to_json(self) -> dict[str, Any]:
        fused = self.variants["fused"]
        out = {"split": self.split, **fused.to_json()}
        out["baselines"] = {name: fig.to_json() for name, fig in self.variants.items() if name != "fused"}
        if self.pinned is not None:
            out["pinned_followup"] = self.pinned.to_json()
        out["misses"] = [
            {"id": o.id, "missing_at_10": [g for g in o.gold if g not in o.hits[:10]]}
            for o in self.outcomes.get("fused", ()) if any(g not in o.hits[:10] for g in o.gold)
        ]
        return out


def load_queries(path: str | Path) -> list[CodeQuery]:
    queries: list[CodeQuery] = []
    seen: set[str] = set()
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QueryFileError(f"{path}:{n}: not JSON: {exc.msg}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("query"), str) or not data.get("gold"):
            raise QueryFileError(f"{path}:{n}: expected {{id, query, gold: [symbol ids], split?}}")
        gold = data["gold"]
        if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
            raise QueryFileError(f"{path}:{n}: gold must be a list of symbol ids")
        qid = str(data.get("id", n))
        if qid in seen:
            raise QueryFileError(f"{path}:{n}: duplicate id {qid!r}")
        seen.add(qid)
        split = str(data.get("split", "tune"))
        if split not in ("tune", "holdout"):
            raise QueryFileError(f"{path}:{n}: split must be tune or holdout, not {split!r}")
        kind = str(data.get("kind", ""))
        if kind and kind not in KINDS:
            raise QueryFileError(f"{path}:{n}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
        queries.append(CodeQuery(qid, data["query"], tuple(gold), split, kind,
                                 _answer_lines(data.get("lines") or {}, gold, f"{path}:{n}")))
    return queries


def _answer_lines(raw: Any, gold: Sequence[str], where: str) -> tuple[tuple[str, int, int], ...]:
    if not isinstance(raw, dict):
        raise QueryFileError(f"{where}: lines must map gold symbols to [first, last]")
    out = []
    for symbol, span in sorted(raw.items()):
        if symbol not in gold:
            raise QueryFileError(f"{where}: lines names {symbol!r}, which is not a gold symbol")
        if (not isinstance(span, list) or len(span) != 2 or not all(isinstance(x, int) for x in span)
                or not 0 < span[0] <= span[1]):
            raise QueryFileError(f"{where}: lines of {symbol} must be [first, last] with 0 < first <= last")
        out.append((symbol, span[0], span[1]))
    return tuple(out)


@dataclass(frozen=True)
class RepoSpec:
    """One codebase of a benchmark run: its query file, the repository the gold ids refer to, its role."""

    name: str
    repo: Path
    queries: Path
    role: str = "tune"
    source: str = ""


def load_manifest(path: str | Path) -> list[RepoSpec]:
    """The codebases a manifest (TOML, ``[[codebase]]`` tables of name, role, repo, queries) lists; paths
    are relative to the manifest."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise QueryFileError(f"cannot read manifest {path}: {exc}") from exc
    specs: list[RepoSpec] = []
    for i, entry in enumerate(data.get("codebase", []), 1):
        where = f"{path}: codebase {i}"
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("name", "repo", "queries")):
            raise QueryFileError(f"{where}: expected name, repo and queries")
        role = entry.get("role", "tune")
        if role not in ROLES:
            raise QueryFileError(f"{where}: role must be one of {', '.join(ROLES)}, not {role!r}")
        specs.append(RepoSpec(entry["name"], (path.parent / entry["repo"]).resolve(),
                              (path.parent / entry["queries"]).resolve(), role, str(entry.get("source", ""))))
    if not specs:
        raise QueryFileError(f"{path}: no [[codebase]] entries")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise QueryFileError(f"{path}: a codebase name is used twice")
    return specs


def select_split(queries: Iterable[CodeQuery], split: str) -> list[CodeQuery]:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    return [q for q in queries if split == "all" or q.split == split]


def align_gold(queries: Sequence[CodeQuery], symbol_ids: Iterable[str], prefix: str = "") -> tuple[list[CodeQuery], list[str]]:
    """Gold ids as the index names them, and the gold ids the index does not know.

    Gold is written relative to the package (``widget.Widget.focus``); when the indexed root is itself
    a package its ids carry the package name (``textual.widget.Widget.focus``), which ``prefix`` adds.
    """
    known = set(symbol_ids)
    unknown: list[str] = []
    aligned: list[CodeQuery] = []
    for q in queries:
        gold = []
        for g in q.gold:
            if g not in known and prefix and f"{prefix}.{g}" in known:
                g = f"{prefix}.{g}"
            if g not in known:
                unknown.append(g)
            gold.append(g)
        renamed = dict(zip(q.gold, gold))
        lines = tuple((renamed.get(s, s), a, b) for s, a, b in q.lines)
        aligned.append(CodeQuery(q.id, q.query, tuple(gold), q.split, q.kind, lines))
    return aligned, unknown


def recall_at(gold: Sequence[str], hits: Sequence[str], k: int) -> float:
    if not gold:
        return 0.0
    top = set(hits[:k])
    return sum(1 for g in gold if g in top) / len(gold)


def fresh_plan(retrieval_set, query: str, mode: str, config, tokenizer, budget: int = PLAN_BUDGET):
    """The plan of ``query`` as the current turn of an empty session, from ``retrieval_set``."""
    from ctxbench.records.messages import Message
    from ctxbench.planner.plan import build_plan
    from ctxbench.records.plans import PlanInputs

    turn = (Message(id=1, session_id="bench-code", branch_id="main", group_id=0, role="user", content=query),)
    inputs = PlanInputs(session_id="bench-code", query=query, history=(), current_turn=turn, budget=budget,
                        mode=mode, retrieval=retrieval_set, tokenizer=tokenizer.name)
    return build_plan(inputs, config.planner, tokenizer)


def _included_cards(plan) -> dict[str, Any]:
    return {symbol: item for item in plan.items
            if item.kind == "symbol_card" and item.included and (symbol := card_symbol(item.id)) is not None}


def plan_includes_all(retrieval_set, query: str, gold: Sequence[str], mode: str, config, tokenizer,
                      budget: int = PLAN_BUDGET) -> bool:
    """Build a plan with an empty history and ``query`` as the current turn; True if every gold card is included."""
    included = _included_cards(fresh_plan(retrieval_set, query, mode, config, tokenizer, budget))
    return all(g in included for g in gold)


def excerpts_answer(plan, retrieval_set, lines: Sequence[tuple[str, int, int]]) -> bool:
    """True when, for every marked ``(symbol, first, last)``, the plan sends the symbol's card with an
    excerpt whose file lines hold ``first..last``."""
    included = _included_cards(plan)
    hits = {h.symbol: h for h in retrieval_set.hits}
    for symbol, first, last in lines:
        item, hit = included.get(symbol), hits.get(symbol)
        if item is None or hit is None or not hit.excerpt or "excerpt left out" in item.detail:
            return False
        start, end = hit.excerpt_lines
        if not (start <= first and last <= end):
            return False
    return True


def run_code_bench(retriever, queries: Sequence[CodeQuery], config: Any = None, *, split: str = "all",
                   variants: Sequence[str] = tuple(VARIANTS), plans: bool = True,
                   progress: Callable[[str, int, int], None] | None = None,
                   budget: int = PLAN_BUDGET, pinned: bool = True, capsule_retriever: Any = None) -> CodeBenchReport:
    """Run every variant over the queries of ``split`` with the same retriever (same index, same machine).

    ``fused`` retrieves through ``ModeRetrieval`` per mode, as the Workbench does for a fresh session.
    ``config``: the configuration the retriever was made with (default: the default one), for the modes, budgets
    and tokenizer of the plans. ``capsule_retriever``: a retriever over the same index whose config turns the
    capsule component on; it adds the variant ``capsules`` (the fused retrieval through its own seam).
    """
    from ctxbench.service.attach import ModeRetrieval
    from ctxbench.retrieval.mentions import mentions
    from ctxbench.tokens import get_tokenizer

    chosen = select_split(queries, split)
    if config is None:
        from ctxbench.config import Config

        config = Config()
    tokenizer = get_tokenizer(config.tokenizer.name, config.tokenizer.cache_size)
    seam = ModeRetrieval(retriever, config, tokenizer, cache_size=0)
    seams = {"fused": seam}
    if capsule_retriever is not None:
        seams["capsules"] = ModeRetrieval(capsule_retriever, config, tokenizer, cache_size=0)
        variants = tuple(variants) + ("capsules",)
    k_max = max(KS)
    view = retriever.index
    cards = view.cards if view is not None else {}
    modes = ("heavy", "light") if plans else ("heavy",)  # heavy first: its set gives recall and the timing
    figures: dict[str, Figures] = {}
    outcomes: dict[str, tuple[QueryOutcome, ...]] = {}
    for variant in variants:
        done: list[QueryOutcome] = []
        for i, q in enumerate(chosen, 1):
            sets = {}
            ms = 0.0
            for mode in modes:
                started = time.perf_counter()
                if variant in seams:
                    sets[mode] = seams[variant].retrieve(q.query, mode=mode, budget=budget,
                                                         mentioned=mentions(q.query), k=k_max)
                else:
                    sets[mode] = retriever.retrieve(q.query, k_max, sources=VARIANTS[variant],
                                                    scaffold=seam.scaffold_for(mode, budget))
                if mode == modes[0]:
                    ms = (time.perf_counter() - started) * 1000.0
            hits = tuple(h.symbol for h in sets["heavy"].hits)
            plan_flags: tuple[tuple[str, bool], ...] = ()
            light_recall: tuple[tuple[int, float], ...] = ()
            excerpt_ok = None
            if plans:
                flags = []
                for mode in PLAN_MODES:
                    plan = fresh_plan(sets[mode], q.query, mode, config, tokenizer, budget)
                    included = _included_cards(plan)
                    flags.append((mode, all(g in included for g in q.gold)))
                    if mode == "heavy" and q.lines and q.kind in EXCERPT_KINDS:
                        excerpt_ok = excerpts_answer(plan, sets[mode], q.lines)
                plan_flags = tuple(flags)
                if variant == "fused":
                    light_hits = [h.symbol for h in sets["light"].hits]
                    light_recall = tuple((k, recall_at(q.gold, light_hits, k)) for k in KS)
            offered = sets["heavy"].capsules
            gold_paths = {cards[g].path for g in q.gold if g in cards}
            capsule_gold = any(set(c.capsule.paths) & gold_paths for c in offered) if offered else None
            done.append(QueryOutcome(q.id, q.split, q.gold, hits, tuple((k, recall_at(q.gold, hits, k)) for k in KS),
                                     plan_flags, sets["heavy"].semantic_available, ms, light_recall, excerpt_ok,
                                     capsule_gold))
            if progress is not None:
                progress(variant, i, len(chosen))
        outcomes[variant] = tuple(done)
        figures[variant] = summarize(done, plans)
    followup = pinned_followup(seam, chosen, budget) if pinned and "fused" in variants else None
    return CodeBenchReport(split, figures, outcomes, followup)


PINNED_KS = (5, 10)


def pinned_followup(seam, queries: Sequence[CodeQuery], budget: int = PLAN_BUDGET) -> PinnedFollowUp:
    """Each gold symbol of a multi-gold query pinned in turn: mean Recall@5/10 of the other gold symbols
    (the pinned one left out of the hits), through the app's seam per mode."""
    from ctxbench.retrieval.mentions import mentions

    multi = [q for q in queries if len(q.gold) >= 2]
    found: dict[str, dict[int, list[float]]] = {mode: {k: [] for k in PINNED_KS} for mode in PLAN_MODES}
    for q in multi:
        for pin in q.gold:
            others = [g for g in q.gold if g != pin]
            for mode in PLAN_MODES:
                rs = seam.retrieve(q.query, mode=mode, budget=budget, mentioned=mentions(q.query),
                                   pins=("card:" + pin,), k=max(KS))
                hits = [h.symbol for h in rs.hits if h.symbol != pin]
                for k in PINNED_KS:
                    found[mode][k].append(recall_at(others, hits, k))
    cases = sum(len(q.gold) for q in multi)
    recall = {mode: {str(k): round(statistics.fmean(v), 4) if v else 0.0 for k, v in by_k.items()}
              for mode, by_k in found.items()}
    return PinnedFollowUp(len(multi), cases, recall)


def summarize(outcomes: Sequence[QueryOutcome], plans: bool = True) -> Figures:
    n = len(outcomes)
    recall = {str(k): round(statistics.fmean(dict(o.recall)[k] for o in outcomes), 4) if n else 0.0 for k in KS}
    plan_share: dict[str, float] = {}
    if plans:
        for mode in PLAN_MODES:
            plan_share[mode] = round(sum(1 for o in outcomes if dict(o.plan_all_gold).get(mode)) / n, 4) if n else 0.0
    ms = statistics.median(o.milliseconds for o in outcomes) if n else 0.0
    p95 = percentile([o.milliseconds for o in outcomes], 95)
    light: dict[str, float] = {}
    if n and all(o.recall_light for o in outcomes):
        light = {str(k): round(statistics.fmean(dict(o.recall_light)[k] for o in outcomes), 4) for k in KS}
    marked = [o.excerpt_ok for o in outcomes if o.excerpt_ok is not None]
    excerpt = round(sum(marked) / len(marked), 4) if marked else 0.0
    offered = [o.capsule_gold for o in outcomes if o.capsule_gold is not None]
    covers = round(sum(offered) / n, 4) if n and offered else 0.0
    return Figures(n, recall, plan_share, all(o.semantic_available for o in outcomes), ms, light, len(marked),
                   excerpt, p95, len(offered), covers)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``; 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-len(ordered) * q // 100))))
    return ordered[rank - 1]


@dataclass(frozen=True)
class RepoReport:
    """One codebase's run: its report and what the set itself is like."""

    spec: RepoSpec
    symbols: int
    report: CodeBenchReport
    gold_named: float  # share of its questions that write a gold symbol's name verbatim
    unknown_gold: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.spec.name, "role": self.spec.role, "repo": str(self.spec.repo),
                "queries_file": str(self.spec.queries), "symbols": self.symbols, "gold_named": self.gold_named,
                "unknown_gold": list(self.unknown_gold), **self.report.to_json()}


def gold_named_share(queries: Sequence[CodeQuery]) -> float:
    return round(sum(q.names_gold for q in queries) / len(queries), 4) if queries else 0.0


def pool(reports: Sequence[RepoReport], role: str, plans: bool = True) -> dict[str, Figures]:
    """Figures over every question of the repositories of ``role`` (``all``: every repository) as one set."""
    chosen = [r for r in reports if role == "all" or r.spec.role == role]
    out: dict[str, Figures] = {}
    for variant in dict.fromkeys(v for r in chosen for v in r.report.variants):
        outcomes = [o for r in chosen for o in r.report.outcomes.get(variant, ())]
        out[variant] = summarize(outcomes, plans)
    return out
