"""Quoted phrases: a question that quotes text (an error message, a log line) is looked up in the code itself.

Users paste what they saw: ``I get 'duplicated mapping key'``, ``raises "Cannot send a request, as the client
has been closed"``. That text is usually a string literal inside the function that raises or prints it, deep in
its body where neither the card nor the keyword index (the card's head) reaches. Here:

- ``quoted_phrases`` finds the quoted runs of two or more words in a question (single, double or typographic
  quotes; backticks are code and left to the name component);
- ``PhraseIndex`` holds every indexed file's lines as runs of lowercase words (masked like cards), built once
  per index version, and finds the symbols whose lines contain the phrase: the whole phrase when it is short,
  else any ``PHRASE_GRAM`` consecutive words of it (a message in code is often cut by a ``{placeholder}`` or
  split over two string literals);
- a symbol scores the number of distinct word runs of the phrases it holds; the innermost symbol (not a
  module) around a line gets the match.
"""
from __future__ import annotations

import bisect
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ctxbench.records.code import SymbolCard

PHRASE_GRAM = 3  # words of a long phrase that must follow each other in a line of code
MIN_PHRASE_WORDS = 2  # a quoted single word is a name or a value, not a message
_QUOTED = re.compile(r"""(?:(?<![A-Za-z0-9])'([^'\n]{3,200})'(?![A-Za-z0-9]))|"([^"\n]{3,200})"|“([^”\n]{3,200})”|‘([^’\n]{3,200})’""")
_WORD = re.compile(r"[a-z0-9]+")


def phrase_words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(text.lower()))


def quoted_phrases(query: str) -> list[tuple[str, ...]]:
    """The words of each quoted run of ``MIN_PHRASE_WORDS`` or more words in ``query``, in order, no repeats."""
    out: dict[tuple[str, ...], None] = {}
    for m in _QUOTED.finditer(query):
        text = next(g for g in m.groups() if g is not None)
        words = phrase_words(text)
        if len(words) >= MIN_PHRASE_WORDS:
            out.setdefault(words, None)
    return list(out)


def phrase_grams(words: Sequence[str], size: int = PHRASE_GRAM, stopwords: Iterable[str] = ()) -> list[str]:
    """What a line must contain for ``words``: the whole phrase when short, else each run of ``size`` words
    (but runs of stop words only, like ``it is a``, which say nothing)."""
    stop = set(stopwords)
    runs = [words] if len(words) <= size else [words[i:i + size] for i in range(len(words) - size + 1)]
    return list(dict.fromkeys(" ".join(run) for run in runs if any(w not in stop for w in run)))


@dataclass
class _File:
    text: str  # " w w w \n w w \n ...": each line's words between spaces, lines joined by newlines
    starts: list[int]  # offset of each line in ``text``
    spans: list[tuple[int, int, str]]  # (first line, last line, symbol id) of its non-module symbols, by size


class PhraseIndex:
    """Every indexed file's lines as lowercase words, and which symbols hold a quoted phrase."""

    def __init__(self, cards: Mapping[str, SymbolCard], read: Callable[[str], str | None]):
        self._files: dict[str, _File] = {}
        by_path: dict[str, list[tuple[int, int, str]]] = {}
        for sid, card in cards.items():
            if card.kind != "module":
                by_path.setdefault(card.path, []).append((card.line, card.end_line, sid))
        for path, spans in sorted(by_path.items()):
            source = read(path)
            if source is None:
                continue
            parts, starts, at = [], [], 0
            for line in source.splitlines():
                piece = " " + " ".join(_WORD.findall(line.lower())) + " "
                starts.append(at)
                parts.append(piece)
                at += len(piece) + 1
            spans.sort(key=lambda s: (s[1] - s[0], s[0], s[2]))  # innermost first
            self._files[path] = _File("\n".join(parts), starts, spans)

    def search(self, phrases: Iterable[Sequence[str]], limit: int, stopwords: Iterable[str] = ()
               ) -> list[tuple[str, float]]:
        """(symbol, distinct word runs of the phrases found in it) best first, at most ``limit``."""
        stop = tuple(stopwords)
        grams = [g for words in phrases for g in phrase_grams(words, stopwords=stop)]
        found: dict[str, set[str]] = {}
        for f in self._files.values():
            for gram in grams:
                needle = f" {gram} "
                at = f.text.find(needle)
                while at >= 0:
                    line = bisect.bisect_right(f.starts, at)  # 1-based line number
                    owner = next((sid for first, last, sid in f.spans if first <= line <= last), None)
                    if owner is not None:
                        found.setdefault(owner, set()).add(gram)
                    at = f.text.find(needle, at + 1)
        ranked = sorted(((sid, float(len(g))) for sid, g in found.items()), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:limit]


class PhraseIndexes:
    """The phrase index of a repository, built on first use and again when its cards change."""

    def __init__(self, root: Path | str, secret_globs: tuple[str, ...]):
        self.root = Path(root)
        self.secret_globs = secret_globs
        self._built: tuple[str, PhraseIndex] | None = None
        self._lock = threading.Lock()

    def get(self, version: str, cards: Mapping[str, SymbolCard]) -> PhraseIndex:
        from ctxbench.codegraph.code_context import read_masked

        with self._lock:
            if self._built is None or self._built[0] != version:
                self._built = (version, PhraseIndex(cards, lambda rel: read_masked(self.root, rel, self.secret_globs)))
            return self._built[1]
