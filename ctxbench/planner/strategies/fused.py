"""Fused history (ctxbench's default): single messages ranked by meaning and keywords, with their context.

The unit is an **atom** (``planner/atoms.py``), not the whole turn: a user message or a plain reply can
be taken without the rest of its turn; a tool call stays one atom with its results and brings its turn's
user message along. Each atom's relevance to the query is

    base  = z(similarity) + keyword_weight * BM25 / best BM25 of the query
    score = base + neighbour_weight * max(base of the atom before, base of the atom after)
                 + episode_weight * mean of the best ``episode_top`` bases of its episode
                 + speaker_weight  (when the query names the atom's speaker label, "Name: ...", in a history that
                                    reads as a transcript: ``speaker_share`` of its atoms open with a label)
                 + temporal_weight (when the query asks when and the atom says when: "last week", "in May")

``similarity`` is the cosine of the atom's message with the query (``inputs.message_similarity``, embedded
by ``retrieval/history_vectors.py``; z-scored over the atoms that have one, the others get the lowest z; in a
transcript of speakers the messages are compared without their labels and the query without the speakers'
names, so the speaker counts once, here); ``BM25`` comes from the history's own keyword index
(``inputs.message_keyword``). An episode is a run of turns without a pause of ``episode_gap_hours`` (a
sitting; a LoCoMo session).

Filling order, each step only taking what still fits:

1. continuity — the latest ``recent_groups`` turns, within ``recent_share`` of the history budget
   (reason ``recent_window``; a longer turn gives what fits, its user message first); in the cache order with
   ``cache_stable_share`` > 0, the latest turns from a page boundary within that share instead (``planner/cache.py``);
2. standing instructions — user messages that set a rule (``instruction_patterns``: "from now on",
   "ground rule", a sentence opening with "always"/"never", ...), or that the standing-instruction detector
   recognises (``planner/instructions.py``; not in a transcript of speakers), best first within
   ``instruction_share`` (reason ``standing_instruction``: a rule given early still holds late);
3. in the cache order with ``cache_keep_share`` > 0 and the session's previous plan given (``PlanInputs.previous``,
   the user having changed nothing since): a prefix of that plan's history atoms, in its order, while they still
   score near the cut (``planner/cache.py``: ``kept_prefix``; detail ``kept from the previous plan``);
4. every other atom by score, best first (``keyword_match`` when BM25 found it, else ``semantic_match``);
   one that does not fit is skipped and the next one tried, so the budget is filled.

A turn a summary stands in for is never one of the latest turns; its atoms compete in step 3 only when the
query points at them (a keyword match, or a base of at least ``summarised_min_base``), their detail
``recalled from summary sN: …``; the others stay ``summarised``.

Atoms left out are ``over_budget`` with their rank and score; ``window_groups`` > 0 lets only the latest N
turns compete (``outside_window``). Without any similarity or keyword evidence (no embedder yet and no
word of the query found) the atoms are taken newest first and the plan says so.

This module scores the atoms and runs the steps in order; beside it: ``fused_units`` (the competing atoms as
arrays, memoised on the history), ``fused_keep`` (step 3), ``fused_fill`` (step 4's bulk fill and the picks it
writes) and ``fused_explain`` (every atom's shown score, and why one was left out).
"""
from __future__ import annotations

import math
import re

import numpy as np

from ctxbench.config import FusedConfig
from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.planner.cache import fill_anchored, kept_atoms, page_tokens, uses_cache_order
from ctxbench.planner.instructions import MARK_FLAG
from ctxbench.planner.strategies.context import StrategyContext
from ctxbench.planner.strategies.fused_explain import explain
from ctxbench.planner.strategies.fused_fill import fill_rest, record
from ctxbench.planner.strategies.fused_keep import keep_previous
from ctxbench.planner.strategies.fused_units import Units, joined_pattern, units_for
from ctxbench.planner.strategies.window import ANCHORED_DETAIL

NO_EVIDENCE_NOTE = ("fused: nothing in the history matched the query by meaning or keywords yet (embedder not "
                    "ready, or no word found); took the latest messages first")
EPISODES_ONE_BY_ONE = 256  # up to this many episodes, each one's best atoms are found on its own


def _named_speaker(query: str, labels: set[str]) -> str:
    """The one speaker label the query names (as a word), or "" (none, or more than one)."""
    named = [label for label in labels if label and re.search(rf"\b{re.escape(label)}\b", query)]
    return named[0] if len(named) == 1 else ""


def select(selection: HistorySelection, budget: Budget, context: StrategyContext) -> None:
    config = context.config.fused
    inputs = context.inputs
    available = selection.available()
    n_window = inputs.window_groups
    if n_window > 0 and len(available) > n_window:
        for gi in available[:-n_window]:
            selection.set_default(gi, "outside_window", f"older than the last {n_window} turns")
        available = available[-n_window:]
    units = units_for(selection, available, config, context.config.instructions)
    n = units.n
    if not n:
        return
    sim = units.per_unit(inputs.message_similarity, math.nan)
    kw = units.per_unit(inputs.message_keyword, 0.0)

    known = ~np.isnan(sim)
    if not known.any() and not kw.any():
        context.notes.append(NO_EVIDENCE_NOTE)
        score = np.arange(n, dtype=float) / n  # newest first
        _fill(selection, budget, context, units, score, kw, config, by_recency=True)
        return
    z = np.zeros(n)
    if known.any():
        values = sim[known]
        spread = float(values.std()) or 1.0
        z[known] = (values - float(values.mean())) / spread
        z[~known] = float(z[known].min())
    best_kw = float(kw.max())
    base = z + (config.keyword_weight * kw / best_kw if best_kw > 0 else 0.0)

    neighbours = np.full(n, -np.inf)
    if n > 1:
        neighbours[1:] = base[:-1]
        neighbours[:-1] = np.maximum(neighbours[:-1], base[1:])
    neighbours[np.isinf(neighbours)] = 0.0
    score = base + config.neighbour_weight * neighbours
    if config.episode_weight and config.episode_top > 0:
        score += config.episode_weight * _episode_scores(base, units, config)
    if config.speaker_weight and units.transcript(config.speaker_share):
        speaker = _named_speaker(inputs.query, units.label_set)
        if speaker:
            score += config.speaker_weight * np.array([label == speaker for label in units.labels], dtype=float)
    if config.temporal_weight and _asks_when(inputs.query, config):
        score += config.temporal_weight * units.timed
    _fill(selection, budget, context, units, score, kw, config, pointed=(kw > 0) | (base >= config.summarised_min_base))


