"""What changed between two plans: the items that entered, left, or moved section / changed tokens.

Each item carries both sides (its section, tokens, whether it was included and why), so a diff can say
"left: over_budget (was recent_window)" for any two stored plans, across turns and across branches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ItemSide:
    """One item as one plan had it."""

    section: str
    tokens: int
    included: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"section": self.section, "tokens": self.tokens, "included": self.included, "reason": self.reason}


@dataclass(frozen=True)
class DiffItem:
    id: str
    kind: str
    label: str
    before: ItemSide | None  # None: the first plan had no such candidate
    after: ItemSide | None  # None: the second plan had no such candidate
    why: str = ""  # a short explanation in words (e.g. what took a left item's place)

    @property
    def tokens_delta(self) -> int:
        return (self.after.tokens if self.after and self.after.included else 0) - (
            self.before.tokens if self.before and self.before.included else 0)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "label": self.label,
                "before": self.before.to_json() if self.before else None,
                "after": self.after.to_json() if self.after else None,
                "section": (self.after or self.before).section if (self.after or self.before) else "",
                "tokens": (self.after or self.before).tokens if (self.after or self.before) else 0,
                "reasons": [s.reason if s else None for s in (self.before, self.after)],
                "why": self.why}


@dataclass(frozen=True)
class PlanDiff:
    """``before`` → ``after``: included in ``after`` only (entered), in ``before`` only (left), in both but in
    another section or with other tokens (changed)."""

    before_id: str
    after_id: str
    tokens_before: int
    tokens_after: int
    entered: tuple[DiffItem, ...] = ()
    left: tuple[DiffItem, ...] = ()
    changed: tuple[DiffItem, ...] = ()
    summary: str = ""  # "+3 cards, −2 turns, +410 tok"

    @property
    def empty(self) -> bool:
        return not (self.entered or self.left or self.changed)

    def to_json(self) -> dict[str, Any]:
        return {"before": self.before_id, "after": self.after_id, "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after, "tokens_delta": self.tokens_after - self.tokens_before,
                "summary": self.summary,
                "entered": [i.to_json() for i in self.entered], "left": [i.to_json() for i in self.left],
                "changed": [i.to_json() for i in self.changed]}
