"""Excerpts chosen by the question: the window of a symbol's body that best matches it.

A card's stored excerpt is the head of the symbol (its first lines), which repeats the signature and
the doc comment the card already shows and often stops before the part a question is about. Here the
excerpt of a hit is chosen per query instead:

- the body region starts after the signature and the doc comment (``body_region``), so nothing the
  card shows is sent twice;
- a body that fits in ``excerpt_lines`` is sent whole; a longer one is cut to the window of that many
  lines with the highest keyword score: each query word found in the window counts its inverse line
  frequency in this body (a word on every line says little), each matching line a share of its words' weight,
  words matched after light stemming
  (``stem``) and split out of identifiers like the keyword index splits them;
- a window that starts inside a nested block moves up to the line opening the body-level statement that
  holds it (``statement_start``), and a body only a little longer than the window is sent whole;
- the lines keep their real file line numbers, printed in front of each line (blank lines may be left out:
  the numbers show the gap).

Files are read from the repository with secrets masked as cards mask them (``SourceLines``, cached by
path, size and mtime); a file that cannot be read, or whose lines no longer cover the symbol, keeps the
card's stored excerpt. What depends only on a file's text is kept with its lines (``FileLines``): the
words of each line, the body region of each symbol and the rendered windows, so a warm query computes
only what depends on its words. One ``WordMatcher`` serves every hit of a query.
"""
from __future__ import annotations

import math
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ctxbench.records.code import SymbolCard
from ctxbench.retrieval.vectors import split_identifier

_SUFFIXES = ("ings", "ing", "ied", "ies", "ed", "es", "s")
_STRING_START = re.compile(r"""^[rRbBuUfF]{0,2}(\"\"\"|''')""")
_OPENERS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
_TOKEN = re.compile(r"[A-Za-z0-9]+")  # the runs split_identifier splits a text into before camel case
_TOKEN_WORDS: dict[str, tuple[str, ...]] = {}
TOKEN_WORDS_CACHED = 200_000  # distinct tokens whose stems are remembered (then forgotten all at once)
OCCURRENCE_SHARE = 0.05  # a window's score: its distinct query words by weight + this much of every match
STRONG_LINE_SHARE = 0.5  # lines matching at least this share of the window's best line anchor its position


@dataclass(frozen=True)
class Excerpt:
    text: str  # the lines, each prefixed with its file line number
    first: int  # first file line shown
    last: int  # last file line shown


def stem(word: str) -> str:
    """A light stemmer shared by query words and code words: ``renders`` / ``rendering`` -> ``render``."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if suffix in ("ied", "ies"):
                word += "y"
            break
    return word


def query_words(terms: Iterable[str]) -> frozenset[str]:
    """The stems of a query's content words (``keyword.query_terms`` output)."""
    return frozenset(stem(t) for t in terms if len(t) > 1)


def line_words(line: str) -> set[str]:
    """The stems of a line's words (identifiers split as the keyword index splits them), one-letter words out."""
    return set().union(*map(_token_words, _TOKEN.findall(line)))


def _token_words(token: str) -> tuple[str, ...]:
    """The stems of one alphanumeric run's words, remembered (they depend on the token alone)."""
    found = _TOKEN_WORDS.get(token)
    if found is None:
        if len(_TOKEN_WORDS) >= TOKEN_WORDS_CACHED:
            _TOKEN_WORDS.clear()
        found = _TOKEN_WORDS[token] = tuple({stem(w) for w in split_identifier(token) if len(w) > 1})
    return found


