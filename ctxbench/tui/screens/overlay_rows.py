"""The context overlay's rows: what each candidate, delimiter and suggestion shows, filtering and column
widths. Pure functions over a PlanView, so the screen (``overlay``) only lays them out."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from rich.text import Text

from ctxbench.records.plans import PlanItem
from ctxbench.records.views import PlanView, Suggestion

SECTION_SHORT = {"system": "sys", "pins": "pins", "history": "hist", "retrieval": "retr", "scaffold": "scaf"}
PIN_BADGE = {"sticky": "★ sticky", "leased": "◐ leased", "ephemeral": "○ ephem"}
PIN_BADGE_SHORT = {"sticky": "★", "leased": "◐", "ephemeral": "○"}
SUGGESTED_BADGE = ("+ sugg", "+")
KIND_SHORT = {"system_prompt": "prompt", "system_message": "sys msg", "history_atom": "atom",
              "current_turn": "current", "symbol_card": "card", "scratchpad": "scratch",
              "tool_definitions": "tools"}
MANDATORY_IDS = ("system", "current")
ROW_KINDS = ("included", "excluded", "suggestion", "divider")


@dataclass(frozen=True)
class OverlayRow:
    key: str
    kind: str  # included | excluded | suggestion | divider
    item: PlanItem | None = None
    suggestion: Suggestion | None = None
    pin: str = ""  # the pin kind shown as a badge
    text: str = ""  # divider text
    calibrated: int | None = None  # a proxied item's tokens calibrated to the model's tokenizer (None: not calibrated)

    @property
    def muted(self) -> bool:
        """Shown dimmed: excluded items, suggestions, and stale capsules (their summary may no longer be true)."""
        if self.kind in ("excluded", "suggestion"):
            return True
        return self.item is not None and self.item.kind == "capsule" and self.item.detail.startswith("stale")

    @property
    def target(self) -> str:
        if self.item is not None:
            return self.item.id
        if self.suggestion is not None:
            return self.suggestion.target
        return ""

    @cached_property
    def haystack(self) -> str:
        """What the filter searches: the row's columns and detail, and the content the item sends."""
        if self.item is not None:
            i = self.item
            content = " ".join(str(m.get("content") or "") for m in i.messages)
            return " ".join((i.id, i.kind, i.section, i.label, i.reason, self.pin, i.detail, content)).lower()
        if self.suggestion is not None:
            s = self.suggestion
            return " ".join((s.target, s.label, s.why, "suggested", s.content)).lower()
        return ""


def build_rows(view: PlanView) -> list[OverlayRow]:
    rows: list[OverlayRow] = []
    plan = view.plan
    counts = view.counts if view.counts is not None and view.counts.calibrated else None
    for kind, items in (("included", plan.included), ("excluded", plan.excluded)):
        if kind == "excluded" and items:
            rows.append(OverlayRow("div:excluded", "divider", text=f"excluded ({len(items)})"))
        for item in items:
            pin = item.pin or (p.kind if (p := view.pin_for(item.id)) else "")
            rows.append(OverlayRow(f"{kind[:3]}:{item.id}", kind, item=item, pin=pin,
                                   calibrated=counts.tokens(item.id, item.tokens) if counts is not None else None))
    rows.append(OverlayRow("div:suggested", "divider", text=f"suggested pins ({len(view.suggestions)})"))
    for s in view.suggestions:
        rows.append(OverlayRow(f"sug:{s.target}", "suggestion", suggestion=s))
    return rows


def fit_label(label: str, width: int, style: str = "") -> Text:
    """``label`` in ``width`` cells; a long ``card pkg.mod.Name`` / ``path a/b/c.py`` keeps its
    kind word and the tail of the name (the part that tells two cards apart), not its head."""
    word, _, name = label.partition(" ")
    if len(label) > width and word in ("card", "path") and name and width > len(word) + 4:
        room = width - len(word) - 2
        label = f"{word} …{name[-room:]}"
    return Text(label, style=style, no_wrap=True, overflow="ellipsis")


def filter_rows(rows: list[OverlayRow], text: str) -> list[OverlayRow]:
    """Rows whose text holds every word of ``text``; a delimiter stays when something stays below it."""
    words = text.lower().split()
    if not words:
        return rows
    kept = [r for r in rows if r.kind == "divider" or all(w in r.haystack for w in words)]
    out: list[OverlayRow] = []
    for n, row in enumerate(kept):
        if row.kind == "divider":
            following = kept[n + 1] if n + 1 < len(kept) else None
            if row.key == "div:suggested" or (following is not None and following.kind != "divider"):
                out.append(row)
        else:
            out.append(row)
    return out


LABEL_MIN = 22  # cells: "suggested pins (NN)" and the tail of a dotted name


def column_widths(width: int) -> dict[str, int]:
    """Column widths for a table ``width`` cells wide (each column also takes 2 cells of padding)."""
    wide = width >= 110
    widths = {"pin": 8 if wide else 1, "section": 9 if wide else 4, "kind": 14 if wide else 9,
              "tokens": 7, "reason": 15, "score": 6}
    fixed = sum(widths.values()) + 2 * 7
    if width - fixed - 2 < LABEL_MIN:
        # very narrow (80x24): tokens, reason and score give way so the label column keeps the
        # delimiter and enough of a name to tell two cards apart
        widths.update(tokens=6, reason=11, score=5)
        fixed = sum(widths.values()) + 2 * 7
    widths["label"] = max(10, width - fixed - 2)
    return widths
