"""Summaries in a plan: each one is taken whole or not at all, and the protected turns inside its span
(a standing instruction, a sticky pin's turn — kept verbatim when the summary was made) come with it.

Every strategy but ``levels`` gets the summaries before it picks history; ``levels`` places them in its
session level (seed 004: task summaries and key decisions live there). A summary takes at most
``planner.summary_share`` of what is left for the history: at a small budget a long summary would crowd out the
turns the question needs, which the retrieval strategies can still recall verbatim.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.planner.candidates import Cand

REASON = "summary"


def fill_summaries(summaries: Sequence[Cand], kept: Mapping[str, tuple[int, ...]], selection: HistorySelection,
                   budget: Budget, detail: str = "", share: float = 1.0) -> None:
    """Each summary whole while it fits ``share`` of what the budget had left when the summaries began."""
    room = budget.child(int(max(0, budget.remaining) * share))
    for cand in summaries:
        if cand.decided:
            continue
        if not budget.fits(cand.tokens):
            cand.exclude("over_budget", f"the summary needs {cand.tokens} tokens; {max(0, budget.remaining)} are left")
            continue
        label = cand.id.replace("summary:", "s")
        if not room.fits(cand.tokens):
            cand.exclude("over_budget", f"the summary needs {cand.tokens} tokens, more than its share "
                                        f"({share:.0%}: {max(0, room.remaining)} tokens) of the history budget"
                                        + ("; the turns it stands in for stay candidates" if selection.summarised
                                           else ""))
            for gi in kept.get(cand.id, ()):  # a standing instruction, a pinned turn: first, summary or not
                selection.fill_group(gi, budget, REASON, partial=False,
                                     detail=f"protected turn sent verbatim (summary {label} did not fit its share)")
            continue
        room.used += cand.tokens  # charged to the plan below, with the turns it brings
        budget.take(cand.tokens)
        cand.include(REASON)
        if detail:
            cand.detail = f"{detail}; {cand.detail}" if cand.detail else detail
        for gi in kept.get(cand.id, ()):
            selection.fill_group(gi, budget, REASON, detail=f"protected turn sent verbatim beside summary {label}",
                                 partial=False)
