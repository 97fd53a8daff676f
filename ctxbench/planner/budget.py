"""Token budget bookkeeping and the history selection state shared by the strategies.

``Budget`` counts tokens against a limit; a child budget (a level's share, a section's share)
charges its parent too, so nothing can overdraw the plan.

``HistorySelection`` records which atoms of which past groups are included and why. The unit the
seed strategies pick is a whole group (turn); ``fused`` picks atoms (``include_atom(..., with_user=False)``
takes a plain message without its turn's user message). When a group does not fit whole, ``fill_group`` includes
its user message and then its later atoms in chronological order while they fit (a coherent
prefix of the turn); atoms are never split, and an atom is only ever included together with its
group's user message. Atoms nobody picked are excluded ``over_budget`` unless a strategy gave the
group another reason (``outside_window``, ``below_threshold``).
"""
from __future__ import annotations

import math
from itertools import accumulate
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from ctxbench.planner.atoms import GroupView
from ctxbench.records.compaction import RECALLED

FULL = "full"
PARTIAL = "partial"
NONE = "none"

PARTIAL_DETAIL = "turn partially included: the budget ran out"
USER_BROUGHT = " (user message of an included atom)"  # added to the detail of a user message an atom brought along


class Budget:
    __slots__ = ("limit", "used", "parent")

    def __init__(self, limit: int, used: int = 0, parent: "Budget | None" = None) -> None:
        self.limit = limit
        self.used = used
        self.parent = parent

    @property
    def remaining(self) -> int:
        own = self.limit - self.used
        if self.parent is not None:
            return min(own, self.parent.remaining)
        return own

    def fits(self, tokens: int) -> bool:
        return tokens <= self.remaining

    def take(self, tokens: int) -> None:
        self.used += tokens
        if self.parent is not None:
            self.parent.take(tokens)

    def child(self, limit: int) -> "Budget":
        """A sub-budget of at most ``limit`` tokens that also charges this one."""
        return Budget(max(0, limit), 0, self)


NO_PINS: Mapping[int, str] = MappingProxyType({})  # the pins of a group none of whose atoms is pinned (shared, read-only)


class GroupPick:
    """The included atoms of one group: reason, detail and pin by atom index (dicts of strings: a large plan picks
    from hundreds of groups, and such dicts are nothing the garbage collector tracks). Few groups have a pinned
    atom: the others share one empty read-only ``pins`` (hundreds of dicts fewer to make per plan)."""

    __slots__ = ("reasons", "details", "pins", "partial")

    def __init__(self) -> None:
        self.reasons: dict[int, str] = {}  # atom index -> included reason
        self.details: dict[int, str] = {}
        self.pins: Mapping[int, str] = NO_PINS  # only the pinned ones (a dict of its own once one is: ``pin``)
        self.partial = False

    def pin(self, ai: int, pin: str) -> None:
        if self.pins is NO_PINS:
            self.pins = {}
        self.pins[ai] = pin  # type: ignore[index]


class AtomValues:
    """Per-atom values (scores, details) of every group, made when a group's are first asked for: ``get(gi)``
    answers like the ``{group index: {atom index: value}}`` dict it stands in for. A strategy that decides
    tens of thousands of atoms keeps arrays and hands over how to read them, not a dict per group."""

    def __init__(self, make: Callable[[int], dict[int, Any] | None],
                 table: "UnitTable | Callable[[], UnitTable] | None" = None) -> None:
        self._make = make
        # how ``make`` reads its values, for a reader of single atoms: (group index -> unit of each atom, -1: none;
        # value of each unit), or a function making it when first read. Hundreds of included atoms per plan each
        # read their score, and tens of thousands of excluded ones their detail, without a dict made for their
        # group or a call made for them
        self._table = table
        self._made: dict[int, dict[int, Any] | None] = {}

    @property
    def table(self) -> "UnitTable | None":
        if callable(self._table):
            self._table = self._table()
        return self._table

    def get(self, gi: int, default: Any = None) -> Any:
        if gi not in self._made:
            self._made[gi] = self._make(gi)
        found = self._made[gi]
        return found if found is not None else default


