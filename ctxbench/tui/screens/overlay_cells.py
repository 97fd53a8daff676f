"""The cells of one overlay row, as the table shows them: the plan's figures, or what an action the user asked
for will make of them (marked with "…" until the plan that includes it arrives)."""
from __future__ import annotations

from rich.text import Text

from ctxbench.tui.present import tok
from ctxbench.tui.screens.overlay_rows import (
    KIND_SHORT,
    PIN_BADGE,
    PIN_BADGE_SHORT,
    SECTION_SHORT,
    SUGGESTED_BADGE,
    OverlayRow,
    fit_label,
)

PENDING_REASON = {"dropping": "dropping…", "rejected": "rejected…"}  # the reason column while an action is pending


def cell(text: str, style: str) -> Text:
    """A cell cut with "…" where its column ends (never silently)."""
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")


def pin_shown(row: OverlayRow, pending: dict[str, str]) -> str:
    """The pin kind ``row`` shows: one an action asked for (``pending``: target -> what it shows), else the plan's."""
    asked = pending.get(row.target)
    return asked if asked in ("sticky", "leased", "") else row.pin


def divider_cells(row: OverlayRow, w: dict[str, int]) -> list[Text]:
    """A delimiter row's cells: the rule sits in the kind column so the label column holds the whole text, even at
    80x24."""
    rule = Text("─" * w["kind"], style="bold")
    label = Text(row.text, style="bold", no_wrap=True, overflow="ellipsis")
    return [Text(""), Text(""), rule, label, Text(""), Text(""), Text("")]


def row_cells(row: OverlayRow, w: dict[str, int], pending: dict[str, str]) -> list[Text]:
    """The pin, section, kind, label, tokens, reason and score cells of ``row`` in columns ``w`` wide."""
    dim = "dim" if row.muted else ""
    if row.item is not None:
        i = row.item
        pin = pin_shown(row, pending)
        badge = (PIN_BADGE if w["pin"] >= 3 else PIN_BADGE_SHORT).get(pin, "")
        if row.target in pending and badge:
            badge += "…"  # asked for, not yet in a plan
        section = i.section if w["section"] >= 9 else SECTION_SHORT.get(i.section, i.section[:4])
        reason = PENDING_REASON.get(pending.get(row.target, ""), i.reason)
        kind = i.kind if w["kind"] >= 14 else KIND_SHORT.get(i.kind, i.kind)
        return [Text(badge, style=dim or "bold"), cell(section, dim), cell(kind, dim),
                fit_label(i.label, w["label"], dim),
                Text(tok(i.tokens) if row.calibrated is None else f"≈{tok(row.calibrated)}", style=dim,
                     justify="right"),
                cell(reason, dim if i.included else "dim italic"),
                Text(f"{i.score:.3f}" if i.score else "", style=dim, justify="right")]
    s = row.suggestion
    assert s is not None
    decided = pending.get(s.target)
    badge = SUGGESTED_BADGE[1] if w["pin"] < 3 else SUGGESTED_BADGE[0]
    if decided == "sticky":
        badge = (PIN_BADGE if w["pin"] >= 3 else PIN_BADGE_SHORT)["sticky"] + "…"
    why = PENDING_REASON.get(decided or "", s.why) if decided != "sticky" else "accepted: pinning…"
    return [Text(badge, style="dim"), Text("", style="dim"),
            cell("suggested", "dim"), fit_label(s.label, w["label"], "dim"),
            Text(tok(s.tokens) if s.tokens else "", style="dim", justify="right"), cell(why, "dim italic"),
            Text(f"{s.score:.3f}" if s.score else "", style="dim", justify="right")]


def detail_line(row: OverlayRow | None, counts) -> Text:
    """The line under the table for the selected ``row``: its id, tokens (calibrated ones with ``counts``, the plan
    view's token counts, when the row has them), reason and detail; a suggestion's why and keys."""
    if row is None or row.kind == "divider":
        return Text("")
    if row.item is not None:
        i = row.item
        tokens = f"{tok(i.tokens)} tok"
        if row.calibrated is not None and counts is not None:
            tokens = f"≈{tok(row.calibrated)} tok calibrated ({tok(i.tokens)} {counts.tokenizer})"
        bits = [i.id, tokens, *([f"{tok(i.bytes)} bytes of the request"] if i.bytes else []), i.reason]
        if i.detail:
            bits.append(i.detail)
        if i.redacted:
            bits.append(f"redacted: {i.redacted}")
        if row.pin:
            bits.append(f"pinned {row.pin}")
        return Text(" · ".join(bits), no_wrap=True, overflow="ellipsis")
    if row.suggestion is not None:
        s = row.suggestion
        return Text(f"suggested: {s.target} · {s.why} · ctrl+y accept (pin sticky) · ctrl+n reject", no_wrap=True,
                    overflow="ellipsis")
    return Text("")
