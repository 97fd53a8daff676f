"""A plan's excluded history items as columns: what every history atom is, and why each left out was.

A plan of a 10,000-turn session lists ~34,000 history atoms it left out, each with its reason. Their fields are of
two kinds: what the atom is (``ATOM_FIELDS``: id, label, tokens, message ids, source ids), the same in every plan
of the history, and what this plan decided (``reason``, ``detail``, ``score``). :class:`ExcludedHistory` holds the
first as chunks of the history's atoms (every atom of a run of turns, in history order, included or not: a chunk
stays the same while those turns do) and the second as one value per excluded atom; ``skipped`` names the atoms
that are not among them (the plan included them). :meth:`ExcludedHistory.items` makes the PlanItems, exactly the
ones a plan lists; the store keeps the chunks once each and this plan's columns as runs, and rebuilds the same.
:class:`DeferredPlan` is the planner's ContextPlan holding them so.
"""
from __future__ import annotations

import dataclasses

from array import array
from math import copysign
from itertools import chain, compress, islice, repeat
from operator import ne, sub
from typing import Any, Callable, Iterable, Sequence

from ctxbench.records.plans import ContextPlan, PlanItem, replaced_included

HISTORY_ATOM_KIND = "history_atom"
HISTORY_SECTION = "history"
ATOM_FIELDS = ("id", "label", "tokens", "message_ids", "external_ids")  # a chunk row, in this order
# the fields every excluded history item has alike
EXCLUDED_FIELDS: dict[str, Any] = {"kind": HISTORY_ATOM_KIND, "section": HISTORY_SECTION, "included": False,
                                   "pin": "", "order": -1, "messages": ()}

AtomRow = tuple[str, str, int, tuple[int, ...], tuple[str, ...]]

_NEW = object.__new__


class AtomChunk:
    """The rows (``ATOM_FIELDS``) of every atom of a run of turns. ``owners``: the objects they were read from (the
    planner's cached turn views); the very same owners give the very same rows, so a writer that remembers a chunk
    by its owners need not write it again."""

    __slots__ = ("owners", "_make", "_rows")

    def __init__(self, owners: tuple[object, ...], make: Callable[[], tuple[AtomRow, ...]] | None = None,
                 rows: tuple[AtomRow, ...] | None = None) -> None:
        self.owners = owners
        self._make = make
        self._rows = rows

    def rows(self) -> tuple[AtomRow, ...]:
        if self._rows is None:
            assert self._make is not None
            self._rows = self._make()
            self._make = None
        return self._rows


class ExcludedHistory:
    """The excluded history items of a plan (see the module's docstring), made into PlanItems when asked for.

    ``reasons``, ``details`` and ``scores`` hold one value per excluded item, in history order; ``skipped`` the
    positions (over the atoms of every chunk, in order) of the atoms that are not excluded items."""

    __slots__ = ("chunks", "skipped", "reasons", "details", "scores")

    def __init__(self, chunks: Sequence[AtomChunk], skipped: Sequence[int], reasons: Sequence[str],
                 details: Sequence[str], scores: Sequence[float]) -> None:
        if not len(reasons) == len(details) == len(scores):
            raise ValueError(f"excluded history columns differ in length: {len(reasons)} reasons, "
                             f"{len(details)} details, {len(scores)} scores")
        self.chunks = tuple(chunks)
        self.skipped = tuple(skipped)
        self.reasons, self.details, self.scores = reasons, details, scores

    def atom_rows(self) -> Iterable[AtomRow]:
        """The rows of every atom, in history order (excluded or not)."""
        return chain.from_iterable(chunk.rows() for chunk in self.chunks)

    def items(self) -> tuple[PlanItem, ...]:
        rows = list(self.atom_rows())
        if self.skipped:
            keep = [True] * len(rows)
            for position in self.skipped:
                keep[position] = False
            rows = list(compress(rows, keep))
        if len(rows) != len(self.reasons):
            raise ValueError(f"{len(rows)} excluded history atoms but {len(self.reasons)} reasons")
        out: list[PlanItem] = []
        append = out.append
        for (item_id, label, tokens, message_ids, external_ids), reason, detail, score in zip(
                rows, self.reasons, self.details, self.scores):
            item = _NEW(PlanItem)
            fields = item.__dict__
            fields.update(EXCLUDED_FIELDS)
            fields["id"] = item_id
            fields["label"] = label
            fields["tokens"] = tokens
            fields["message_ids"] = message_ids
            fields["external_ids"] = external_ids
            fields["reason"] = reason
            fields["detail"] = detail
            fields["score"] = score
            append(item)
        return tuple(out)