# (group index -> unit of each of its atoms, -1 where an atom has none; the value of each unit), as AtomValues.table
UnitTable = tuple[dict[int, tuple[int, ...]], Sequence[Any]]


# (default reason and detail of the group's unpicked atoms, or per-atom details) of a group, asked for lazily
Explain = Callable[[int], tuple["tuple[str, str] | None", "dict[int, str] | None"]]


class HistorySelection:
    def __init__(self, groups: Sequence[GroupView], excluded: dict[int, tuple[str, str]],
                 memo: dict[Any, Any] | None = None, earlier: tuple[dict[Any, Any], int] | None = None) -> None:
        self.groups = groups
        # what strategies derive from the whole history, kept as long as the history is (``HistoryLayout.memo``)
        self.memo: dict[Any, Any] = memo if memo is not None else {}
        # the memo of the history this one extends and how many groups they share (``HistoryLayout.earlier``)
        self.earlier = earlier
        self.excluded = excluded  # group index -> (reason, detail) for whole groups (dropped by the user)
        self.picks: dict[int, GroupPick] = {}
        self.defaults: dict[int, tuple[str, str]] = {}  # group index -> exclusion reason for unpicked atoms
        self.scores: dict[int, float] | AtomValues = {}  # group index -> score (AtomValues: made when read)
        self.atom_details: dict[int, dict[int, str]] | AtomValues = {}  # group -> atom -> detail for excluded atoms
        self.atom_scores: dict[int, dict[int, float]] | AtomValues = {}  # group -> atom -> score, if atoms are scored
        # a strategy that explains its exclusions only when they are read: group index -> (default, details)
        self.explain: Explain | None = None
        # turns a summary stands in for that a retrieval strategy may still recall verbatim: group index -> the
        # summary's label ("s1"); they compete on relevance but never as recent turns (``recalled`` says why)
        self.summarised: dict[int, str] = {}

    def recall_summarised(self, summarised: Mapping[int, tuple[str, str]]) -> None:
        """Let the turns a summary stands in for (group index -> (its label, why)) compete again: no longer
        excluded as a whole, their atoms left out stay ``summarised`` with that detail."""
        for gi, (label, why) in summarised.items():
            if self.excluded.get(gi, ("",))[0] != "summarised":
                continue
            del self.excluded[gi]
            self.summarised[gi] = label
            self.defaults[gi] = ("summarised", why)

    def recent(self, order: Sequence[int]) -> list[int]:
        """``order`` without the turns a summary stands in for (they left the recency window)."""
        summarised = self.summarised
        return [gi for gi in order if gi not in summarised] if summarised else list(order)

    def recalled(self, gi: int, detail: str) -> str:
        """``detail`` of an atom of turn ``gi`` taken, prefixed ``recalled from summary sN: `` when a summary stands
        in for the turn."""
        label = self.summarised.get(gi) if self.summarised else None
        return f"{RECALLED} {label}: {detail}" if label else detail

    # ---- queries ---------------------------------------------------------------------------
    def smallest_before(self) -> list[float]:
        """Per group index: the fewest tokens any group up to it needs whole (``inf`` if none has any); a strategy
        filling newest first can stop once even that does not fit."""
        hit = self.memo.get("smallest_before")
        if hit is None:
            hit = list(accumulate((g.eligible_tokens or math.inf for g in self.groups), min))
            self.memo["smallest_before"] = hit
        return hit

    def available(self) -> list[int]:
        """Indices of groups not excluded as a whole, chronological (kept with the history's layout)."""
        excluded = self.excluded
        key = ("available", tuple(sorted(excluded)))
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = tuple(gi for gi in range(len(self.groups)) if gi not in excluded)
        return list(hit)

    def has_included(self, gi: int) -> bool:
        pick = self.picks.get(gi)
        return pick is not None and bool(pick.reasons)

    def is_included(self, gi: int, ai: int) -> bool:
        pick = self.picks.get(gi)
        return pick is not None and ai in pick.reasons

    def _pick(self, gi: int) -> GroupPick:
        pick = self.picks.get(gi)
        if pick is None:
            pick = GroupPick()
            self.picks[gi] = pick
        return pick

    def _pending(self, gi: int) -> list[int]:
        pick = self.picks.get(gi)
        atoms = self.groups[gi].atoms
        if pick is None:
            return [ai for ai, a in enumerate(atoms) if not a.exclusion]
        return [ai for ai, a in enumerate(atoms) if not a.exclusion and ai not in pick.reasons]

    # ---- decisions -------------------------------------------------------------------------
    def set_default(self, gi: int, reason: str, detail: str = "") -> None:
        self.defaults[gi] = (reason, detail)

    def _include(self, gi: int, ai: int, reason: str, detail: str, pin: str) -> None:
        pick = self._pick(gi)
        pick.reasons[ai] = reason
        pick.details[ai] = detail
        if pin:
            pick.pin(ai, pin)

    def force_group(self, gi: int, budget: Budget, reason: str, pin: str = "", detail: str = "") -> None:
        """Include every eligible atom whatever the budget (mandatory, e.g. a sticky pin)."""
        for ai in self._pending(gi):
            self._include(gi, ai, reason, detail, pin)
            budget.take(self.groups[gi].atoms[ai].tokens)

    def fill_group(
        self, gi: int, budget: Budget, reason: str, *, detail: str = "", pin: str = "", partial: bool = True
    ) -> str:
        """Include the group whole if it fits, else (``partial``) its user message and a prefix of the rest.

        Returns FULL, PARTIAL or NONE.
        """
        group = self.groups[gi]
        atoms = group.atoms
        pick = self.picks.get(gi)
        if pick is None and group.eligible_tokens <= budget.remaining:
            pick = self._pick(gi)
            for ai, atom in enumerate(atoms):
                if not atom.exclusion:
                    pick.reasons[ai] = reason
                    pick.details[ai] = detail
                    if pin:
                        pick.pin(ai, pin)
            budget.take(group.eligible_tokens)
            return FULL
        if pick is None and not partial:
            return NONE
        pending = self._pending(gi)
        cost = sum(atoms[ai].tokens for ai in pending)
        if cost <= budget.remaining:
            for ai in pending:
                self._include(gi, ai, reason, detail, pin)
            budget.take(cost)
            return FULL
        if not partial:
            return NONE
        took = False
        ui = group.user_index
        if ui in pending:
            if not budget.fits(atoms[ui].tokens):
                return NONE
            self._include(gi, ui, reason, detail, pin)
            budget.take(atoms[ui].tokens)
            took = True
        for ai in pending:
            if ai == ui:
                continue
            if not budget.fits(atoms[ai].tokens):
                break
            self._include(gi, ai, reason, detail, pin)
            budget.take(atoms[ai].tokens)
            took = True
        if took or self.has_included(gi):
            self._pick(gi).partial = True
            return PARTIAL
        return NONE

    def include_atom(self, gi: int, ai: int, budget: Budget, reason: str, detail: str = "", pin: str = "",
                     *, with_user: bool = True) -> bool:
        """Include one atom (and, unless ``with_user`` is False, its group's user message first, if not yet in).
        False if it does not fit."""
        group = self.groups[gi]
        atom = group.atoms[ai]
        if atom.exclusion or gi in self.excluded:
            return False
        if self.is_included(gi, ai):
            return True
        ui = group.user_index
        need_user = with_user and ui >= 0 and ui != ai and not self.is_included(gi, ui)
        cost = atom.tokens + (group.atoms[ui].tokens if need_user else 0)
        if not budget.fits(cost):
            return False
        if need_user:
            self._include(gi, ui, reason, detail + USER_BROUGHT if detail else detail, pin)
        self._include(gi, ai, reason, detail, pin)
        budget.take(cost)
        return True
