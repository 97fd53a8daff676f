"""The words SQLite FTS5's ``porter unicode61`` tokenizer makes of a text, computed in Python.

The store's message index (``store.message_search``) tokenizes with ``tokenize = 'porter unicode61'``;
the fused strategy's keyword scores are computed over a branch's own history in memory
(``retrieval.history_keywords``), so they must see the same words:

* **unicode61** — a token is a run of letters, digits and private-use characters (Unicode categories
  L*, N*, Co, as SQLite's own tables have them); everything else separates. Tokens are case-folded and lose
  their diacritics (``é`` → ``e``; remove_diacritics = 1, the default). ASCII text goes through a byte
  table; what any other character becomes is asked of SQLite once (``store.message_search.unicode61_chars``),
  so the words are SQLite's even where its Unicode tables differ from Python's.
* **porter** — every token of 3 to 64 bytes is stemmed by FTS5's Porter stemmer (Martin Porter's original
  algorithm as ``ext/fts5/fts5_tokenize.c`` implements it, byte by byte on the UTF-8 form), the rest pass
  through.

``tests/unit/planner/test_history_keywords.py`` checks the tokens against SQLite's own for a large corpus.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable

PORTER_MAX_BYTES = 64  # FTS5_PORTER_MAX_TOKEN: longer tokens pass through unstemmed
PORTER_MIN_BYTES = 3

_VOWELS = frozenset("aeiou")


def _is_vowel(c: str, y_is_vowel: bool) -> bool:
    return c in _VOWELS or (y_is_vowel and c == "y")


def _gobble_vc(s: str, prev_cons: bool) -> int:
    """Length of the shortest prefix of ``s`` holding a vowel followed by a consonant (0: none)."""
    cons = prev_cons
    n = len(s)
    i = 0
    while i < n:
        cons = not _is_vowel(s[i], cons)
        if not cons:
            break
        i += 1
    i += 1
    while i < n:
        cons = not _is_vowel(s[i], cons)
        if cons:
            return i + 1
        i += 1
    return 0


def _m_gt0(s: str) -> bool:
    return _gobble_vc(s, False) > 0


def _m_gt1(s: str) -> bool:
    n = _gobble_vc(s, False)
    return bool(n) and _gobble_vc(s[n:], True) > 0


def _m_eq1(s: str) -> bool:
    n = _gobble_vc(s, False)
    return bool(n) and _gobble_vc(s[n:], True) == 0


def _o_star(s: str) -> bool:
    """*o: the stem ends consonant-vowel-consonant, the last consonant not w, x or y."""
    if not s or s[-1] in "wxy":
        return False
    mask = 0
    cons = False
    for c in s:
        cons = not _is_vowel(c, cons)
        mask = ((mask << 1) | int(cons)) & 0x7
    return mask == 0x5


def _has_vowel(s: str) -> bool:
    return any(_is_vowel(c, i > 0) for i, c in enumerate(s))


def _m_gt1_s_or_t(s: str) -> bool:
    return bool(s) and s[-1] in "st" and _m_gt1(s)


Rule = tuple[str, Callable[[str], bool] | None, str]
# Each step: the second-last letter -> (suffix, condition on the stem, replacement) tried in order; the first
# suffix that matches decides (its condition failing means no change), as in FTS5's generated steps.
_STEP1B2: dict[str, tuple[Rule, ...]] = {
    "a": (("at", None, "ate"),), "b": (("bl", None, "ble"),), "i": (("iz", None, "ize"),),
}
_STEP2: dict[str, tuple[Rule, ...]] = {
    "a": (("ational", _m_gt0, "ate"), ("tional", _m_gt0, "tion")),
    "c": (("enci", _m_gt0, "ence"), ("anci", _m_gt0, "ance")),
    "e": (("izer", _m_gt0, "ize"),),
    "g": (("logi", _m_gt0, "log"),),
    "l": (("bli", _m_gt0, "ble"), ("alli", _m_gt0, "al"), ("entli", _m_gt0, "ent"), ("eli", _m_gt0, "e"),
          ("ousli", _m_gt0, "ous")),
    "o": (("ization", _m_gt0, "ize"), ("ation", _m_gt0, "ate"), ("ator", _m_gt0, "ate")),
    "s": (("alism", _m_gt0, "al"), ("iveness", _m_gt0, "ive"), ("fulness", _m_gt0, "ful"),
          ("ousness", _m_gt0, "ous")),
    "t": (("aliti", _m_gt0, "al"), ("iviti", _m_gt0, "ive"), ("biliti", _m_gt0, "ble")),
}
_STEP3: dict[str, tuple[Rule, ...]] = {
    "a": (("ical", _m_gt0, "ic"),),
    "s": (("ness", _m_gt0, ""),),
    "t": (("icate", _m_gt0, "ic"), ("iciti", _m_gt0, "ic")),
    "u": (("ful", _m_gt0, ""),),
    "v": (("ative", _m_gt0, ""),),
    "z": (("alize", _m_gt0, "al"),),
}
_STEP4: dict[str, tuple[Rule, ...]] = {
    "a": (("al", _m_gt1, ""),),
    "c": (("ance", _m_gt1, ""), ("ence", _m_gt1, "")),
    "e": (("er", _m_gt1, ""),),
    "i": (("ic", _m_gt1, ""),),
    "l": (("able", _m_gt1, ""), ("ible", _m_gt1, "")),
    "n": (("ant", _m_gt1, ""), ("ement", _m_gt1, ""), ("ment", _m_gt1, ""), ("ent", _m_gt1, "")),
    "o": (("ion", _m_gt1_s_or_t, ""), ("ou", _m_gt1, "")),
    "s": (("ism", _m_gt1, ""),),
    "t": (("ate", _m_gt1, ""), ("iti", _m_gt1, "")),
    "u": (("ous", _m_gt1, ""),),
    "v": (("ive", _m_gt1, ""),),
    "z": (("ize", _m_gt1, ""),),
}


def _apply(s: str, step: dict[str, tuple[Rule, ...]]) -> tuple[str, bool]:
    """(the word after one step, whether a rule without a condition or whose condition held fired)."""
    if len(s) < 2:
        return s, False
    for suffix, condition, replacement in step.get(s[-2], ()):
        if len(s) > len(suffix) and s.endswith(suffix):
            stem = s[: -len(suffix)]
            if condition is None or condition(stem):
                return stem + replacement, True
            return s, False
    return s, False


def _step1a(s: str) -> str:
    if s.endswith("s"):
        if len(s) >= 2 and s[-2] == "e":
            if (len(s) > 4 and s[-4] == "s" and s[-3] == "s") or (len(s) > 3 and s[-3] == "i"):
                return s[:-2]
            return s[:-1]
        if len(s) >= 2 and s[-2] != "s":
            return s[:-1]
    return s


def _step1b(s: str) -> tuple[str, bool]:
    """-eed -> -ee (m > 0); -ed / -ing removed when the stem has a vowel (then True: the tidy-up follows).
    The first suffix that matches decides."""
    if len(s) > 3 and s.endswith("eed"):
        return (s[:-1] if _m_gt0(s[:-3]) else s), False
    for suffix in ("ed", "ing"):
        if len(s) > len(suffix) and s.endswith(suffix):
            stem = s[: -len(suffix)]
            return (stem, True) if _has_vowel(stem) else (s, False)
    return s, False


def porter(word: str) -> str:
    """FTS5's Porter stem of one lower-case token (bytes of its UTF-8 form; 3 to 64 bytes, else unchanged)."""
    raw = word.encode("utf-8", "surrogatepass")
    if len(raw) > PORTER_MAX_BYTES or len(raw) < PORTER_MIN_BYTES:
        return word
    s = raw.decode("latin-1")  # one character per byte: the C code's byte-wise rules, unchanged
    s = _step1a(s)
    s, removed = _step1b(s)
    if removed:
        s, extended = _apply(s, _STEP1B2)
        if not extended and len(s) >= 2:
            c = s[-1]
            if not _is_vowel(c, False) and c not in "lsz" and c == s[-2]:
                s = s[:-1]
            elif _m_eq1(s) and _o_star(s):
                s += "e"
    if s.endswith("y") and _has_vowel(s[:-1]):
        s = s[:-1] + "i"
    s, _ = _apply(s, _STEP2)
    s, _ = _apply(s, _STEP3)
    s, _ = _apply(s, _STEP4)
    if s.endswith("e"):
        stem = s[:-1]
        if _m_gt1(stem) or (_m_eq1(stem) and not _o_star(stem)):
            s = stem
    if len(s) > 1 and s.endswith("ll") and _m_gt1(s[:-1]):
        s = s[:-1]
    return s.encode("latin-1").decode("utf-8", "surrogateescape")