class WordMatcher:
    """Which query word a code word stands for: the same stem, one a prefix of the other (``pipe`` /
    ``piped``, ``clos`` / ``close``), or a query word of 4+ letters inside it (``pipe`` in ``epipe``,
    ``wrap`` in ``softwrap``: identifiers run words together)."""

    def __init__(self, words: frozenset[str]):
        self.words = words
        ordered = sorted(words)
        self._inside = [q for q in ordered if len(q) >= 4]  # query words that may stand inside a longer code word
        # a code word of 4+ letters that a query word extends by 1-3 letters -> the first such query word
        self._extended: dict[str, str] = {}
        for q in ordered:
            for n in range(max(4, len(q) - 3), len(q)):
                self._extended.setdefault(q[:n], q)
        self._seen: dict[str, str | None] = {}
        self._matched: dict[str, str] = {}  # the code words seen so far that stand for a query word
        self._matched_words: set[str] = set()  # their keys, for set intersections

    def __call__(self, word: str) -> str | None:
        """The first query word (in sorted order) that ``word`` stands for, or None."""
        found = self._seen.get(word, "")
        if found != "":
            return found
        if word in self.words:
            match: str | None = word
        else:
            match = extended = self._extended.get(word)  # a query word longer than it, starting with it
            for q in self._inside:  # or the first (sorted) query word inside it, when that comes before
                if extended is not None and q >= extended:
                    break
                if len(q) <= len(word) and q in word:
                    match = q
                    break
        self._seen[word] = match
        if match is not None:
            self._matched[word] = match
            self._matched_words.add(word)
        return match

    def per_line(self, sets: Sequence[Iterable[str]]) -> list[set[str]]:
        """The query words each line's words stand for (``{self(w) for w in ws} - {None}`` per line)."""
        seen = self._seen
        for word in set().union(*sets).difference(seen):
            self(word)
        matched = self._matched
        common = self._matched_words.intersection
        return [{matched[w] for w in common(ws)} if ws else set() for ws in sets]


class FileLines:
    """The masked lines of one file and what is derived from them alone, computed on first use and kept as
    long as the lines are: each line's words (``line_words``), the body region of a definition, rendered
    windows."""

    __slots__ = ("lines", "_words", "_regions", "_rendered")

    def __init__(self, lines: list[str]):
        self.lines = lines
        self._words: list[tuple[str, ...] | None] = [None] * len(lines)  # a tuple is far smaller than a set
        self._regions: dict[tuple[int, int, str], tuple[int, int]] = {}
        self._rendered: dict[tuple[int, int, int, bool], str] = {}

    def words(self, start: int, end: int) -> list[tuple[str, ...]]:
        """The distinct words (``line_words``) of lines ``start..end`` (1-based, inclusive)."""
        cache = self._words
        out = cache[start - 1: end]
        for i, found in enumerate(out):
            if found is None:
                out[i] = cache[start - 1 + i] = tuple(line_words(self.lines[start - 1 + i]))
        return out  # type: ignore[return-value]

    def region(self, first: int, last: int, language: str) -> tuple[int, int]:
        key = (first, last, language)
        found = self._regions.get(key)
        if found is None:
            found = self._regions[key] = body_region(self.lines, first, last, language)
        return found

    def render(self, first: int, last: int, max_chars: int, blank: bool = True) -> str:
        key = (first, last, max_chars, blank)
        found = self._rendered.get(key)
        if found is None:
            found = self._rendered[key] = render_excerpt(self.lines, first, last, max_chars, blank)
        return found


class SourceLines:
    """The masked lines of one repository's files, cached by path, size and mtime."""

    def __init__(self, root: str | Path, secret_globs: tuple[str, ...], cache_size: int = 64):
        self.root = Path(root).resolve()
        self.secret_globs = secret_globs
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[tuple[int, int], FileLines]] = OrderedDict()
        self._lock = threading.Lock()

    def lines(self, rel: str) -> list[str] | None:
        found = self.file(rel)
        return found.lines if found is not None else None

    def file(self, rel: str) -> FileLines | None:
        """The file's ``FileLines`` (None when it cannot be read or is a secret file)."""
        from ctxbench.codegraph.code_context import read_masked

        try:
            st = os.stat(self.root / rel)
        except OSError:
            return None
        stamp = (st.st_size, st.st_mtime_ns)
        with self._lock:
            found = self._cache.get(rel)
            if found is not None and found[0] == stamp:
                self._cache.move_to_end(rel)
                return found[1]
        text = read_masked(self.root, rel, self.secret_globs)
        if text is None:
            return None
        entry = FileLines(text.splitlines())
        with self._lock:
            self._cache[rel] = (stamp, entry)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return entry


