"""The history atoms a plan leaves out, as columns (``records.history_items.ExcludedHistory``): the rows of every
history atom by chunks of turns, and each excluded atom's reason, detail and score, chronologically.

Made when a plan's ``items`` are first read or the plan is stored, from what the strategy left in the selection.
A 10,000-turn session's plan leaves ~34,000 atoms out; most turns are ones nobody picked from, whose reasons and
details are memoised on the cached turn view (``GroupView.excluded_items``), and a strategy that scores and explains
atoms by unit (fused) has the turns nobody picked from read in runs, by C-level passes over its unit tables.
"""
from __future__ import annotations

from itertools import accumulate, chain, repeat
from typing import Any, Sequence

from ctxbench.planner.budget import PARTIAL_DETAIL, AtomValues, HistorySelection
from ctxbench.records.history_items import AtomChunk, AtomRow, ExcludedHistory

ATOM_CHUNK_GROUPS = 256  # turns per chunk of atom rows (``AtomChunk``): a new turn changes the last chunk only
EXCLUDED_MEMO_MAX = 4  # (reason, detail) memos kept per group view (``_untouched_group``)
OVER_BUDGET = "over_budget"

# keys of a view's item memo (``GroupView.excluded_items``: plan assembly's, not kept in a history snapshot)
_ATOM_ROWS = "atom_rows"  # its atoms' rows
_UNTOUCHED = "untouched"  # its reasons and details when nobody picked from it, by (reason, detail, details)


def _group_rows(group: Any) -> tuple[AtomRow, ...]:
    """The ``ATOM_FIELDS`` row of each of a group's atoms (memoised on the cached group view)."""
    memo = group.excluded_items
    rows = memo.get(_ATOM_ROWS)
    if rows is None:
        rows = tuple([(a.id, a.label, a.tokens, a.message_ids, a.external_ids) for a in group.atoms])
        memo[_ATOM_ROWS] = rows
    return rows


def _atom_chunk(groups: tuple[Any, ...]) -> AtomChunk:
    return AtomChunk(groups, lambda: tuple(chain.from_iterable(map(_group_rows, groups))))