# unicode61 on ASCII: letters lower-cased, digits kept, everything else separates (a bytes table: the fast path)
_ASCII_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789")
_ASCII_TABLE = bytes((c + 32 if 65 <= c <= 90 else c if c in _ASCII_WORD else 32) for c in range(256))
# code point -> what unicode61 makes of it (a folded letter, "" or " "); other characters are asked of SQLite
_CHARS: dict[int, str] = {c: chr(_ASCII_TABLE[c]) for c in range(128)}


def _words(text: str) -> list[Any]:
    """unicode61's tokens of ``text``: bytes for an ASCII text (the fast path), else strings."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_TABLE).split()
    unknown = [c for c in set(text) if ord(c) not in _CHARS]
    if unknown:
        from ctxbench.store.message_search import unicode61_chars

        _CHARS.update({ord(c): folded for c, folded in unicode61_chars(unknown).items()})
    return text.translate(_CHARS).split()


class _Terms(dict):
    """unicode61 token (bytes or str) -> its Porter term; filled on first sight (words repeat a lot)."""

    def __missing__(self, word: Any) -> str:
        term = porter(word.decode("ascii") if isinstance(word, bytes) else word)
        if len(self) < TERM_CACHE_MAX:
            self[word] = term
        return term


class _Text(dict):
    """An ASCII token (bytes) -> the same word as a string."""

    def __missing__(self, word: bytes) -> str:
        text = word.decode("ascii")
        if len(self) < TERM_CACHE_MAX:
            self[word] = text
        return text


TERM_CACHE_MAX = 500_000
_TERMS = _Terms()
_TEXT = _Text()


def stem(word: str) -> str:
    """The Porter term of one unicode61 word (cached)."""
    return _TERMS[word]


def words(text: str) -> list[str]:
    """The words FTS5's ``unicode61`` tokenizer makes of ``text`` (folded, not stemmed), in order."""
    found = _words(text) if text else []
    return [_TEXT[w] for w in found] if found and isinstance(found[0], bytes) else found


