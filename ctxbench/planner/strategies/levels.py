"""Hierarchical memory levels (seed 004): permanent / session / working / volatile.

Atoms are classified (first match wins):

* permanent — user messages that state a standing instruction: the ``instruction`` importance flag
  or a phrase from ``levels.instruction_phrases`` ("always", "never", "must", "from now on",
  "remember"); system messages are mandatory anyway;
* session — atoms flagged with one of ``levels.session_flags`` (error, solution, decision);
* working — every atom of the last ``levels.working_groups`` turns;
* volatile — everything older (tool output, chatter).

Each of the first three levels has a token budget (``levels.*_tokens`` at ``reference_budget``,
scaled by plan budget / reference budget, and never more than what is left); volatile gets the
remainder. Each level is filled newest first, atom by atom (an atom that does not fit is skipped
and the next one tried); an atom always comes with its turn's user message, charged to the
level that pulled it in. Reason ``memory_level``; the detail names the level. ``window_groups``
does not apply (the working level is the recent window here). Summaries of earlier turns are placed in
the session level, before its atoms (reason ``summary``, detail ``level: session``).
"""
from __future__ import annotations

import re
from typing import Sequence
from functools import lru_cache

from ctxbench.config import LevelsConfig
from ctxbench.planner.atoms import ATOM_USER, Atom, GroupView
from ctxbench.planner.budget import Budget, GroupPick, HistorySelection
from ctxbench.planner.instructions import UNMARK_FLAG
from ctxbench.planner.strategies.context import StrategyContext
from ctxbench.planner.summaries import fill_summaries

PERMANENT = "permanent"
SESSION = "session"
WORKING = "working"
VOLATILE = "volatile"
LEVELS = (PERMANENT, SESSION, WORKING, VOLATILE)
REASON = "memory_level"

_INSTRUCTION_CACHE: dict[tuple[Atom, tuple[str, ...]], bool] = {}
_INSTRUCTION_CACHE_MAX = 100_000


@lru_cache(maxsize=16)
def _phrase_pattern(phrases: tuple[str, ...]) -> re.Pattern[str] | None:
    words = [p.strip() for p in phrases if p.strip()]
    if not words:
        return None
    alternatives = "|".join(r"\s+".join(re.escape(w) for w in p.split()) for p in words)
    return re.compile(rf"\b(?:{alternatives})\b", re.IGNORECASE)


def states_instruction(text: str, flags: tuple[str, ...], config: LevelsConfig) -> bool:
    """True for a user's words that state a standing instruction: the ``instruction`` flag, or one of
    ``instruction_phrases`` ("always", "never", "from now on", ...). Compaction protects the same turns."""
    if UNMARK_FLAG in flags:  # the user said it is none
        return False
    if config.instruction_flag in flags:
        return True
    pattern = _phrase_pattern(config.instruction_phrases)
    return bool(pattern and pattern.search(text))


def is_instruction(atom: Atom, config: LevelsConfig) -> bool:
    if atom.kind != ATOM_USER:
        return False
    if UNMARK_FLAG in atom.flags:
        return False
    if config.instruction_flag in atom.flags:
        return True
    key = (atom, config.instruction_phrases)
    hit = _INSTRUCTION_CACHE.get(key)
    if hit is None:
        hit = states_instruction(atom.user_text, (), config)
        if len(_INSTRUCTION_CACHE) >= _INSTRUCTION_CACHE_MAX:
            _INSTRUCTION_CACHE.clear()
        _INSTRUCTION_CACHE[key] = hit
    return hit


def level_budgets(plan_budget: int, config: LevelsConfig) -> dict[str, int]:
    scale = plan_budget / config.reference_budget if config.reference_budget > 0 else 1.0
    return {
        PERMANENT: int(config.permanent_tokens * scale),
        SESSION: int(config.session_tokens * scale),
        WORKING: int(config.working_tokens * scale),
    }


