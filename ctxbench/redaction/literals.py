"""The literal strings a regular expression's every match must contain, read from the pattern's parse tree.

The secret scan runs each of detect-secrets' regex detectors over the lines holding one of its pattern's necessary
literals (``glpat-`` for a GitLab token, ``key``/``pwd``/… for a keyword rule) instead of over the whole text. A line
without any of them cannot hold a match, so the scan finds what the whole-text pattern finds, whatever the secret's
characters are (a digit-free token included).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from re import _constants as c  # noqa: PLC2701 - the parse tree's opcodes (the public ``re`` has no parse API)
from re import _parser  # noqa: PLC2701

MIN_LITERAL = 2  # shorter necessary literals are on nearly every line: no use as a filter
DIGIT_CLASS = "\\d"  # stands for ``\\d`` (any script's digits) in a class's character set
TOKEN_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-") | {DIGIT_CLASS}


@dataclass(frozen=True)
class Necessary:
    """``sets``: every match holds at least one literal of each set (lowered where ``ignore_case``); the first is the
    most selective. Empty: nothing is known, the pattern must see the whole text."""
    sets: tuple[frozenset[str], ...]
    ignore_case: bool
    token_run: int = 0  # every match holds a run of this many TOKEN_CHARACTERS (0: none known)


def necessary_literals(pattern: re.Pattern[str]) -> Necessary:
    """What every match of ``pattern`` holds, as far as its parse tree tells."""
    ignore_case = bool(pattern.flags & re.IGNORECASE)
    try:
        tree = _parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - an unreadable pattern: scan the whole text
        return Necessary((), ignore_case)
    sets = [s for s in _sequence_sets(list(tree)) if min(map(len, s)) >= MIN_LITERAL]
    if ignore_case:
        sets = [frozenset(x.lower() for x in s) for s in sets]
    sets.sort(key=lambda s: (-min(map(len, s)), len(s)))
    return Necessary(tuple(sets), ignore_case, _token_run(list(tree)))


def _token_run(sequence: list) -> int:
    """The longest run of token characters every match of ``sequence`` holds: a repeat of at least ``n`` characters of
    a class within TOKEN_CHARACTERS, at the top level or inside a group that is always matched."""
    best = 0
    for op, arg in sequence:
        if op is c.SUBPATTERN:  # (a case-insensitive group's classes: the run pattern is a superset, see scanner)
            best = max(best, _token_run(list(arg[3])))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            low, _high, inner = arg
            inner = list(inner)
            if len(inner) == 1 and _class_chars(inner[0]) <= TOKEN_CHARACTERS:
                best = max(best, low)
    return best


def _class_chars(item) -> frozenset[str]:
    """The characters one parse item can match (everything, as far as this module is concerned, when unknown)."""
    op, arg = item
    if op is c.LITERAL:
        return frozenset(chr(arg))
    if op is c.IN:
        chars: set[str] = set()
        for kind, value in arg:
            if kind is c.LITERAL:
                chars.add(chr(value))
            elif kind is c.RANGE:
                chars.update(chr(x) for x in range(value[0], value[1] + 1))
            elif kind is c.CATEGORY and value is c.CATEGORY_DIGIT:
                chars.add(DIGIT_CLASS)
            else:
                return frozenset(_EVERYTHING)
        return frozenset(chars)
    return frozenset(_EVERYTHING)


_EVERYTHING = frozenset({"\n"})  # a set that is never within TOKEN_CHARACTERS


def _opaque(arg) -> bool:
    """A group that turns case-insensitivity on inside a case-sensitive pattern: its literals are not what it matches."""
    return bool(arg[1] & re.IGNORECASE)


def _leading(sequence: list) -> str:
    """The literal characters a sequence starts with (through leading groups)."""
    out = []
    for op, arg in sequence:
        if op is c.LITERAL:
            out.append(chr(arg))
            continue
        if op is c.SUBPATTERN and not _opaque(arg):
            inner = list(arg[3])
            out.append(_leading(inner))
            if all(o is c.LITERAL for o, _ in inner):  # the whole group is its lead: what follows it leads on
                continue
        break
    return "".join(out)


def _sequence_sets(sequence: list) -> list[frozenset[str]]:
    sets: list[frozenset[str]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            sets.append(frozenset({"".join(run)}))
            run.clear()

    for op, arg in sequence:
        if op is c.LITERAL:
            run.append(chr(arg))
        elif op is c.SUBPATTERN:
            flush()
            if not _opaque(arg):
                sets.extend(_sequence_sets(list(arg[3])))
        elif op is c.BRANCH:
            branches = [list(b) for b in arg[1]]
            leads = [_leading(b) for b in branches]
            if all(leads):
                prefix = "".join(run)
                run.clear()
                sets.append(frozenset(prefix + lead for lead in leads))
            else:
                flush()
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            flush()
            low, _high, inner = arg
            if low >= 1:
                sets.extend(_sequence_sets(list(inner)))
        else:  # a class, any character, an anchor or a look-around: it ends a literal run
            flush()
    flush()
    return sets