def tokens(text: str) -> list[str]:
    """The terms FTS5's ``porter unicode61`` tokenizer makes of ``text``, in order."""
    return [_TERMS[w] for w in _words(text)] if text else []


COUNT_CHUNK_CHARS = 1 << 20  # a longer text is counted in pieces of about this size (cut at whitespace)
_BLANK = re.compile(r"\s")


def word_counts(text: str) -> tuple[int, dict[str, int]]:
    """(how many unicode61 words ``text`` has, how often each occurs). A long text is read a piece at a time, cut
    at whitespace (which unicode61 always separates words at): all its words as one list took ~45 bytes a word."""
    if not text:
        return 0, {}
    if len(text) <= COUNT_CHUNK_CHARS:
        return _whole(text)
    total = 0
    merged: Counter[str] = Counter()
    start = 0
    while start < len(text):
        cut = _BLANK.search(text, start + COUNT_CHUNK_CHARS)
        end = cut.start() if cut is not None else len(text)
        piece_total, piece = _whole(text[start:end])
        total += piece_total
        merged.update(piece)
        start = end
    return total, dict(merged)


def _whole(text: str) -> tuple[int, dict[str, int]]:
    """:func:`word_counts` of ``text`` read at once."""
    found = _words(text)
    counts = Counter(found)
    if found and isinstance(found[0], bytes):
        return len(found), {_TEXT[w]: n for w, n in counts.items()}
    return len(found), dict(counts)