def runs(values: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """``values`` as (the value of each run of equal neighbours, the length of each run)."""
    n = len(values)
    if not n:
        return [], []
    # where a value differs from the one before it, by C-level passes (a long session's plan has ~34,000 values)
    starts = [0, *compress(range(1, n), map(ne, islice(values, 1, None), values))]
    return list(map(values.__getitem__, starts)), list(map(sub, [*islice(starts, 1, None), n], starts))


def score_runs(scores: Sequence[float]) -> tuple[list[float], list[int]]:
    """As :func:`runs`, a run holding one sign of zero only (``-0.0 == 0.0``, but a plan shows each as it is)."""
    try:
        plain = _NEGATIVE_ZERO not in array("d", scores).tobytes()  # a match across two values only costs time
    except TypeError:
        plain = False
    if plain:
        return runs(scores)
    pairs, counts = runs(list(zip(scores, map(copysign, repeat(1.0), scores))))
    return [value for value, _sign in pairs], counts


_NEGATIVE_ZERO = array("d", [-0.0]).tobytes()


def from_runs(values: Sequence[Any], counts: Sequence[int]) -> list[Any]:
    """The values ``runs`` was given."""
    if len(values) != len(counts) or any(c < 1 for c in counts):
        raise ValueError("runs and their lengths do not match")
    return list(chain.from_iterable(map(repeat, values, counts)))


class DeferredPlan(ContextPlan):
    """A ContextPlan whose excluded history items are made when something first reads ``items``.

    A plan of a 10,000-turn session excludes tens of thousands of history atoms; making an item for each
    cost more than the rest of the plan, and sending the plan, its meter and its PlanId need none of them.
    The planner hands over the items it made (``head``: the included ones in payload order, the current turn,
    the excluded context layers; ``tail``: the current turn's isolated atoms) and the excluded history items in
    between as columns (:class:`ExcludedHistory`); ``items`` is then exactly what a ContextPlan
    would hold, made once. ``included`` (and so ``messages()``) never needs them, and the store keeps the columns
    as they are (:meth:`parts`).
    """

    @classmethod
    def make(cls, *, head: tuple[PlanItem, ...], rest: Callable[[], "ExcludedHistory"], tail: tuple[PlanItem, ...],
             **fields: Any) -> "DeferredPlan":
        plan = object.__new__(cls)
        state = plan.__dict__
        state.update(fields)
        state["_head"], state["_rest"], state["_tail"] = head, rest, tail
        return plan

    def _excluded_history(self) -> "ExcludedHistory":
        state = self.__dict__
        history = state.get("_history")
        if history is None:
            history = state["_rest"]()
            state["_history"] = history
            state.pop("_rest", None)
        return history

    @property  # type: ignore[override]
    def items(self) -> tuple[PlanItem, ...]:
        state = self.__dict__
        items = state.get("_items")
        if items is None:
            items = state["_head"] + self._excluded_history().items() + state["_tail"]
            state["_items"] = items
        return items

    @items.setter
    def items(self, value: tuple[PlanItem, ...]) -> None:  # dataclasses.replace builds a plan through __init__
        self.__dict__["_items"] = tuple(value)

    @property
    def included(self) -> tuple[PlanItem, ...]:
        state = self.__dict__
        if "_items" in state:
            return tuple(i for i in state["_items"] if i.included)
        return tuple(i for i in state["_head"] if i.included)

    def parts(self) -> "tuple[tuple[PlanItem, ...], ExcludedHistory, tuple[PlanItem, ...]] | None":
        """``items`` in three parts: the items before the excluded history, its columns, the items after (None for a
        plan given its items whole, e.g. by ``dataclasses.replace``)."""
        state = self.__dict__
        if "_head" not in state:
            return None
        return state["_head"], self._excluded_history(), state["_tail"]

    def with_included(self, included: tuple[PlanItem, ...]) -> "DeferredPlan":
        """The same plan with its included items replaced (same ids, same order), the rest still deferred."""
        state = self.__dict__
        if "_head" not in state:
            return dataclasses.replace(self, items=replaced_included(state["_items"], included))
        fields = {name: state[name] for name in _FIELDS if name != "items"}
        return DeferredPlan.make(head=replaced_included(state["_head"], included), rest=self._excluded_history,
                                 tail=state["_tail"], **fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContextPlan):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _FIELDS)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in _FIELDS))

    def __repr__(self) -> str:
        return f"DeferredPlan(plan_id={self.plan_id!r}, used_tokens={self.used_tokens}, budget={self.budget})"


_FIELDS = tuple(f.name for f in dataclasses.fields(ContextPlan))
