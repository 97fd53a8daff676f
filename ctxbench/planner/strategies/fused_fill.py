"""The fused strategy's bulk fill: every atom not yet in, best first, while it fits, decided in one loop over the units'
lists and charged to the budget at once, then written into the selection's picks in one loop."""
from __future__ import annotations

import numpy as np

from ctxbench.planner.budget import USER_BROUGHT, Budget, GroupPick, HistorySelection
from ctxbench.planner.strategies.fused_units import Units

FILL_BLOCK = 512  # atoms checked against the budget at once while filling (those that cannot fit are skipped in bulk)


def taken_units(selection: HistorySelection, units: Units) -> bytearray:
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


def fill_rest(selection: HistorySelection, budget: Budget, units: Units, order: np.ndarray
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
    taken = taken_units(selection, units)  # units already in (the latest turns, the rules, pins, kept atoms)
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


def record(selection: HistorySelection, units: Units, chosen: list[int], ranks: list[int], users: list[int],
           values: list[float], kw: np.ndarray, by_recency: bool, note: str = "") -> None:
    """The atoms ``fill_rest`` chose, with their reasons and details, into the selection's picks (already decided and
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
