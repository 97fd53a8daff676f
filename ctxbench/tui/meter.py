"""What the budget meter shows of a plan: its tokens by section against the budget and, for a proxied plan,
how its figures are counted (calibrated to the model's tokenizer, or not). Pure functions, no widgets."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

METER_SECTIONS = ("system", "pins", "history", "retrieval", "scaffold")
# sections a proxied request's plan has beyond those (shown when they hold tokens)
EXTRA_METER_SECTIONS = ("tools", "tool_results", "files")


@dataclass(frozen=True)
class MeterState:
    """What the budget meter shows."""

    sections: tuple[tuple[str, int], ...] = ()
    budget: int = 0
    used: int = 0
    over_budget: bool = False
    over_reason: str = ""
    warning: str = ""  # the auto-compact warning ("" when the history is below the threshold)
    # a proxied plan's counts: how they are counted ("≈ calibrated ×1.80 from 3 billed exchanges (cl100k 6,858)", or
    # "… not calibrated …"); "" for the workbench's own plans
    counts: str = ""
    calibrated: bool = False  # the figures are calibrated to the model's tokenizer (shown with "≈")
    mark: str = ""  # the counts in short, first in the legend: "≈ calibrated ×1.80" or "not calibrated"

    @property
    def free(self) -> int:
        return max(0, self.budget - self.used)

    @property
    def overflow(self) -> int:
        return max(0, self.used - self.budget)


def meter_state(plan, warning: str = "", counts=None) -> MeterState:
    """What the meter shows of ``plan``: by section against its budget; with a proxied plan's ``counts``
    (records.proxy_cost.PlanCounts), their figures (calibrated where they are) and how they were counted."""
    by_name = dict(counts.sections if counts is not None else plan.sections)
    used = int(counts.used if counts is not None else plan.used_tokens)
    names = METER_SECTIONS + tuple(n for n in EXTRA_METER_SECTIONS if by_name.get(n))
    sections = tuple((name, int(by_name.get(name, 0))) for name in names)
    over = bool(plan.over_budget) or used > plan.budget
    return MeterState(sections, int(plan.budget), used, over, plan.over_budget_reason or "", warning,
                      counts.label() if counts is not None else "", bool(counts is not None and counts.calibrated),
                      counts.mark() if counts is not None else "")


def figure(n: int, calibrated: bool) -> str:
    """A token figure as shown: ``≈12,345`` when calibrated to the model's tokenizer, else ``12,345``."""
    return f"≈{n:,}" if calibrated else f"{n:,}"


def with_budget(state: MeterState, budget: int) -> MeterState:
    """``state`` against another budget, before the plan under it is made: the same tokens used (what is known)."""
    if state.budget <= 0:
        return state  # no plan shown yet: nothing known to show against it
    return dataclasses.replace(state, budget=budget, over_budget=state.used > budget,
                               over_reason=state.over_reason if state.used > budget else "")


def meter_cells(state: MeterState, width: int) -> list[tuple[str, int]]:
    """Split ``width`` cells between the sections and ``free`` in proportion to their tokens.

    Every part with tokens gets at least one cell and the cells add up to ``width`` exactly.
    Over budget there is no ``free`` part, so the bar is full.
    """
    if width <= 0:
        return []
    parts = [(name, tokens) for name, tokens in state.sections if tokens > 0]
    if state.free > 0:
        parts.append(("free", state.free))
    if not parts:
        return [("free", width)]
    parts = parts[:width]
    scale = sum(tokens for _, tokens in parts)
    exact = [tokens * width / scale for _, tokens in parts]
    cells = [max(1, int(x)) for x in exact]
    by_remainder = sorted(range(len(parts)), key=lambda i: (exact[i] - int(exact[i]), exact[i]), reverse=True)
    i = 0
    while sum(cells) < width:
        cells[by_remainder[i % len(parts)]] += 1
        i += 1
    while sum(cells) > width:
        widest = max(range(len(parts)), key=lambda j: cells[j])
        cells[widest] -= 1
    return [(name, c) for (name, _), c in zip(parts, cells) if c > 0]
