"""Typed tables: a parsed TOML document validated into a tree of frozen dataclasses, each problem named by its key.

Everything is derived from the dataclasses themselves, so a new section or field is validated without a line
here:

- types come from the field annotations and are checked by msgspec (strict: ``"5"`` is not a number, ``1`` is
  not ``true``, a string is not a list), which also builds the dataclasses;
- a field may declare its bounds with ``typing.Annotated[int, Range(gt=0)]``; every other number must be
  finite and not negative;
- a ``tuple[tuple[str, X], ...]`` field is written as a TOML table (``[ui.keymap]``);
- a ``tuple[D, ...]`` of dataclasses with a ``name`` field (``[[planner.modes]]``) merges by name with the
  default tuple: a known name changes only the keys given, a new name is added;
- an unknown key is a problem that suggests the closest known one.

msgspec stops at the first wrong type; the value is then left out (its default holds) and the document
validated again, so every problem is named in one go. Nothing else of ctxbench is imported.
"""
from __future__ import annotations

import dataclasses
import datetime
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

T = TypeVar("T")
NAME_FIELD = "name"  # a tuple of dataclasses with this field merges by it
MAX_ROUNDS = 200  # validations of one document (one per wrong type found)
MAX_WHOLE = 2**63 - 1  # the largest whole number SQLite stores and numpy indexes with: any larger one is refused


@dataclass(frozen=True)
class Range:
    """Bounds declared on a number field: ``Annotated[float, Range(gt=0)]``."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def problem(self, value: float) -> str | None:
        for bound, fails, words in ((self.gt, lambda b: value <= b, "greater than"),
                                    (self.ge, lambda b: value < b, "at least"),
                                    (self.lt, lambda b: value >= b, "less than"),
                                    (self.le, lambda b: value > b, "at most")):
            if bound is not None and fails(bound):
                return f"must be {words} {_number(bound)}, got {_number(value)}"
        return None


@dataclass(frozen=True)
class Problem:
    key: str  # dotted path: planner.modes[heavy].max_cards, ui.keymap.ctxbench.overlay
    text: str  # what is wrong with it

    def __str__(self) -> str:
        return f"{self.key}: {self.text}" if self.key else self.text


class TableError(ValueError):
    """The document does not fit the dataclasses; ``problems``: every one found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def validate(cls: type[T], data: Mapping[str, Any], default: T | None = None) -> T:
    """``data`` (a parsed TOML document) as an instance of the dataclass ``cls``, over ``default`` (or the
    dataclass's own defaults); raises TableError naming every problem."""
    import msgspec

    walk = _Walk()
    prepared = _prepare_table(cls, data, "", default if default is not None else cls(), walk)
    value = None
    for _ in range(MAX_ROUNDS):
        try:
            value = msgspec.convert(prepared, cls, strict=True)
            break
        except msgspec.ValidationError as exc:
            message, loc = _split(str(exc))
            key, hint, given = _locate(cls, prepared, loc)
            if not any(p.key == key for p in walk.problems):  # one line per key: its bound was named already
                walk.add(Problem(key, _describe(message, hint, given)))
            if not _leave_out(prepared, loc):
                break
    if walk.problems or value is None:
        raise TableError(sorted(walk.problems, key=walk.position))
    return value


@dataclass
class _Walk:
    """The problems found, and the order the keys appear in the document (problems are listed in it)."""

    problems: list[Problem] = dataclasses.field(default_factory=list)
    order: dict[str, int] = dataclasses.field(default_factory=dict)

    def add(self, problem: Problem) -> None:
        self.problems.append(problem)

    def saw(self, key: str) -> None:
        self.order.setdefault(key, len(self.order))

    def position(self, problem: Problem) -> int:
        """Where the problem's key (or the nearest key above it) appears in the document."""
        key = problem.key
        while key:
            if key in self.order:
                return self.order[key]
            key = re.sub(_PARENT, "", key, count=1)
        return len(self.order)


# -- shapes of annotations -------------------------------------------------------------------------------