def _untouched_group(group: Any, reason: str, detail: str,
                     details: dict[int, str] | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The reasons and details of the atoms of a group nobody picked from (memoised on the cached group view, per
    reason, detail and ``details``: the detail of some of its atoms, a strategy's memoised dict)."""
    key = (reason, detail, id(details))
    memo = group.excluded_items.get(_UNTOUCHED)
    if memo is None:
        memo = group.excluded_items[_UNTOUCHED] = {}
    hit = memo.get(key)
    if hit is None or hit[0] is not details:
        dropped = reason == "dropped_by_user"
        own = [bool(a.exclusion) and not dropped for a in group.atoms]
        atom_details = details or {}
        hit = (details, tuple([a.exclusion if mine else reason for a, mine in zip(group.atoms, own)]),
               tuple([a.exclusion_detail if mine else atom_details.get(ai, detail)
                      for ai, (a, mine) in enumerate(zip(group.atoms, own))]))
        if len(memo) >= EXCLUDED_MEMO_MAX:
            memo.clear()
        memo[key] = hit
    return hit[1], hit[2]


class _Columns:
    """The columns being made, chronologically."""

    __slots__ = ("reasons", "details", "scores", "skipped")

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.details: list[str] = []
        self.scores: list[float] = []
        self.skipped: list[int] = []


def _group_columns(selection: HistorySelection, gi: int, offset: int, out: _Columns) -> None:
    """The columns of one group's excluded atoms (``offset``: the position of its first atom in the history)."""
    group = selection.groups[gi]
    atoms = group.atoms
    pick = selection.picks.get(gi)
    group_excluded = selection.excluded.get(gi)
    default = selection.defaults.get(gi)
    score = selection.scores.get(gi, 0.0)
    details = selection.atom_details.get(gi)
    own_scores = selection.atom_scores.get(gi)
    if selection.explain is not None and default is None and details is None and group_excluded is None:
        default, details = selection.explain(gi)
    if pick is None and own_scores is None and (details is None or (default is None and group_excluded is None)):
        reason, detail = group_excluded or default or (OVER_BUDGET, "")
        own_reasons, own_details = _untouched_group(group, reason, detail, details)
        out.reasons.extend(own_reasons)
        out.details.extend(own_details)
        out.scores.extend(repeat(score, len(atoms)))
        return
    for ai, atom in enumerate(atoms):
        if pick is not None and ai in pick.reasons:
            out.skipped.append(offset + ai)
            continue
        if group_excluded is not None:
            reason, detail = group_excluded
        elif atom.exclusion:
            reason, detail = atom.exclusion, atom.exclusion_detail
        elif default is not None:
            reason, detail = default
        else:
            reason = OVER_BUDGET
            detail = PARTIAL_DETAIL if pick is not None and pick.partial else ""
            if details is not None:
                detail = details.get(ai, detail)
        out.reasons.append(reason)
        out.details.append(detail)
        out.scores.append(own_scores.get(ai, score) if own_scores else score)


class _UnitLayout:
    """The unit tables of a history read atom by atom, for the turns nobody picked from: built once per unit table
    (kept in the layout's memo). ``index`` gives each atom of a turn with units its place in the unit values followed
    by the details of its atoms without a unit (``tail_details``); ``reasons`` its reason when left out by budget
    (its structural exclusion, if any); ``plain``: the turns without units, read one by one."""

    __slots__ = ("units_of", "n", "offsets", "index", "reasons", "tail_details", "plain")

    def __init__(self, groups: Sequence[Any], units_of: dict[int, tuple[int, ...]], n: int) -> None:
        self.units_of, self.n = units_of, n
        self.offsets = [0, *accumulate(len(g.atoms) for g in groups)]
        self.index: list[int] = []
        self.reasons: list[str] = []
        self.tail_details: list[str] = []
        self.plain: list[int] = []
        for gi, group in enumerate(groups):
            units = units_of.get(gi)
            if units is None or len(units) != len(group.atoms):
                self.plain.append(gi)
                self.index.extend(repeat(-1, len(group.atoms)))
                self.reasons.extend(repeat(OVER_BUDGET, len(group.atoms)))
                continue
            if any(u >= 0 and atom.exclusion for atom, u in zip(group.atoms, units)):
                self.plain.append(gi)  # a scored atom with a structural exclusion: read as ``_group_columns`` does
                self.index.extend(repeat(-1, len(group.atoms)))
                self.reasons.extend(repeat(OVER_BUDGET, len(group.atoms)))
                continue
            for atom, u in zip(group.atoms, units):
                if u >= 0:
                    self.index.append(u)
                    self.reasons.append(OVER_BUDGET)
                else:  # as ``_group_columns`` reads an unpicked atom without a unit: its exclusion, or no detail
                    self.index.append(n + len(self.tail_details))
                    self.reasons.append(atom.exclusion or OVER_BUDGET)
                    self.tail_details.append(atom.exclusion_detail if atom.exclusion else "")


def _unit_layout(selection: HistorySelection, units_of: dict[int, tuple[int, ...]], n: int) -> _UnitLayout:
    key = ("excluded-units", id(units_of), n, len(selection.groups))
    hit = selection.memo.get(key)
    if hit is None or hit.units_of is not units_of:
        hit = _UnitLayout(selection.groups, units_of, n)
        selection.memo[key] = hit
    return hit


def _unit_tables(selection: HistorySelection) -> tuple[dict[int, tuple[int, ...]], Sequence[float], Sequence[str]] | None:
    """The strategy's unit tables of scores and details (one per-group unit map), when it explains every atom left
    out by unit and scores no group (fused); else None."""
    atom_scores, atom_details = selection.atom_scores, selection.atom_details
    if not (isinstance(atom_scores, AtomValues) and isinstance(atom_details, AtomValues)):
        return None
    if selection.explain is not None or not isinstance(selection.scores, dict) or selection.scores:
        return None
    score_table, detail_table = atom_scores.table, atom_details.table
    if score_table is None or detail_table is None or score_table[0] is not detail_table[0]:
        return None
    if len(score_table[1]) != len(detail_table[1]):
        return None
    return score_table[0], score_table[1], detail_table[1]


def excluded_history(selection: HistorySelection) -> ExcludedHistory:
    """Every excluded history atom's reason, detail and score, chronologically, beside the rows of every history atom
    (made when the plan's ``items`` are first read or the plan is stored)."""
    out = _Columns()
    groups = selection.groups
    tables = _unit_tables(selection)
    if tables is None:
        offset = 0
        for gi, group in enumerate(groups):
            _group_columns(selection, gi, offset, out)
            offset += len(group.atoms)
    else:
        units_of, unit_scores, unit_details = tables
        layout = _unit_layout(selection, units_of, len(unit_scores))
        details = list(unit_details) + layout.tail_details
        scores = list(unit_scores) + [0.0] * len(layout.tail_details)  # no group scores (``_unit_tables``)
        special = sorted(set(layout.plain).union(selection.picks, selection.excluded, selection.defaults))
        offsets, index = layout.offsets, layout.index
        at = 0  # the first group not yet read
        for gi in [*special, len(groups)]:
            if gi > at:  # turns nobody picked from, with units: read in runs
                span = index[offsets[at]:offsets[gi]]
                out.reasons.extend(layout.reasons[offsets[at]:offsets[gi]])
                out.details.extend(map(details.__getitem__, span))
                out.scores.extend(map(scores.__getitem__, span))
            if gi < len(groups):
                _group_columns(selection, gi, offsets[gi], out)
            at = gi + 1
    chunks = tuple(groups)
    return ExcludedHistory([_atom_chunk(chunks[i:i + ATOM_CHUNK_GROUPS]) for i in range(0, len(chunks), ATOM_CHUNK_GROUPS)],
                           out.skipped, out.reasons, out.details, out.scores)
