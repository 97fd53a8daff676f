"""The top line: session, repository, strategy, and one slot per background job (index, embedder, turn).

The slots are what the user waits for, so they always show in full when the line can hold them: the
title gives way first (cut with "…" to a share of the room left), then the details; only when the slots
alone are wider than the line are they cut too.
"""
from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ctxbench.records.views import Progress

MARKS = {"busy": "◌", "ready": "●", "error": "✗"}
TITLE_MIN = 12  # cells a long title keeps (with its "…") when the line is short
TITLE_SHARE = 0.5  # at most this share of the room the slots leave goes to a long title
DETAIL_MIN = 8  # cells below which the details are left out rather than shown as a stub
SLOT_GAP = "  "


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, ending in "…" when cut."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def slot_text(update: Progress) -> str:
    text = update.text
    if update.fraction is not None and update.state == "busy":
        text += f" {int(update.fraction * 100)}%"
    return f"{MARKS.get(update.state, '·')} {text}"


def fit_status(width: int, title: str, detail: str, slots: list[str]) -> tuple[str, str, list[str]]:
    """The title, the detail and the slot texts cut so the line fits ``width`` cells, the slots kept whole
    whenever they fit: ``" TITLE "`` + ``" DETAIL"`` + ``"  SLOT"`` per slot."""
    slots_width = sum(len(SLOT_GAP) + len(s) for s in slots)
    room = width - slots_width
    if room < TITLE_MIN + 2:  # the slots alone (nearly) fill the line: a short title, then the slots as they fit
        title = cut(title, TITLE_MIN)
        left = width - len(title) - 2
        kept = []
        for s in slots:
            piece = cut(s, left - len(SLOT_GAP))
            if piece:
                kept.append(piece)
            left -= len(SLOT_GAP) + len(piece)
        return title, "", kept
    detail_width = len(detail) + 1 if detail else 0
    if len(title) + 2 + detail_width > room:  # the title gives way first, down to its share (the detail is cut after)
        title = cut(title, max(TITLE_MIN + 2, int(room * TITLE_SHARE), room - detail_width) - 2)
    left = room - len(title) - 3
    return title, cut(detail, left) if detail and left >= DETAIL_MIN else "", slots


class StatusLine(Widget):
    COMPONENT_CLASSES = {"status-line--title", "status-line--busy", "status-line--ready", "status-line--error",
                         "status-line--dim"}
    DEFAULT_CSS = "StatusLine { height: 1; }"

    title: reactive[str] = reactive("ctxbench")
    detail: reactive[str] = reactive("")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._slots: dict[str, Progress] = {}

    def set_slot(self, update: Progress) -> None:
        if update.state == "idle":
            self._slots.pop(update.slot, None)
        else:
            self._slots[update.slot] = update
        self.refresh()

    def slot(self, name: str) -> Progress | None:
        return self._slots.get(name)

    def render(self) -> Text:
        updates = list(self._slots.values())
        title, detail, slots = fit_status(self.size.width or 80, self.title, self.detail,
                                          [slot_text(u) for u in updates])
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f" {title} ", style=self.get_component_rich_style("status-line--title"))
        if detail:
            line.append(f" {detail}", style=self.get_component_rich_style("status-line--dim"))
        for update, text in zip(updates, slots):
            line.append(SLOT_GAP)
            line.append(text, style=self.get_component_rich_style(f"status-line--{update.state}"))
        return line