def _asks_when(query: str, config: FusedConfig) -> bool:
    pattern = joined_pattern(config.temporal_query_patterns)
    return pattern is not None and bool(pattern.search(query))


def _episode_scores(base: np.ndarray, units: Units, config: FusedConfig) -> np.ndarray:
    """Per atom: the mean of the best ``episode_top`` bases of its episode (runs of turns without a long pause),
    summed best first as ``numpy.mean`` sums so few values."""
    episode, count = units.episodes(config.episode_gap_hours)
    top = config.episode_top
    if count <= EPISODES_ONE_BY_ONE:  # episodes are runs of atoms: each one's best few, without sorting them all
        bounds = np.searchsorted(episode, np.arange(count + 1))
        means = np.zeros(count)
        for e in range(count):
            part = base[bounds[e]:bounds[e + 1]]
            if len(part) > top:
                part = np.partition(part, len(part) - top)[len(part) - top:]
            total = 0.0
            for value in sorted(part.tolist(), reverse=True):  # summed best first, as below
                total += value
            means[e] = total / len(part) if len(part) else 0.0
        return means[episode]
    order = np.lexsort((-base, episode))  # by episode, best base first
    ordered = episode[order]
    starts = np.searchsorted(ordered, np.arange(count))
    sizes = np.diff(np.append(starts, len(ordered)))
    total = np.zeros(count)
    taken = np.minimum(sizes, config.episode_top)
    for j in range(config.episode_top):
        has = sizes > j
        total[has] += base[order[starts[has] + j]]
    means = np.divide(total, taken, out=np.zeros(count), where=taken > 0)
    return means[episode]


def _fill(selection: HistorySelection, budget: Budget, context: StrategyContext, units: Units,
          score: np.ndarray, kw: np.ndarray, config: FusedConfig, by_recency: bool = False,
          pointed: np.ndarray | None = None) -> None:
    """``pointed``: the atoms the query points at (only those of turns a summary stands in for compete)."""
    groups = selection.groups
    history_budget = budget.remaining
    n = units.n
    order = n - 1 - np.argsort(-score[::-1], kind="stable")  # best first; ties: the newer atom
    values = score.tolist()  # as Python floats: read one by one for the atoms taken
    explain(selection, units, score, values, order, by_recency)
    if selection.summarised:  # a turn a summary stands in for left the recency window: back only when pointed at
        gone = np.isin(np.asarray(units.gi, dtype=np.int64), np.fromiter(selection.summarised, dtype=np.int64))
        if pointed is not None and not by_recency:
            gone &= ~pointed
        order = order[~gone[order]]

    # 1. continuity: the latest turns (the cache order: a window of them from a page boundary)
    planner = context.config
    anchored = uses_cache_order(planner) and planner.cache_stable_share > 0 and fill_anchored(
        selection, budget.child(int(history_budget * planner.cache_stable_share)), selection.recent(units.latest),
        page_tokens(planner, int(context.inputs.budget * planner.cache_stable_share)), "recent_window",
        ANCHORED_DETAIL)
    latest = selection.recent(units.latest)[-config.recent_groups:] if config.recent_groups > 0 else []
    share = budget.child(int(history_budget * config.recent_share))
    for gi in reversed(latest if not anchored else ()):
        selection.fill_group(gi, share, "recent_window", detail="continuity: one of the latest turns")

    # 2. standing instructions, best first
    share = budget.child(int(history_budget * config.instruction_share))
    # the detector's verdicts count outside a transcript of speakers (there, "we always ..." is talk, not a rule)
    rules = np.flatnonzero(units.rules if units.transcript(config.speaker_share) else units.rules | units.detected)
    for u in rules[np.lexsort((-rules, -score[rules]))].tolist():
        gi, ai = units.gi[u], units.ai[u]
        marked = " (marked by you)" if MARK_FLAG in groups[gi].atoms[ai].flags else ""
        selection.include_atom(gi, ai, share, "standing_instruction",
                               f"standing instruction{marked} given in turn {groups[gi].group_id}: it still holds",
                               with_user=False)

    # 3. the cache-keeping selection: a prefix of the previous plan's history, while it still scores near the cut
    kept = kept_atoms(context.inputs, planner)
    if kept:
        context.kept = keep_previous(selection, budget, units, order, score, values, kw, kept, planner, history_budget,
                                     by_recency)

    # 4. the rest, best first; a misfit is skipped and the next one tried
    chosen, ranks, users = fill_rest(selection, budget, units, order)
    record(selection, units, chosen, ranks, users, values, kw, by_recency)


select.recalls_summarised = True  # type: ignore[attr-defined]