def body_region(lines: Sequence[str], first: int, last: int, language: str) -> tuple[int, int]:
    """The 1-based line span of a definition's body after its signature and doc comment (Python) or after
    the line that opens it (other languages); the whole span when no body is found."""
    depth = 0
    sig_end = 0
    for n in range(first, last + 1):
        text = _code_part(lines[n - 1])
        for ch in text:
            depth += _OPENERS.get(ch, 0)
        stripped = text.rstrip()
        if language == "python":
            if depth <= 0 and stripped.endswith(":"):
                sig_end = n
                break
        elif "{" in text or "=>" in text:
            sig_end = n
            break
    if not sig_end or sig_end >= last:
        return first, last
    start = sig_end + 1
    if language == "python":
        start = _skip_docstring(lines, start, last)
    while start < last and not lines[start - 1].strip():
        start += 1
    return (start, last) if start <= last else (first, last)


def _code_part(line: str) -> str:
    """The line without a trailing ``#`` / ``//`` comment (strings are not parsed: good enough for brackets)."""
    for marker in ("#", "//"):
        cut = line.find(marker)
        if cut >= 0:
            line = line[:cut]
    return line


def _skip_docstring(lines: Sequence[str], start: int, last: int) -> int:
    n = start
    while n <= last and not lines[n - 1].strip():
        n += 1
    if n > last:
        return start
    head = lines[n - 1].strip()
    match = _STRING_START.match(head)
    if not match:
        return start
    quote = match.group(1)
    rest = head[match.end():]
    if quote in rest:
        return n + 1
    for m in range(n + 1, last + 1):
        if quote in lines[m - 1]:
            return m + 1
    return start


