"""When a transcript says a message was written, read from its text: a leading date stamp
(``[1:56 pm on 8 May, 2023] Caroline: ...``, ``[2023-05-08 13:56]``, ``[May 8, 2023]``) or a line such as aider's
``# aider chat started at 2024-05-01 10:00:00``. Pure: text in, ISO 8601 (no zone) or "" out.

:func:`fill_times` gives the messages of an import that carry no time one from what the transcript does carry:
their own stamp, else the time of the message before them (the order), so a conversation exported without times
keeps its sittings apart (the ``fused`` strategy's episodes) instead of all getting the import's time.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Sequence, TypeVar

MONTHS = {m: n for n, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_TIME = r"(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?"
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2}))?)?")
_DAY_MONTH = re.compile(rf"(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+(\d{{4}})", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})", re.IGNORECASE)
_CLOCK = re.compile(rf"\b{_TIME}(?=\s*(on\b|,|$))", re.IGNORECASE)
_LEADING = re.compile(r"^\s*\[([^\]\n]{1,80})\]")


def _clock(text: str) -> tuple[int, int, int]:
    found = _CLOCK.search(text)
    if not found or (found.group(2) is None and found.group(4) is None):
        return 0, 0, 0
    hour, minute, second = int(found.group(1)), int(found.group(2) or 0), int(found.group(3) or 0)
    half = (found.group(4) or "").lower().replace(".", "")
    if half == "pm" and hour < 12:
        hour += 12
    elif half == "am" and hour == 12:
        hour = 0
    return hour, minute, second


def parse_stamp(text: str) -> str:
    """The date (and time) ``text`` names, as ISO 8601, or "" when it names no whole date."""
    try:
        iso = _ISO.search(text)
        if iso:
            y, mo, d, h, mi, s = (int(g) if g else 0 for g in iso.groups())
            return datetime(y, mo, d, h, mi, s).isoformat()
        found = _DAY_MONTH.search(text)
        if found:
            day, month, year = int(found.group(1)), MONTHS[found.group(2).lower()[:3]], int(found.group(3))
        else:
            found = _MONTH_DAY.search(text)
            if not found:
                return ""
            month, day, year = MONTHS[found.group(1).lower()[:3]], int(found.group(2)), int(found.group(3))
        hour, minute, second = _clock(text[: found.start()] + " " + text[found.end():])
        return datetime(year, month, day, hour, minute, second).isoformat()
    except ValueError:  # 31 February and the like
        return ""


def leading_stamp(text: str) -> str:
    """The time a message's leading ``[...]`` stamp names (ISO 8601), or ""."""
    found = _LEADING.match(text) if text else None
    return parse_stamp(found.group(1)) if found else ""


M = TypeVar("M")


def fill_times(messages: Sequence[M], *, content: str = "content", created_at: str = "created_at") -> list[str]:
    """A time per message: its own, else its leading stamp's, else the one before it (in order); "" before the
    first known one. When no message has a time of its own or a stamp, every one stays "" (the import's time)."""
    out: list[str] = []
    last = ""
    for m in messages:
        own = getattr(m, created_at) or leading_stamp(getattr(m, content) or "")
        if own:
            last = own
        out.append(own or last)
    return out
