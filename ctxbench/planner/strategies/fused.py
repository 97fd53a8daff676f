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
"""
from __future__ import annotations

import math
import re
from itertools import chain
from datetime import datetime
from bisect import bisect_left
from functools import lru_cache
from typing import Sequence

import numpy as np

from ctxbench.config import FusedConfig, InstructionConfig, PlannerConfig
from ctxbench.planner.atoms import ATOM_CALL, ATOM_USER, GroupView
from ctxbench.planner.cache import fill_anchored, kept_atoms, kept_prefix, page_tokens, uses_cache_order
from ctxbench.planner.strategies.window import ANCHORED_DETAIL
from ctxbench.planner.budget import USER_BROUGHT, AtomValues, Budget, GroupPick, HistorySelection
from ctxbench.planner.instructions import MARK_FLAG, UNMARK_FLAG, is_standing_instruction
from ctxbench.planner.strategies.context import StrategyContext
from ctxbench.records.scored import ScoredIds
from ctxbench.records.speakers import reads_as_transcript, speaker_label, without_stamp

NO_EVIDENCE_NOTE = ("fused: nothing in the history matched the query by meaning or keywords yet (embedder not "
                    "ready, or no word found); took the latest messages first")
EPISODES_ONE_BY_ONE = 256  # up to this many episodes, each one's best atoms are found on its own
ROUND_MARGIN = 1e-6  # round6: scaled scores this close to a half are rounded by Python (their error is ~1e-9)
KEPT_NOTE = "; kept from the previous plan (prompt cache)"
FILL_BLOCK = 512  # atoms checked against the budget at once while filling (those that cannot fit are skipped in bulk)


@lru_cache(maxsize=16)
def _pattern(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    parts = [p for p in patterns if p]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE | re.MULTILINE) if parts else None


def _group_facts(group: GroupView, config: FusedConfig, instructions: InstructionConfig
                 ) -> tuple[tuple[str, ...], tuple[bool, ...], tuple[bool, ...], tuple[bool, ...], float]:
    """(speaker label, standing instruction by the patterns?, by the detector?, says when?) per atom, and the turn's
    time (epoch seconds, NaN if unknown); memoised on the cached group view."""
    key = ("fused", config.instruction_patterns, config.temporal_text_patterns, instructions)
    hit = group.memo.get(key)
    if hit is None:
        pattern = _pattern(config.instruction_patterns)
        temporal = _pattern(config.temporal_text_patterns)
        labels: list[str] = []
        rules: list[bool] = []
        detected: list[bool] = []
        timed: list[bool] = []
        for atom in group.atoms:
            first = atom.messages[0].get("content") if atom.messages else ""
            labels.append(speaker_label(first) if isinstance(first, str) else "")
            user = atom.kind == ATOM_USER and UNMARK_FLAG not in atom.flags
            rules.append(user and (MARK_FLAG in atom.flags or (pattern is not None and bool(pattern.search(
                atom.user_text)))))
            detected.append(user and is_standing_instruction(atom.user_text, tuple(atom.flags), instructions))
            timed.append(temporal is not None and any(
                isinstance(m.get("content"), str) and temporal.search(without_stamp(m["content"]))
                for m in atom.messages))
        hit = (tuple(labels), tuple(rules), tuple(detected), tuple(timed),
               _epoch(group.messages[0].created_at if group.messages else ""))
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


class _Units:
    """The atoms that compete (every eligible atom of the groups in play), as arrays in chronological order; built
    once per history, window and dropped turns (kept with the history's layout), and extended — the new groups
    only — when the history only grew (a new turn, or replay's next one)."""

    def __init__(self, selection: HistorySelection, available: list[int], config: FusedConfig,
                 instructions: InstructionConfig) -> None:
        self.instructions = instructions
        self.available = list(available)
        self.gi: list[int] = []
        self.ai: list[int] = []
        self.labels: list[str] = []
        self.tokens: list[int] = []
        self.calls: list[bool] = []
        # the unit of the user message a call atom brings along (-1: none, or not a call); a call is a unit only when
        # its turn's user message is one too (an excluded user message excludes its whole turn, ``atoms``)
        self.user_units: list[int] = []
        self.per_group: dict[int, tuple[int, ...]] = {}  # group index -> unit of each atom (-1: none)
        self.latest: list[int] = []  # groups with a competing atom, chronological
        self.token_array = np.zeros(0, dtype=np.int64)
        self.rules = np.zeros(0, dtype=bool)
        self.detected = np.zeros(0, dtype=bool)  # standing instructions by the detector (not by the patterns)
        self.timed = np.zeros(0, dtype=bool)
        self.times = np.zeros(0)
        self.message_ids = np.zeros(0, dtype=np.int64)
        self.message_units = np.zeros(0, dtype=np.int64)
        self._add(selection, available, config)

    @classmethod
    def extended(cls, earlier: "_Units", keep_groups: int, selection: HistorySelection, available: list[int],
                 config: FusedConfig) -> "_Units":
        """``earlier``'s units of its first ``keep_groups`` available groups, then those of ``available``'s rest."""
        out = cls.__new__(cls)
        out.instructions = earlier.instructions
        cut = len(earlier.gi) if keep_groups >= len(earlier.available) else \
            bisect_left(earlier.gi, earlier.available[keep_groups])
        out.available = list(available)
        out.gi, out.ai = earlier.gi[:cut], earlier.ai[:cut]
        out.labels, out.tokens, out.calls = earlier.labels[:cut], earlier.tokens[:cut], earlier.calls[:cut]
        out.user_units = earlier.user_units[:cut]
        dropped = set(earlier.available[keep_groups:])
        out.per_group = {gi: own for gi, own in earlier.per_group.items() if gi not in dropped}
        out.latest = [gi for gi in earlier.latest if gi not in dropped] if dropped else list(earlier.latest)
        out.token_array, out.rules, out.times = earlier.token_array[:cut], earlier.rules[:cut], earlier.times[:cut]
        out.timed, out.detected = earlier.timed[:cut], earlier.detected[:cut]
        keep = earlier.message_units < cut
        out.message_ids, out.message_units = earlier.message_ids[keep], earlier.message_units[keep]
        out._add(selection, available[keep_groups:], config)
        return out

    def _add(self, selection: HistorySelection, groups_in_play: Sequence[int], config: FusedConfig) -> None:
        groups = selection.groups
        gis, ais, labels, tokens, calls = self.gi, self.ai, self.labels, self.tokens, self.calls
        start = len(gis)
        rules: list[bool] = []
        detected: list[bool] = []
        timed: list[bool] = []
        times: list[float] = []
        message_ids: list[int] = []
        message_units: list[int] = []
        for gi in groups_in_play:
            group = groups[gi]
            group_labels, group_rules, group_detected, group_timed, when = _group_facts(group, config,
                                                                                        self.instructions)
            own: list[int] = []
            for ai, atom in enumerate(group.atoms):
                if atom.exclusion:
                    own.append(-1)
                    continue
                u = len(gis)
                own.append(u)
                gis.append(gi)
                ais.append(ai)
                labels.append(group_labels[ai])
                rules.append(group_rules[ai])
                detected.append(group_detected[ai])
                timed.append(group_timed[ai])
                times.append(when)
                tokens.append(atom.tokens)
                calls.append(atom.kind == ATOM_CALL)
                message_ids.extend(atom.message_ids)
                message_units.extend([u] * len(atom.message_ids))
            user = own[group.user_index] if group.user_index >= 0 else -1
            self.user_units.extend(user if calls[u] and user != u else -1 for u in own if u >= 0)
            if len(own) > own.count(-1):
                self.per_group[gi] = tuple(own)
                self.latest.append(gi)
        self.n = len(gis)
        self.token_array = np.concatenate([self.token_array, np.array(tokens[start:], dtype=np.int64)])
        self.rules = np.concatenate([self.rules, np.array(rules, dtype=bool)])
        self.detected = np.concatenate([self.detected, np.array(detected, dtype=bool)])
        self.timed = np.concatenate([self.timed, np.array(timed, dtype=bool)])  # says when something happened
        self.times = np.concatenate([self.times, np.array(times, dtype=np.float64)])
        ids = np.concatenate([self.message_ids, np.array(message_ids, dtype=np.int64)])
        units = np.concatenate([self.message_units, np.array(message_units, dtype=np.int64)])
        if len(ids) > 1 and not bool((np.diff(ids) >= 0).all()):  # by message id (they usually come in order)
            order = np.argsort(ids, kind="stable")
            ids, units = ids[order], units[order]
        self.message_ids, self.message_units = ids, units
        self.label_set = set(labels)
        self.named = sum(1 for label in labels if label)  # atoms that open with a speaker label
        self.smallest = int(self.token_array.min()) if self.n else 0
        self._episodes: dict[float, tuple[np.ndarray, int]] = {}
        self._looked_up: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (ids, their units, found)
        self._unit_ids: dict[str, int] | None = None

    def unit_ids(self, selection: HistorySelection) -> dict[str, int]:
        """Each competing atom's item id -> its unit (made on first use: the cache-keeping selection's)."""
        if self._unit_ids is None or len(self._unit_ids) != self.n:
            groups = selection.groups
            self._unit_ids = {groups[gi].atoms[ai].id: u for u, (gi, ai) in enumerate(zip(self.gi, self.ai))}
        return self._unit_ids

    def transcript(self, share: float) -> bool:
        """Whether the history reads as a transcript of speakers: at least ``share`` (> 0) of the atoms open with a
        speaker label. In a coding session an occasional "Error: ..." or "Note: ..." is no speaker a query names."""
        return reads_as_transcript(self.named, self.n, share)

    def _units_of(self, ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(unit, value) of the ``ids`` that are messages of a unit. The last few id lists looked up are kept: the
        similarity list of a history has the same ids plan after plan."""
        for known, units, found in self._looked_up:
            if len(known) == len(ids) and np.array_equal(known, ids):
                return units, values[found]
        at = np.minimum(np.searchsorted(self.message_ids, ids), len(self.message_ids) - 1)
        found = self.message_ids[at] == ids
        units = self.message_units[at[found]]
        self._looked_up = [(ids.copy(), units, found)] + self._looked_up[:1]
        return units, values[found]

    def per_unit(self, pairs: Sequence[tuple[int, float]], fill: float) -> np.ndarray:
        """The best value per unit of (message id, value) ``pairs`` (``fill`` where none of its messages has one)."""
        out = np.full(self.n, -np.inf)
        if pairs and len(self.message_ids):
            if isinstance(pairs, ScoredIds):  # the arrays as they are, no pair made
                ids, values = np.frombuffer(pairs.ids, dtype=np.int64), np.frombuffer(pairs.scores, dtype=np.float64)
            else:
                flat = np.fromiter(chain.from_iterable(pairs), dtype=np.float64, count=2 * len(pairs))
                ids, values = flat[0::2].astype(np.int64), flat[1::2]
            np.maximum.at(out, *self._units_of(ids, values))
        out[np.isneginf(out)] = fill
        return out

    def episodes(self, gap_hours: float) -> tuple[np.ndarray, int]:
        """(episode of each unit, how many): a pause of ``gap_hours`` or more since the previous turn with a known
        time starts a new one (a turn without a time stays in the current episode)."""
        hit = self._episodes.get(gap_hours)
        if hit is None:
            known = np.flatnonzero(~np.isnan(self.times))
            starts = np.zeros(self.n, dtype=np.int64)
            if len(known) > 1:
                starts[known[1:][np.diff(self.times[known]) >= gap_hours * 3600.0]] = 1
            episode = np.cumsum(starts)
            hit = self._episodes[gap_hours] = (episode, int(episode[-1]) + 1 if self.n else 1)
        return hit


def _units(selection: HistorySelection, available: list[int], config: FusedConfig,
           instructions: InstructionConfig) -> _Units:
    key = ("fused", config.instruction_patterns, config.temporal_text_patterns, instructions,
           tuple(available) if len(available) < 64 else
           (len(available), available[0], available[-1], tuple(sorted(selection.excluded))))
    hit = selection.memo.get(key)
    if hit is None:
        hit = _extended_units(selection, available, config, instructions) or \
            _Units(selection, available, config, instructions)
        selection.memo[key] = hit
    return hit


def _extended_units(selection: HistorySelection, available: list[int], config: FusedConfig,
                    instructions: InstructionConfig) -> _Units | None:
    """The units of ``available`` made from those of the history this one extends, when it had the same groups in
    play before the ones it shares (None: there are none to extend)."""
    if selection.earlier is None:
        return None
    memo, shared = selection.earlier
    keep = bisect_left(available, shared)  # groups in play the two histories share
    for key, earlier in list(memo.items()):
        if not (isinstance(earlier, _Units) and key[1:4] == (config.instruction_patterns,
                                                          config.temporal_text_patterns, instructions)):
            continue
        before = earlier.available
        if len(before) >= keep and before[:keep] == available[:keep] and len(before) - keep <= 1 and \
                (len(before) == keep or before[keep] >= shared):
            return _Units.extended(earlier, keep, selection, available, config)
    return None


def select(selection: HistorySelection, budget: Budget, context: StrategyContext) -> None:
    config = context.config.fused
    inputs = context.inputs
    available = selection.available()
    n_window = inputs.window_groups
    if n_window > 0 and len(available) > n_window:
        for gi in available[:-n_window]:
            selection.set_default(gi, "outside_window", f"older than the last {n_window} turns")
        available = available[-n_window:]
    units = _units(selection, available, config, context.config.instructions)
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
    pattern = _pattern(config.temporal_query_patterns)
    return pattern is not None and bool(pattern.search(query))


def _episode_scores(base: np.ndarray, units: _Units, config: FusedConfig) -> np.ndarray:
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


def round6(values: np.ndarray) -> list[float]:
    """``[round(v, 6) for v in values]``, vectorised: ``numpy.round`` scales, rounds half to even and divides, which
    gives Python's correctly rounded result except where the scaled value lies within rounding error of a half;
    those few are rounded by Python."""
    out = np.round(values, 6)
    with np.errstate(invalid="ignore", over="ignore"):  # infinities and NaN are left to Python below
        scaled = np.abs(values) * 1e6
        near_half = np.abs(scaled - np.floor(scaled) - 0.5) < ROUND_MARGIN
    for i in np.flatnonzero(near_half | ~np.isfinite(values)).tolist():
        out[i] = round(float(values[i]), 6)
    return out.tolist()


def _fill(selection: HistorySelection, budget: Budget, context: StrategyContext, units: _Units,
          score: np.ndarray, kw: np.ndarray, config: FusedConfig, by_recency: bool = False,
          pointed: np.ndarray | None = None) -> None:
    """``pointed``: the atoms the query points at (only those of turns a summary stands in for compete)."""
    groups = selection.groups
    history_budget = budget.remaining
    n = units.n
    order = n - 1 - np.argsort(-score[::-1], kind="stable")  # best first; ties: the newer atom
    values = score.tolist()  # as Python floats: read one by one for the atoms taken
    _explain(selection, units, score, values, order, by_recency)
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
        context.kept = _keep(selection, budget, units, order, score, values, kw, kept, planner, history_budget,
                             by_recency)

    # 4. the rest, best first; a misfit is skipped and the next one tried
    chosen, ranks, users = _fill_rest(selection, budget, units, order)
    _record(selection, units, chosen, ranks, users, values, kw, by_recency)


def _keep(selection: HistorySelection, budget: Budget, units: _Units, order: np.ndarray, score: np.ndarray,
          values: list[float], kw: np.ndarray, kept: Sequence[str], planner: PlannerConfig, history_budget: int,
          by_recency: bool) -> tuple[str, ...]:
    """Include the prefix of the previous plan's history atoms ``kept`` that stays (``planner.cache.kept_prefix``),
    charged to ``budget`` before the rest is picked; their details name their rank and say they were kept. Returns
    the ids of the previous plan's atoms the kept prefix spans that are in (kept, or in already: the latest turns,
    the rules), in the previous plan's order."""
    unit_ids = units.unit_ids(selection)
    competing = np.zeros(units.n, dtype=bool)
    competing[order] = True
    taken = _taken(selection, units)
    share = min(budget.remaining, int(history_budget * planner.cache_keep_share))

    def unit_of(atom: str) -> int:
        u = unit_ids.get(atom, -1)
        return u if u >= 0 and competing[u] else -1

    keep, end = kept_prefix(kept, unit_of, score, order.tolist(), units.tokens, units.user_units, taken,
                            budget.remaining, share, planner.cache_keep_margin,
                            int(history_budget * planner.cache_keep_slack))
    if keep:
        chosen, _ranks, users = _fill_rest(selection, budget, units, np.asarray(keep, dtype=np.int64))
        rank = np.empty(units.n, dtype=np.int64)
        rank[order] = np.arange(1, len(order) + 1)
        _record(selection, units, chosen, [int(rank[u]) for u in chosen], users, values, kw, by_recency, KEPT_NOTE)
        for u in (*chosen, *users):  # with the user messages they brought
            if u >= 0:
                taken[u] = 1
    # the prefix of the previous plan's atoms this one sends in that order: those kept, and those in already
    return tuple(atom for atom in kept[:end] if taken[unit_ids[atom]])


def _taken(selection: HistorySelection, units: _Units) -> bytearray:
    """Per unit: 1 when it is in already (the latest turns, the rules, pins, kept atoms)."""
    taken = bytearray(units.n)
    per_group = units.per_group
    for gi, pick in selection.picks.items():
        own = per_group.get(gi)
        if own is not None:
            for ai in pick.reasons:
                if own[ai] >= 0:
                    taken[own[ai]] = 1
    return taken


def _fill_rest(selection: HistorySelection, budget: Budget, units: _Units, order: np.ndarray
               ) -> tuple[list[int], list[int], list[int]]:
    """Every atom not yet in, best first, while it fits (a call atom with its turn's user message, if that is not in
    yet), as ``HistorySelection.include_atom`` would take them one by one: decided here over the units' lists and
    charged to ``budget`` at once (hundreds of atoms per plan at a large budget). Returns what was chosen, in order:
    the units, their ranks, and the unit of the user message each brings (-1: none) — lists of ints, not a tuple
    each, so a large plan gives the garbage collector nothing more to count."""
    n = units.n
    remaining = budget.remaining
    smallest = units.smallest
    chosen: list[int] = []
    ranks: list[int] = []
    users: list[int] = []
    if remaining < smallest:
        return chosen, ranks, users
    taken = _taken(selection, units)  # units already in (the latest turns, the rules, pins, kept atoms)
    tokens, user_units = units.tokens, units.user_units
    ranked = order.tolist()
    ordered_tokens = units.token_array[order]
    spent = 0
    for start in range(0, n, FILL_BLOCK):
        if remaining < smallest:
            break  # nothing fits any more: the rest say so when read
        # the atoms of this block that fit what is left now (the budget only shrinks: the others never will)
        for j in np.flatnonzero(ordered_tokens[start:start + FILL_BLOCK] <= remaining).tolist():
            if remaining < smallest:
                break
            u = ranked[start + j]
            cost = tokens[u]
            if cost > remaining or taken[u]:
                continue
            user = user_units[u]
            if user >= 0:
                if taken[user]:
                    user = -1
                else:
                    cost += tokens[user]
                    if cost > remaining:
                        continue
                    taken[user] = 1
            taken[u] = 1
            remaining -= cost
            spent += cost
            chosen.append(u)
            ranks.append(start + j + 1)
            users.append(user)
    budget.take(spent)
    return chosen, ranks, users


def _record(selection: HistorySelection, units: _Units, chosen: list[int], ranks: list[int], users: list[int],
            values: list[float], kw: np.ndarray, by_recency: bool, note: str = "") -> None:
    """The atoms ``_fill_rest`` chose, with their reasons and details, into the selection's picks (already decided and
    charged to the budget: nothing is checked here), in one loop: hundreds of atoms per plan at a large budget."""
    n = units.n
    gis, ais = units.gi, units.ai
    picks = selection.picks
    found = (kw > 0).tolist()  # found by keywords (as ``kw[u] > 0``)
    reason = "recent_window"
    summarised = selection.summarised  # turns a summary stands in for: their atoms say they were recalled
    for u, rank, user in zip(chosen, ranks, users):
        if by_recency:
            why = f"newest first ({rank} of {n}): nothing matched the query yet" + note
        else:
            reason, why = ("keyword_match" if found[u] else "semantic_match"), f"rank {rank} of {n}, score {values[u]:.3f}"
            why += note
        if user >= 0:  # the user message the atom brings along, first (as ``include_atom`` does)
            gi, ai = gis[user], ais[user]
            pick = picks.get(gi)
            if pick is None:
                pick = picks[gi] = GroupPick()
            pick.reasons[ai] = reason
            pick.details[ai] = (selection.recalled(gi, why) if summarised else why) + USER_BROUGHT
        gi, ai = gis[u], ais[u]
        pick = picks.get(gi)
        if pick is None:
            pick = picks[gi] = GroupPick()
        pick.reasons[ai] = reason
        pick.details[ai] = selection.recalled(gi, why) if summarised else why


def _explain(selection: HistorySelection, units: _Units, score: np.ndarray, values: list[float], order: np.ndarray,
             by_recency: bool) -> None:
    """Every competing atom's score, and why each left out was, made when the plan's excluded items are read."""
    n = units.n
    ranks: list[np.ndarray] = []

    def rank_of() -> np.ndarray:
        if not ranks:
            out = np.empty(n, dtype=np.int64)
            out[order] = np.arange(1, n + 1)
            ranks.append(out)
        return ranks[0]

    per_group = units.per_group

    rounded = round6(score)

    def scores(gi: int) -> dict[int, float] | None:
        own = per_group.get(gi)
        if own is None:
            return None
        return {ai: rounded[u] for ai, u in enumerate(own) if u >= 0}

    picks = selection.picks  # not the selection: these readers live on it, and a cycle would outlive the plan

    def details(gi: int) -> dict[int, str] | None:
        own = per_group.get(gi)
        if own is None:
            return None
        pick = picks.get(gi)
        out = {}
        for ai, u in enumerate(own):
            if u < 0 or (pick is not None and ai in pick.reasons):
                continue
            rank = int(rank_of()[u])
            why = (f"newest first ({rank} of {n}): nothing matched the query yet" if by_recency
                   else f"rank {rank} of {n}, score {score[u]:.3f}")
            out[ai] = why + ": the budget was full"
        return out or None

    selection.atom_scores = AtomValues(scores, (per_group, rounded))
    selection.atom_details = AtomValues(details)


select.recalls_summarised = True  # type: ignore[attr-defined]