def choose_window(lines: Sequence[str], start: int, end: int, words: frozenset[str], width: int,
                  context: int = 0, *, matcher: WordMatcher | None = None, file: FileLines | None = None,
                  slack: int = 0, statement_lines: int = 0, occurrence: float = OCCURRENCE_SHARE
                  ) -> tuple[int, int]:
    """The span of at most ``width`` lines of ``start..end`` that best matches ``words`` (see module doc);
    the head of the span when nothing matches. ``context``: lines kept above the first match. ``matcher``:
    the query's ``WordMatcher`` (shared by its hits); ``file``: the lines' ``FileLines`` (their word sets).
    ``slack``: a body at most this many lines longer than ``width`` is sent whole. ``statement_lines``: a
    window that starts inside a nested block moves up, by at most this many lines, to the line that opens
    the body-level statement holding it (``statement_start``), as long as its last strong match stays in.
    ``occurrence``: what every matching line adds to a window's score, as a share of its words' weight (the
    distinct words count once, in full)."""
    if end - start + 1 <= width + (slack if words else 0):
        return start, end
    if not words:
        return start, min(end, start + width - 1)
    match = matcher if matcher is not None and matcher.words == words else WordMatcher(words)
    sets = file.words(start, end) if file is not None else [line_words(lines[n - 1]) for n in range(start, end + 1)]
    per_line = match.per_line(sets)
    total = len(per_line)
    df: dict[str, int] = {}
    for found in per_line:
        for w in found:
            df[w] = df.get(w, 0) + 1
    if not df:
        return start, start + width - 1
    weight = {w: math.log(1.0 + total / c) for w, c in df.items()}
    line_weight = [sum(weight[w] for w in found) for found in per_line]
    best, best_at = -1.0, 0
    counts: dict[str, int] = {}
    score = 0.0  # distinct words of the window by weight, plus a little for every further matching line
    for i in range(total):  # slide: add line i, drop line i - width
        score += occurrence * line_weight[i]
        for w in per_line[i]:
            counts[w] = counts.get(w, 0) + 1
            if counts[w] == 1:
                score += weight[w]
        if i >= width:
            score -= occurrence * line_weight[i - width]
            for w in per_line[i - width]:
                counts[w] -= 1
                if counts[w] == 0:
                    score -= weight[w]
        if i >= width - 1 and score > best + 1e-9:
            best, best_at = score, i - width + 1
    strongest = max(line_weight[best_at: best_at + width])
    matched = [i for i in range(best_at, best_at + width) if line_weight[i] >= STRONG_LINE_SHARE * strongest > 0]
    at = best_at
    if matched:  # start ``context`` lines above the first strong match, as long as the last one stays in
        at = max(0, min(total - width, matched[0] - context))
        if matched[-1] >= at + width:
            at = matched[-1] - width + 1
    if statement_lines > 0:
        keep = matched[-1] if matched else at
        at = max(statement_start(lines, start, start + at, statement_lines) - start, keep - width + 1)
    first = start + at
    return first, first + width - 1


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def statement_start(lines: Sequence[str], start: int, first: int, most: int) -> int:
    """The line that opens the body-level statement holding line ``first`` of a body starting at ``start``:
    the nearest line at or above it indented no deeper than the body's first line, searched at most ``most``
    lines up (``first`` itself when none is found, or when ``first``, after blank lines, is body-level)."""
    base = _indent(lines[start - 1])
    n = first
    while n < len(lines) and not lines[n - 1].strip():
        n += 1
    if _indent(lines[n - 1]) <= base:
        return first
    for up in range(first - 1, max(start, first - most) - 1, -1):
        text = lines[up - 1]
        if text.strip() and _indent(text) <= base:
            return up
    return first


def render_excerpt(lines: Sequence[str], first: int, last: int, max_chars: int, blank: bool = True) -> str:
    """Lines ``first..last`` with their common indentation removed, each after its file line number;
    ``blank`` False: blank lines left out (the line numbers show where they were)."""
    chosen = lines[first - 1: last]
    indent = min((len(ln) - len(ln.lstrip()) for ln in chosen if ln.strip()), default=0)
    width = len(str(last))
    out = []
    for n, ln in zip(range(first, last + 1), chosen):
        text = ln[indent:].rstrip()
        if not blank and not text:
            continue
        if len(text) > max_chars:
            text = text[: max(0, max_chars - 1)].rstrip() + "…"
        out.append(f"{n:>{width}}  {text}".rstrip())
    return "\n".join(out)


def query_excerpt(card: SymbolCard, source: SourceLines, words: frozenset[str], width: int, context: int,
                  max_chars: int, matcher: WordMatcher | None = None, *, slack: int = 0,
                  statement_lines: int = 0, blank: bool = True, occurrence: float = OCCURRENCE_SHARE
                  ) -> Excerpt | None:
    """The excerpt of ``card`` for a query's ``words``; None when the file cannot give it (the caller keeps
    the card's stored excerpt) or the card is a module's. ``matcher``: the query's, shared by its hits;
    ``slack``, ``statement_lines``, ``occurrence``: as ``choose_window``'s; ``blank`` False: blank lines left
    out."""
    if card.kind == "module" or width <= 0:
        return None
    file = source.file(card.path)
    if file is None:
        return None
    lines = file.lines
    if card.end_line > len(lines) or card.line < 1:
        return None
    start, end = file.region(card.line, card.end_line, card.language)
    first, last = choose_window(lines, start, end, words, width, context, matcher=matcher, file=file, slack=slack,
                                statement_lines=statement_lines, occurrence=occurrence)
    while last > first and not lines[last - 1].strip():
        last -= 1
    return Excerpt(file.render(first, last, max_chars, blank), first, last)