def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _unwrap(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """The type under ``Annotated`` and what is declared on it."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *meta = typing.get_args(hint)
        return base, tuple(meta)
    return hint, ()


def _items(hint: Any) -> Any | None:
    """X for ``tuple[X, ...]``, else None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return None


def _pair_value(hint: Any) -> Any | None:
    """X for ``tuple[tuple[str, X], ...]`` (a table in TOML), else None."""
    item = _items(hint)
    args = typing.get_args(item) if item is not None else ()
    if typing.get_origin(item) is tuple and len(args) == 2 and args[0] is str and args[1] is not Ellipsis:
        return args[1]
    return None


def _named(hint: Any) -> type | None:
    """D for ``tuple[D, ...]`` where D is a dataclass with a ``name`` field, else None."""
    item = _items(hint)
    if _is_table(item) and NAME_FIELD in {f.name for f in dataclasses.fields(item)}:
        return item
    return None


def _is_table(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


# -- before msgspec: names, merging, and bounds on numbers -----------------------------------------------

def _prepare_table(cls: type, data: Mapping[str, Any], path: str, default: Any, walk: _Walk) -> dict:
    hints = _hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    out: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{path}.{key}" if path else str(key)
        walk.saw(where)
        if key not in names:
            walk.add(Problem(where, _unknown(str(key), names)))
            continue
        current = getattr(default, key) if default is not None else _field_default(cls, key)
        out[key] = _prepare_value(hints[key], value, where, current, walk)
    return out


def _field_default(cls: type, key: str) -> Any:
    for f in dataclasses.fields(cls):
        if f.name == key:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return None


def _prepare_value(hint: Any, value: Any, where: str, current: Any, walk: _Walk) -> Any:
    base, meta = _unwrap(hint)
    if _is_table(base):
        return _prepare_table(base, value, where, current, walk) if isinstance(value, Mapping) else value
    pair = _pair_value(base)
    if pair is not None and isinstance(value, Mapping):
        pairs = []
        for k, v in sorted(value.items()):
            if isinstance(v, Mapping) and not _is_table(_unwrap(pair)[0]):  # `a.b = 1` is a table in TOML
                inner = next(iter(v), "")
                walk.add(Problem(f"{where}.{k}", f"expected {_expected(pair)}, got a table (a name with a dot in "
                                                  f'it is quoted: "{k}.{inner}" = ...)'))
                continue
            pairs.append([str(k), _prepare_value(pair, v, f"{where}.{k}", None, walk)])
        return pairs
    named = _named(base)
    if named is not None and isinstance(value, list):
        return _merge_named(named, value, where, current or (), walk)
    item = _items(base)
    if item is not None and isinstance(value, list):
        return [_prepare_value(item, v, f"{where}[{n}]", None, walk) for n, v in enumerate(value)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        # a number, or a number for the numeric member of a union (``PositiveInt | Literal["auto"]``)
        numeric = [(base, meta)] if base in (int, float) else [_unwrap(m) for m in _members(base)]
        bounds = next(([m for m in found if isinstance(m, Range)] for kind, found in numeric if kind in (int, float)),
                      None)
        problem = _bounds_problem(value, bounds) if bounds is not None else None
        if problem:
            walk.add(Problem(where, problem))
    return value


def _members(hint: Any) -> tuple[Any, ...]:
    """The members of a union (``X | Y``), else none."""
    return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else ()


def _bounds_problem(value: float, declared: list[Range]) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if declared:
        problem = next((p for p in (r.problem(value) for r in declared) if p), None)
    else:
        problem = f"must not be negative, got {_number(value)}" if value < 0 else None
    if problem is None and isinstance(value, int) and not -MAX_WHOLE <= value <= MAX_WHOLE:
        problem = f"must be at most {MAX_WHOLE:,} in size (a 64-bit whole number), got {_number(value)}"
    return problem


def _merge_named(cls: type, entries: list[Any], where: str, defaults: tuple[Any, ...],
                 walk: _Walk) -> list[Any]:
    """Entries merged by name over ``defaults``: a known name keeps the keys not given, a new one is added."""
    merged: list[Any] = [dataclasses.asdict(d) for d in defaults]
    index = {d[NAME_FIELD]: n for n, d in enumerate(merged)}
    for n, entry in enumerate(entries):
        name = entry.get(NAME_FIELD) if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name:
            what = "to be a table" if not isinstance(entry, Mapping) else f"a {NAME_FIELD} (a string)"
            walk.add(Problem(f"{where}[{n}]", f"each entry needs {what}"))
            continue
        at = index.get(name)
        table = _prepare_table(cls, entry, f"{where}[{name}]", defaults[at] if at is not None else None, walk)
        if at is not None:
            merged[at] = {**merged[at], **table}
        else:
            index[name] = len(merged)
            merged.append(table)
    return merged


def _unknown(key: str, names: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]}?"
    return f"unknown key; known: {', '.join(names)}"


# -- msgspec's errors in the user's words ----------------------------------------------------------------

# patterns are compiled on first use (re caches them): importing this module stays cheap
_AT = r"(?s)^(?P<message>.*?)(?: - at `\$(?P<path>[^`]*)`)?$"
_STEP = r"\.([^.\[]+)|\[(\d+)\]"
_PARENT = r"(\.[^.\[]*|\[[^\]]*\])$|^[^.\[]*$"  # the last step of a dotted key


def _split(text: str) -> tuple[str, tuple[Any, ...]]:
    """msgspec's message and its path (``$.planner.modes[3].name``) as a tuple of keys and indexes."""
    match = re.match(_AT, text)
    assert match is not None
    steps = tuple(name if name else int(index) for name, index in re.findall(_STEP, match["path"] or ""))
    return match["message"], steps


def _locate(cls: type, prepared: Any, loc: tuple[Any, ...]) -> tuple[str, Any, Any]:
    """The dotted key at ``loc``, the annotation there and the value given there."""
    key, hint, value = "", cls, prepared
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        base, _ = _unwrap(hint)
        if _is_table(base) and isinstance(part, str):
            key = f"{key}.{part}" if key else part
            hint = _hints(base).get(part, Any)
            value = value.get(part) if isinstance(value, Mapping) else None
        elif isinstance(part, int) and isinstance(value, list) and 0 <= part < len(value):
            item = value[part]
            if _pair_value(base) is not None and isinstance(item, list) and item:
                key = f"{key}.{item[0]}"
                hint, value = _pair_value(base), (item[1] if len(item) > 1 else None)
                if parts and parts[0] in (0, 1):
                    parts.pop(0)
            elif _named(base) is not None and isinstance(item, Mapping) and item.get(NAME_FIELD):
                key = f"{key}[{item[NAME_FIELD]}]"
                hint, value = _named(base), item
            else:
                key = f"{key}[{part}]"
                hint, value = _items(base) or Any, item
        else:
            key = f"{key}[{part}]" if isinstance(part, int) else f"{key}.{part}"
            hint, value = Any, None
    return key, hint, value


def _leave_out(prepared: Any, loc: tuple[Any, ...]) -> bool:
    """Drop the table key holding the wrong value at ``loc`` (its default holds); False if there is none."""
    holder, last, node = None, None, prepared
    for part in loc:
        if isinstance(node, dict) and part in node:
            holder, last, node = node, part, node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            break
    if holder is None:
        return False
    del holder[last]
    return True


_MISSING = r"^Object missing required field `(?P<field>[^`]+)`$"


def _describe(message: str, hint: Any, given: Any) -> str:
    missing = re.match(_MISSING, message)
    if missing:
        return f"{missing['field']} is missing"
    if message.startswith(("Expected", "Invalid enum value")):
        return f"expected {_expected(hint)}, got {_what(given)}"
    return message


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _expected(hint: Any) -> str:
    base, _ = _unwrap(hint)
    words = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    if base in words:
        return words[base]
    if _is_table(base):
        return "a table"
    pair = _pair_value(base)
    if pair is not None:
        return f"a table whose values are {_plural(pair)}"
    item = _items(base)
    if item is not None:
        return f"a list of {_plural(item)}"
    if typing.get_origin(base) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(base))
    if _members(base):
        return " or ".join(_expected(m) for m in _members(base))
    return "another value"


def _plural(hint: Any) -> str:
    base, _ = _unwrap(hint)
    words = {bool: "true or false", int: "whole numbers", float: "numbers", str: "strings"}
    if base in words:
        return words[base]
    return "tables" if _is_table(base) else "values"


def _what(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'a string ("{value}")' if len(value) <= 60 else "a string"
    if isinstance(value, int):
        return f"a whole number ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, (datetime.date, datetime.time)):
        return f"a date or time ({value.isoformat()})"
    return type(value).__name__
