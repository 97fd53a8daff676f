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
does not apply (the working level is the recent window here).
"""
from __future__ import annotations

import re
from functools import lru_cache

from ctxbench.config import LevelsConfig
from ctxbench.planner.atoms import ATOM_USER, Atom
from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.planner.strategies import StrategyContext

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


def is_instruction(atom: Atom, config: LevelsConfig) -> bool:
    if atom.kind != ATOM_USER:
        return False
    if config.instruction_flag in atom.flags:
        return True
    key = (atom, config.instruction_phrases)
    hit = _INSTRUCTION_CACHE.get(key)
    if hit is None:
        pattern = _phrase_pattern(config.instruction_phrases)
        hit = bool(pattern and pattern.search(atom.user_text))
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


def classify(selection: HistorySelection, config: LevelsConfig) -> dict[str, list[tuple[int, int]]]:
    """(group index, atom index) per level, chronological."""
    available = selection.available()
    working = set(available[-config.working_groups :]) if config.working_groups > 0 else set()
    session_flags = frozenset(config.session_flags)
    out: dict[str, list[tuple[int, int]]] = {level: [] for level in LEVELS}
    for gi in available:
        group = selection.groups[gi]
        in_working = gi in working
        for ai, atom in enumerate(group.atoms):
            if atom.exclusion:
                continue
            if atom.kind == ATOM_USER and is_instruction(atom, config):
                level = PERMANENT
            elif atom.flags and not session_flags.isdisjoint(atom.flags):
                level = SESSION
            elif in_working:
                level = WORKING
            else:
                level = VOLATILE
            out[level].append((gi, ai))
    return out


def select(selection: HistorySelection, budget: Budget, context: StrategyContext) -> None:
    config = context.config.levels
    caps = level_budgets(context.plan_budget, config)
    missed: dict[int, dict[int, str]] = {}
    for level, atoms in classify(selection, config).items():
        share = budget.child(caps[level]) if level in caps else budget
        detail = f"level: {level}"
        full = f"{detail} (level budget full)"
        smallest = min((selection.groups[gi].atoms[ai].tokens for gi, ai in atoms), default=0)
        for gi, ai in reversed(atoms):
            if share.remaining < smallest or not selection.include_atom(gi, ai, share, REASON, detail):
                missed.setdefault(gi, {})[ai] = full
    for gi, details in missed.items():
        if gi not in selection.picks and len(set(details.values())) == 1:
            selection.set_default(gi, "over_budget", next(iter(details.values())))  # one level: no per-atom detail
        else:
            selection.atom_details[gi] = details
