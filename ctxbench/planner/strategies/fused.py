"""Fused history (ctxbench's default): single messages ranked by meaning and keywords, with their context.

The unit is an **atom** (``planner/atoms.py``), not the whole turn: a user message or a plain reply can
be taken without the rest of its turn; a tool call stays one atom with its results and brings its turn's
user message along. Each atom's relevance to the query is

    base  = z(similarity) + keyword_weight * BM25 / best BM25 of the query
    score = base + neighbour_weight * max(base of the atom before, base of the atom after)
                 + episode_weight * mean of the best ``episode_top`` bases of its episode
                 + speaker_weight  (when the query names the atom's speaker label, "Name: ...")

``similarity`` is the cosine of the atom's message with the query (``inputs.message_similarity``, embedded
by ``retrieval/history_vectors.py``; z-scored over the atoms that have one, the others get the lowest z);
``BM25`` comes from the store's message index (``inputs.message_keyword``). An episode is a run of turns
without a pause of ``episode_gap_hours`` (a sitting; a LoCoMo session).

Filling order, each step only taking what still fits:

1. continuity — the latest ``recent_groups`` turns, within ``recent_share`` of the history budget
   (reason ``recent_window``; a longer turn gives what fits, its user message first);
2. standing instructions — user messages that set a rule (``instruction_patterns``: "from now on",
   "ground rule", a sentence opening with "always"/"never", ...), best first within
   ``instruction_share`` (reason ``standing_instruction``: a rule given early still holds late);
3. every other atom by score, best first (``keyword_match`` when BM25 found it, else ``semantic_match``);
   one that does not fit is skipped and the next one tried, so the budget is filled.

Atoms left out are ``over_budget`` with their rank and score; ``window_groups`` > 0 lets only the latest N
turns compete (``outside_window``). Without any similarity or keyword evidence (no embedder yet and no
word of the query found) the atoms are taken newest first and the plan says so.
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from functools import lru_cache

import numpy as np

from ctxbench.config import FusedConfig
from ctxbench.planner.atoms import ATOM_CALL, ATOM_USER, GroupView
from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.planner.strategies.context import StrategyContext

NO_EVIDENCE_NOTE = ("fused: nothing in the history matched the query by meaning or keywords yet (embedder not "
                    "ready, or no word found); took the latest messages first")
SPEAKER_LABEL = re.compile(r"^\s*(?:\[[^\]\n]{1,80}\]\s*)?([A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30}){0,2}):\s")


@lru_cache(maxsize=16)
def _instruction_pattern(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    parts = [p for p in patterns if p]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE | re.MULTILINE) if parts else None


def _group_facts(group: GroupView, config: FusedConfig) -> tuple[tuple[str, ...], tuple[bool, ...], float]:
    """(speaker label, standing instruction?) per atom, and the turn's time (epoch seconds, NaN if unknown);
    memoised on the cached group view."""
    key = ("fused", config.instruction_patterns)
    hit = group.memo.get(key)
    if hit is None:
        pattern = _instruction_pattern(config.instruction_patterns)
        labels: list[str] = []
        rules: list[bool] = []
        for atom in group.atoms:
            first = atom.messages[0].get("content") if atom.messages else ""
            found = SPEAKER_LABEL.match(first) if isinstance(first, str) and first else None
            labels.append(found.group(1) if found else "")
            rules.append(atom.kind == ATOM_USER and pattern is not None and bool(pattern.search(atom.user_text)))
        hit = (tuple(labels), tuple(rules), _epoch(group.messages[0].created_at if group.messages else ""))
        group.memo[key] = hit
    return hit


def _epoch(stamp: str) -> float:
    try:
        return datetime.fromisoformat(stamp).timestamp() if stamp else math.nan
    except ValueError:
        return math.nan


def _named_speaker(query: str, labels: set[str]) -> str:
    """The one speaker label the query names (as a word), or "" (none, or more than one)."""
    named = [label for label in labels if label and re.search(rf"\b{re.escape(label)}\b", query)]
    return named[0] if len(named) == 1 else ""


def select(selection: HistorySelection, budget: Budget, context: StrategyContext) -> None:
    config = context.config.fused
    inputs = context.inputs
    groups = selection.groups
    available = selection.available()
    n_window = inputs.window_groups
    if n_window > 0 and len(available) > n_window:
        for gi in available[:-n_window]:
            selection.set_default(gi, "outside_window", f"older than the last {n_window} turns")
        available = available[-n_window:]

    units: list[tuple[int, int]] = []
    labels: list[str] = []
    rules: list[bool] = []
    times: list[float] = []
    for gi in available:
        group = groups[gi]
        group_labels, group_rules, when = _group_facts(group, config)
        for ai, atom in enumerate(group.atoms):
            if not atom.exclusion:
                units.append((gi, ai))
                labels.append(group_labels[ai])
                rules.append(group_rules[ai])
                times.append(when)
    if not units:
        return
    n = len(units)
    similarity = dict(inputs.message_similarity)
    keyword = dict(inputs.message_keyword)
    sim = np.full(n, np.nan)
    kw = np.zeros(n)
    for u, (gi, ai) in enumerate(units):
        ids = groups[gi].atoms[ai].message_ids
        if similarity:
            found = [similarity[m] for m in ids if m in similarity]
            if found:
                sim[u] = max(found)
        if keyword:
            kw[u] = max((keyword.get(m, 0.0) for m in ids), default=0.0)

    known = ~np.isnan(sim)
    if not known.any() and not kw.any():
        context.notes.append(NO_EVIDENCE_NOTE)
        score = np.arange(n, dtype=float) / n  # newest first
        _fill(selection, budget, context, units, score, kw, rules, config, by_recency=True)
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
        score += config.episode_weight * _episode_scores(base, times, config)
    if config.speaker_weight:
        speaker = _named_speaker(inputs.query, set(labels))
        if speaker:
            score += config.speaker_weight * np.array([label == speaker for label in labels], dtype=float)
    _fill(selection, budget, context, units, score, kw, rules, config)


def _episode_scores(base: np.ndarray, times: list[float], config: FusedConfig) -> np.ndarray:
    """Per atom: the mean of the best ``episode_top`` bases of its episode (runs of turns without a long pause)."""
    gap = config.episode_gap_hours * 3600.0
    episode = np.zeros(len(base), dtype=int)
    current, last = 0, math.nan
    for u, when in enumerate(times):
        if not math.isnan(when) and not math.isnan(last) and when - last >= gap:
            current += 1
        if not math.isnan(when):
            last = when
        episode[u] = current
    out = np.zeros(len(base))
    for e in range(current + 1):
        members = episode == e
        top = np.sort(base[members])[::-1][: config.episode_top]
        out[members] = float(top.mean())
    return out


def _fill(selection: HistorySelection, budget: Budget, context: StrategyContext, units: list[tuple[int, int]],
          score: np.ndarray, kw: np.ndarray, rules: list[bool], config: FusedConfig, by_recency: bool = False) -> None:
    groups = selection.groups
    history_budget = budget.remaining
    for u, (gi, ai) in enumerate(units):  # every atom carries its own score, included or not
        selection.atom_scores.setdefault(gi, {})[ai] = round(float(score[u]), 6)

    # 1. continuity: the latest turns
    latest = sorted({gi for gi, _ in units})[-config.recent_groups:] if config.recent_groups > 0 else []
    share = budget.child(int(history_budget * config.recent_share))
    for gi in reversed(latest):
        selection.fill_group(gi, share, "recent_window", detail="continuity: one of the latest turns")

    # 2. standing instructions, best first
    order = sorted(range(len(units)), key=lambda u: (-score[u], -u))
    share = budget.child(int(history_budget * config.instruction_share))
    for u in order:
        if rules[u]:
            gi, ai = units[u]
            selection.include_atom(gi, ai, share, "standing_instruction",
                                   f"standing instruction given in turn {groups[gi].group_id}: it still holds",
                                   with_user=False)

    # 3. the rest, best first; a misfit is skipped and the next one tried
    smallest = min(groups[gi].atoms[ai].tokens for gi, ai in units)
    for rank, u in enumerate(order, 1):
        gi, ai = units[u]
        if selection.is_included(gi, ai):
            continue
        atom = groups[gi].atoms[ai]
        why = f"rank {rank} of {len(units)}, score {score[u]:.3f}"
        if by_recency:
            reason, why = "recent_window", f"newest first ({rank} of {len(units)}): nothing matched the query yet"
        else:
            reason = "keyword_match" if kw[u] > 0 else "semantic_match"
        if budget.remaining >= smallest and selection.include_atom(gi, ai, budget, reason, why,
                                                                     with_user=atom.kind == ATOM_CALL):
            continue
        selection.atom_details.setdefault(gi, {})[ai] = why + ": the budget was full"
