"""Who spoke and when, as a transcript writes it at the start of a message: ``[1:56 pm on 8 May, 2023] Caroline: ...``.

Imported conversations between people (a chat export, a meeting, LoCoMo) carry a speaker label ("Name: ") and
often a date stamp ("[...]" holding a digit) at the start of each message. They say who wrote the message and
when, not what it is about: the fused strategy weighs the speaker a query names on its own, so the words it
compares by meaning are the message's own (``body``) and the query's without the speakers' names
(``without_names``).
"""
from __future__ import annotations

import re
from typing import Iterable

# "[...]" holding a digit, a time or a date ("[1:56 pm on 8 May, 2023]", "[12:03]"); "[WIP]" is not a stamp
DATE_STAMP = re.compile(r"^\s*\[[^\]\n]{0,80}\d[^\]\n]{0,80}\]\s*")
# "Name: " or "First Last: " (up to three capitalised words), after an optional "[...]"
SPEAKER_LABEL = re.compile(r"^\s*(?:\[[^\]\n]{1,80}\]\s*)?([A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30}){0,2}):\s")


def speaker_label(text: str) -> str:
    """The speaker label a message opens with, or ""."""
    found = SPEAKER_LABEL.match(text) if text else None
    return found.group(1) if found else ""


def without_stamp(text: str) -> str:
    """``text`` without a leading date stamp."""
    return DATE_STAMP.sub("", text, count=1) if text.startswith(("[", " ", "\t", "\n")) else text


def body(text: str, speakers: frozenset[str] | set[str]) -> str:
    """``text`` without its leading date stamp and, when it is one of ``speakers``, its speaker label."""
    rest = without_stamp(text)
    found = SPEAKER_LABEL.match(rest) if speakers else None
    if found is not None and found.group(1) in speakers:
        return rest[found.end():]
    return rest


def without_names(query: str, names: Iterable[str]) -> str:
    """``query`` without the ``names`` (and their possessive "'s"), whitespace folded; the query itself when
    nothing else would be left."""
    out = query
    for name in sorted(names, key=len, reverse=True):
        if name:
            out = re.sub(rf"\b{re.escape(name)}(?:'s|’s)?\b", " ", out)
    folded = " ".join(out.split())
    return folded if re.search(r"\w", folded) else query


def reads_as_transcript(named: int, texted: int, share: float) -> bool:
    """Whether a history reads as a transcript of speakers: ``named`` of its ``texted`` messages (or atoms) open
    with a speaker label, at least ``share`` (> 0) of them. One rule for what is embedded and what is weighed."""
    return share > 0 and texted > 0 and named >= share * texted
