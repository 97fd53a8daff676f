"""The fused strategy's competing atoms: every eligible atom of the groups in play as arrays in chronological order
(tokens, speaker labels, standing instructions, whether it says when, its turn's time, the messages it holds),
memoised on the history and extended when the history only grew."""
from __future__ import annotations

import math
import re
from bisect import bisect_left
from datetime import datetime
from functools import lru_cache
from itertools import chain
from typing import Sequence

import numpy as np

from ctxbench.config import FusedConfig, InstructionConfig
from ctxbench.planner.atoms import ATOM_CALL, ATOM_USER, GroupView
from ctxbench.planner.budget import HistorySelection
from ctxbench.planner.instructions import MARK_FLAG, UNMARK_FLAG, is_standing_instruction
from ctxbench.records.scored import ScoredIds
from ctxbench.records.speakers import reads_as_transcript, speaker_label, without_stamp


@lru_cache(maxsize=16)
def joined_pattern(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    parts = [p for p in patterns if p]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE | re.MULTILINE) if parts else None


def _group_facts(group: GroupView, config: FusedConfig, instructions: InstructionConfig
                 ) -> tuple[tuple[str, ...], tuple[bool, ...], tuple[bool, ...], tuple[bool, ...], float]:
    """(speaker label, standing instruction by the patterns?, by the detector?, says when?) per atom, and the turn's
    time (epoch seconds, NaN if unknown); memoised on the cached group view."""
    key = ("fused", config.instruction_patterns, config.temporal_text_patterns, instructions)
    hit = group.memo.get(key)
    if hit is None:
        pattern = joined_pattern(config.instruction_patterns)
        temporal = joined_pattern(config.temporal_text_patterns)
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


class Units:
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
    def extended(cls, earlier: "Units", keep_groups: int, selection: HistorySelection, available: list[int],
                 config: FusedConfig) -> "Units":
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


def units_for(selection: HistorySelection, available: list[int], config: FusedConfig,
              instructions: InstructionConfig) -> Units:
    key = ("fused", config.instruction_patterns, config.temporal_text_patterns, instructions,
           tuple(available) if len(available) < 64 else
           (len(available), available[0], available[-1], tuple(sorted(selection.excluded))))
    hit = selection.memo.get(key)
    if hit is None:
        hit = _extended_units(selection, available, config, instructions) or \
            Units(selection, available, config, instructions)
        selection.memo[key] = hit
    return hit


def _extended_units(selection: HistorySelection, available: list[int], config: FusedConfig,
                    instructions: InstructionConfig) -> Units | None:
    """The units of ``available`` made from those of the history this one extends, when it had the same groups in
    play before the ones it shares (None: there are none to extend)."""
    if selection.earlier is None:
        return None
    memo, shared = selection.earlier
    keep = bisect_left(available, shared)  # groups in play the two histories share
    for key, earlier in list(memo.items()):
        if not (isinstance(earlier, Units) and key[1:4] == (config.instruction_patterns,
                                                          config.temporal_text_patterns, instructions)):
            continue
        before = earlier.available
        if len(before) >= keep and before[:keep] == available[:keep] and len(before) - keep <= 1 and \
                (len(before) == keep or before[keep] >= shared):
            return Units.extended(earlier, keep, selection, available, config)
    return None