def _static_levels(group: GroupView, config: LevelsConfig) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(permanent, session, other) eligible atom indices of a group; memoised on the cached view."""
    key = ("levels", config.instruction_flag, config.instruction_phrases, config.session_flags)
    hit = group.memo.get(key)
    if hit is None:
        session_flags = frozenset(config.session_flags)
        permanent: list[int] = []
        session: list[int] = []
        other: list[int] = []
        for ai, atom in enumerate(group.atoms):
            if atom.exclusion:
                continue
            if atom.kind == ATOM_USER and is_instruction(atom, config):
                permanent.append(ai)
            elif atom.flags and not session_flags.isdisjoint(atom.flags):
                session.append(ai)
            else:
                other.append(ai)
        hit = (tuple(permanent), tuple(session), tuple(other))
        group.memo[key] = hit
    return hit


ATOM_BITS = 20  # (group index, atom index) packed into one int: no tuple per atom per plan
_MASK = (1 << ATOM_BITS) - 1


def _classified(selection: HistorySelection, config: LevelsConfig) -> tuple[dict[str, list[int]], dict[str, int],
                                                                             frozenset[int]]:
    """(the levels, the fewest tokens of an atom per level, the working groups): kept with the history's layout."""
    key = ("levels", config.instruction_flag, config.instruction_phrases, config.session_flags, config.working_groups,
           tuple(sorted(selection.excluded)))
    hit = selection.memo.get(key)
    if hit is not None:
        return hit
    available = selection.available()
    working = frozenset(available[-config.working_groups:]) if config.working_groups > 0 else frozenset()
    out: dict[str, list[int]] = {level: [] for level in LEVELS}
    perm, sess, work, vol = out[PERMANENT], out[SESSION], out[WORKING], out[VOLATILE]
    for gi in available:
        permanent, session, other = _static_levels(selection.groups[gi], config)
        base = gi << ATOM_BITS
        if permanent:
            perm.extend([base | ai for ai in permanent])
        if session:
            sess.extend([base | ai for ai in session])
        if other:
            (work if gi in working else vol).extend([base | ai for ai in other])
    groups = selection.groups
    smallest = {level: min((groups[code >> ATOM_BITS].atoms[code & _MASK].tokens for code in packed), default=0)
                for level, packed in out.items()}
    hit = (out, smallest, working)
    selection.memo[key] = hit
    return hit


def select(selection: HistorySelection, budget: Budget, context: StrategyContext) -> None:
    config = context.config.levels
    caps = level_budgets(context.plan_budget, config)
    groups = selection.groups
    levels, smallest_of, working = _classified(selection, config)
    for level, packed in levels.items():
        share = budget.child(caps[level]) if level in caps else budget
        detail = f"level: {level}"
        if level == SESSION:  # summaries of earlier turns are session memory (seed 004)
            fill_summaries(context.summaries, context.summary_kept, selection, share, detail)
        smallest = smallest_of[level]
        for code in reversed(packed):
            remaining = share.remaining
            if remaining < smallest:
                break
            gi, ai = code >> ATOM_BITS, code & _MASK
            if groups[gi].atoms[ai].tokens > remaining:
                continue  # cannot fit, not even without its turn's user message
            selection.include_atom(gi, ai, share, REASON, detail)
    groups, picks = selection.groups, selection.picks  # not the selection: a cycle through it would outlive the plan
    selection.explain = lambda gi: _explain(groups, picks, config, working, gi)


select.places_summaries = True  # type: ignore[attr-defined]

_SHARED = {level: ("over_budget", f"level: {level} (level budget full)") for level in LEVELS}


def _explain(groups: Sequence[GroupView], picks: dict[int, GroupPick], config: LevelsConfig, working: frozenset[int],
             gi: int) -> tuple[tuple[str, str] | None, dict[int, str] | None]:
    """Why the group's atoms left out were: one shared reason when nobody picked from it and its atoms are all of
    one level, else each atom's level (asked for when the plan's excluded items are made)."""
    pick = picks.get(gi)
    if pick is None:  # the same for every plan while the turn stays in (or out of) the working level: memoised
        key = ("levels-explain", config.instruction_flag, config.instruction_phrases, config.session_flags,
               gi in working)
        memo = groups[gi].excluded_items  # plan assembly's memo (not kept in a history snapshot)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = _explained(groups[gi], config, gi in working, None)
        return hit
    return _explained(groups[gi], config, gi in working, pick)


def _explained(group: GroupView, config: LevelsConfig, working: bool, pick: GroupPick | None
               ) -> tuple[tuple[str, str] | None, dict[int, str] | None]:
    permanent, session, other = _static_levels(group, config)
    level_of = {ai: PERMANENT for ai in permanent}
    level_of.update((ai, SESSION) for ai in session)
    level_of.update((ai, WORKING if working else VOLATILE) for ai in other)
    if not level_of:
        return None, None
    if pick is None and len(set(level_of.values())) == 1:
        return _SHARED[next(iter(level_of.values()))], None
    details = {ai: _SHARED[level][1] for ai, level in level_of.items() if pick is None or ai not in pick.reasons}
    return None, details or None
