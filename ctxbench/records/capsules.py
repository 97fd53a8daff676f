"""Capsules of code (seed 002, advanced): short summaries of a module or a process, with staleness tracking.

A :class:`Capsule` says what a module (or a process: an entry point and the calls it makes) does, in a
few sentences, written by a model (``source`` ``model:NAME``) or put together from docstrings and
signatures (``extractive``). It records the content hash of every file it covers; when the code index
sees one of those files change, the capsule is marked **stale** (``stale_files`` names the files). A
capsule is a retrieval aid and an orientation layer, never ground truth: it is sent with a note saying
so, and a stale one says which file changed.

A :class:`CapsuleHit` is a capsule offered to the planner by a RetrievalSet, with its score and why;
``withheld`` is set when it must not be sent (a stale capsule while ``[capsules] include_stale`` is off).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MODULE = "module"
PROCESS = "process"
SOURCE_EXTRACTIVE = "extractive"
MODEL_SOURCE_PREFIX = "model:"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def first_sentence(text: str, max_chars: int) -> str:
    """The first sentence of ``text`` on one line (whitespace folded), cut to ``max_chars`` with an ellipsis."""
    flat = " ".join(text.split())
    if not flat:
        return ""
    sentence = _SENTENCE_END.split(flat, maxsplit=1)[0]
    return sentence if len(sentence) <= max_chars else sentence[: max_chars - 1].rstrip() + "…"


@dataclass(frozen=True)
class Capsule:
    id: int  # 0 until stored
    repo: str  # the indexed root it belongs to
    kind: str  # module | process
    subject: str  # the module id, or the entry point's symbol id for a process
    title: str  # "module ledgerlite.money", "process `ledger` (console script)"
    text: str
    source: str  # "extractive" or "model:NAME"
    confidence: float  # 0..1: how much of what it says rests on the code's own words (docstrings) or a model
    generated_at: str
    files: tuple[tuple[str, str], ...]  # (file path, content hash) of every file it covers, when generated
    stale_files: tuple[str, ...] = ()  # covered files whose content changed (or that were removed) since
    stale_at: str = ""  # when the index first saw it stale

    @property
    def label(self) -> str:
        return f"c{self.id}"

    @property
    def stale(self) -> bool:
        return bool(self.stale_files)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(path for path, _ in self.files)

    def headline(self, max_chars: int = 120) -> str:
        """The first sentence of its text, cut to ``max_chars``."""
        return first_sentence(self.text, max_chars)

    @property
    def status(self) -> str:
        return "stale" if self.stale else "fresh"

    def stale_note(self) -> str:
        """``ledgerlite/money.py changed since it was written`` ("" when fresh)."""
        if not self.stale_files:
            return ""
        shown = ", ".join(self.stale_files[:3]) + (f" and {len(self.stale_files) - 3} more"
                                                   if len(self.stale_files) > 3 else "")
        return f"{shown} changed since it was written"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "repo": self.repo, "kind": self.kind, "subject": self.subject, "title": self.title,
            "source": self.source, "confidence": round(self.confidence, 3), "generated_at": self.generated_at,
            "status": self.status, "stale_files": list(self.stale_files), "stale_at": self.stale_at or None,
            "files": [{"path": p, "sha": h} for p, h in self.files], "text": self.text,
        }


@dataclass(frozen=True)
class CapsuleHit:
    """A capsule in a RetrievalSet: what the planner may send, with its score and why."""

    capsule: Capsule
    score: float
    why: str = ""
    withheld: str = ""  # why it must not be sent ("" : it may be)

    @property
    def id(self) -> str:
        return f"capsule:{self.capsule.id}"
