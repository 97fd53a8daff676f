"""The history atoms a plan leaves out, as columns (``records.history_items.ExcludedHistory``): the rows of every
history atom by chunks of turns, and each excluded atom's reason, detail and score, chronologically.

Made when a plan's ``items`` are first read or the plan is stored, from what the strategy left in the selection.
A 10,000-turn session's plan leaves ~34,000 atoms out; most turns are ones nobody picked from, whose reasons and
details are memoised on the cached turn view (``GroupView.excluded_items``), and a strategy that scores and explains
atoms by unit (fused) has the turns nobody picked from read in runs, by C-level passes over its unit tables.
"""
from __future__ import annotations

from itertools import accumulate, chain, repeat
from operator import is_
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


class _UnitLayout:
    """The unit tables of a history read atom by atom, for the turns nobody picked from: built once per unit table
    (kept in the layout's memo), extended from the one of the history this one extends (the new turns only).

    ``index`` gives each atom of a turn with units its unit (>= 0), or, for an atom without one, ``-(k + 1)`` where
    ``tail_details[k]`` is its detail (read from the unit values followed by the tail details reversed: the same
    index whatever the number of units); ``reasons`` its reason when left out by budget (its structural exclusion,
    if any); ``plain``: the turns read one by one (without units, or a scored atom with a structural exclusion);
    ``group_units``: the units of each turn it was built from."""

    __slots__ = ("units_of", "group_units", "offsets", "index", "reasons", "tail_details", "plain")

    def __init__(self, groups: Sequence[Any], units_of: dict[int, tuple[int, ...]],
                 base: "_UnitLayout | None" = None, shared: int = 0) -> None:
        self.units_of = units_of
        if base is None:
            shared = 0
            self.group_units: list[tuple[int, ...] | None] = []
            self.offsets = [0]
            self.index: list[int] = []
            self.reasons: list[str] = []
            self.tail_details: list[str] = []
            self.plain: list[int] = []
        else:  # the first ``shared`` turns as the base read them
            end = base.offsets[shared]
            self.group_units = base.group_units[:shared]
            self.offsets = base.offsets[:shared + 1]
            self.index, self.reasons = base.index[:end], base.reasons[:end]
            lowest = min(self.index, default=0)  # -(the tail details those turns use)
            self.tail_details = base.tail_details[:-lowest] if lowest < 0 else []
            self.plain = [gi for gi in base.plain if gi < shared]
        for gi in range(shared, len(groups)):
            group = groups[gi]
            atoms = group.atoms
            units = units_of.get(gi)
            self.group_units.append(units)
            self.offsets.append(self.offsets[-1] + len(atoms))
            if (units is None or len(units) != len(atoms)
                    or any(u >= 0 and atom.exclusion for atom, u in zip(atoms, units))):
                self.plain.append(gi)
                self.index.extend(repeat(0, len(atoms)))
                self.reasons.extend(repeat(OVER_BUDGET, len(atoms)))
                continue
            for atom, u in zip(atoms, units):
                if u >= 0:
                    self.index.append(u)
                    self.reasons.append(OVER_BUDGET)
                else:  # as an unpicked atom without a unit is read one by one: its exclusion, or no detail
                    self.tail_details.append(atom.exclusion_detail if atom.exclusion else "")
                    self.index.append(-len(self.tail_details))
                    self.reasons.append(atom.exclusion or OVER_BUDGET)


def _unit_layout(selection: HistorySelection, units_of: dict[int, tuple[int, ...]]) -> _UnitLayout:
    key = ("excluded-units", id(units_of))
    hit = selection.memo.get(key)
    if hit is not None and hit.units_of is units_of:
        return hit
    base, shared = None, 0
    if selection.earlier is not None:  # a history that only grew: extend a layout of the one before
        earlier, shared = selection.earlier
        mine = [units_of.get(gi) for gi in range(shared)]
        for old in list(earlier.values()):
            if (isinstance(old, _UnitLayout) and len(old.group_units) >= shared
                    and all(map(is_, old.group_units[:shared], mine))):
                base = old
                break
    hit = _UnitLayout(selection.groups, units_of, base, shared)
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
    reasons: list[str] = []
    details_out: list[str] = []
    scores_out: list[float] = []
    skipped: list[int] = []
    groups = selection.groups
    picks = selection.picks
    defaults = selection.defaults
    scores = selection.scores
    atom_details = selection.atom_details
    atom_scores = selection.atom_scores
    group_excluded_all = selection.excluded
    explain = selection.explain
    tables = _unit_tables(selection)
    if tables is None:  # every turn read one by one
        offsets = _offsets(selection)
        order: Sequence[int] = range(len(groups))
        layout = None
    else:  # the turns nobody picked from read in runs over the unit tables, the others one by one
        units_of, unit_scores, unit_details = tables
        layout = _unit_layout(selection, units_of)
        offsets, index, span_reasons = layout.offsets, layout.index, layout.reasons
        span_details = [*unit_details, *reversed(layout.tail_details)]  # an atom without a unit: -(k + 1)
        span_scores = [*unit_scores, *repeat(0.0, len(layout.tail_details))]  # no group scores (``_unit_tables``)
        order = sorted(set(layout.plain).union(picks, group_excluded_all, defaults))
    at = 0  # the first turn not read yet
    for gi in chain(order, (len(groups),)):
        if layout is not None and gi > at:
            start, end = offsets[at], offsets[gi]
            span = index[start:end]
            reasons.extend(span_reasons[start:end])
            details_out.extend(map(span_details.__getitem__, span))
            scores_out.extend(map(span_scores.__getitem__, span))
        if gi == len(groups):
            break
        at = gi + 1
        group = groups[gi]
        atoms = group.atoms
        pick = picks.get(gi)
        group_excluded = group_excluded_all.get(gi)
        default = defaults.get(gi)
        score = scores.get(gi, 0.0)
        details = atom_details.get(gi)
        own_scores = atom_scores.get(gi)
        if explain is not None and default is None and details is None and group_excluded is None:
            default, details = explain(gi)
        if pick is None and own_scores is None and (details is None or (default is None and group_excluded is None)):
            reason, detail = group_excluded or default or (OVER_BUDGET, "")
            own_reasons, own_details = _untouched_group(group, reason, detail, details)
            reasons.extend(own_reasons)
            details_out.extend(own_details)
            scores_out.extend(repeat(score, len(atoms)))
            continue
        offset = offsets[gi]
        for ai, atom in enumerate(atoms):
            if pick is not None and ai in pick.reasons:
                skipped.append(offset + ai)
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
            reasons.append(reason)
            details_out.append(detail)
            scores_out.append(own_scores.get(ai, score) if own_scores else score)
    views = tuple(groups)
    chunks = [_atom_chunk(views[i:i + ATOM_CHUNK_GROUPS]) for i in range(0, len(views), ATOM_CHUNK_GROUPS)]
    return ExcludedHistory(chunks, skipped, reasons, details_out, scores_out)


def _offsets(selection: HistorySelection) -> list[int]:
    """The position of each turn's first atom in the history, and the number of atoms (kept in the layout's memo)."""
    key = ("excluded-offsets", len(selection.groups))
    hit = selection.memo.get(key)
    if hit is None:
        hit = selection.memo[key] = [0, *accumulate(len(g.atoms) for g in selection.groups)]
    return hit
