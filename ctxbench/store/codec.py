"""Frozen dataclasses to JSON and back, guided by their type hints.

Plans, plan inputs and retrieval sets are stored as JSON and rebuilt into the same frozen
records, so that a stored plan renders exactly the payload it had when it was made.

:func:`canonical_json` (sorted keys: what ids are hashed from) and :func:`ordered_json` turn every record into
an object of its fields. :func:`compact_json` is the storage form of a large record: the same JSON except that a
field holding a tuple of records of its declared type is a table, ``{"columns": [field names], "rows": [[values
in that order], ...]}``, so a plan's tens of thousands of items are written without their keys and without
building a dict for each. :func:`from_jsonable` reads either form (a table names its columns, so rows written
before a record gained a field still load).
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import lru_cache
import secrets
from itertools import chain, repeat
from operator import attrgetter, is_, itemgetter
from typing import Any, Callable, Mapping, TypeVar, Union

from ctxbench.records.scored import ScoredIds

T = TypeVar("T")


_SCALARS = (str, int, float, bool, type(None))


@lru_cache(maxsize=None)
def field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data for a (nested) dataclass record."""
    if isinstance(obj, _SCALARS):
        return obj
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, ScoredIds):
        return obj.to_json()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {name: to_jsonable(getattr(obj, name)) for name in field_names(type(obj))}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    return obj


def canonical_json(obj: Any) -> str:
    """One canonical text for a record: sorted keys, no whitespace, UTF-8 kept."""
    return json.dumps(to_jsonable(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def ordered_json(obj: Any) -> str:
    """A record's text with every mapping in its own key order (a payload's messages keep theirs), no whitespace."""
    return json.dumps(to_jsonable(obj), separators=(",", ":"), ensure_ascii=False)


def compact_json(obj: Any, rows: RowTexts | None = None) -> str:
    """A record's storage text: as :func:`ordered_json`, with every tuple of records of a field's declared type
    written as a table (see the module's docstring); :func:`loads` rebuilds the same record.

    With ``rows``, the tables of the record's own fields reuse the text of every row that is the very record
    written in the previous call (see :class:`RowTexts`); the text is the same either way.
    """
    if rows is None or not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return _dumps(obj)
    parts = [f"{_dumps(name)}:{rows.table(value) if isinstance(value, _Table) else _dumps(value)}"
             for name, value in _record_writer(type(obj))(obj).items()]
    return "{" + ",".join(parts) + "}"


def compact_json_with(obj: Any, texts: dict[str, str]) -> str:
    """:func:`compact_json` of a record whose fields named in ``texts`` are written as those JSON texts, unread."""
    cls = type(obj)
    hints = _hints(cls)
    parts = []
    for name in field_names(cls):
        if name in texts:
            parts.append(f"{_dumps(name)}:{texts[name]}")
            continue
        value = getattr(obj, name)
        row_cls = _record_tuple(hints.get(name))
        if row_cls is not None and isinstance(value, (tuple, list)) and value and all(type(r) is row_cls for r in value):
            value = _Table(row_cls, value)
        parts.append(f"{_dumps(name)}:{_dumps(value)}")
    return "{" + ",".join(parts) + "}"


def table_json(cls: type, records: Any, rows: RowTexts | None = None) -> str:
    """The text :func:`compact_json` writes for a field holding ``records`` (a tuple of ``cls`` records)."""
    if not records or not all(type(r) is cls for r in records):
        return _dumps(records)
    table = _Table(cls, records)
    return rows.table(table) if rows is not None else _dumps(table)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, default=_compact, separators=(",", ":"))  # ASCII: faster, and any str encodes


class _Table:
    """A field's tuple of records of its declared type, written as a table."""

    __slots__ = ("cls", "rows")

    def __init__(self, cls: type, rows: Any) -> None:
        self.cls, self.rows = cls, rows

    def to_json(self) -> dict[str, Any]:
        names = field_names(self.cls)
        if len(names) == 1:
            return {"columns": list(names), "rows": [[getattr(r, names[0])] for r in self.rows]}
        return {"columns": list(names), "rows": list(map(attrgetter(*names), self.rows))}


_IMMUTABLE = frozenset((str, int, float, bool, type(None)))


class RowTexts:
    """The text of each table row written last time, by the identity of its record.

    A long session's consecutive plans share most of their items (the planner reuses the item of every
    history atom whose exclusion did not change), and writing 30,000 rows again cost most of a stored plan.
    A row's text is reused only for the very same record object, remembered with it (so its id is not reused),
    and only when every value in the row is immutable (a row holding message dicts is written each time).
    The rows not reused are written by one ``json.dumps``; when fewer than half of the records were in the
    last table (a strategy scoring every item makes new ones each time), the whole table is, as without this
    memory, and only the records are remembered (a next table sharing them has their rows written and kept).
    """

    def __init__(self) -> None:
        self._last: dict[int, tuple[Any, str | None]] = {}

    def table(self, table: _Table) -> str:
        rows = table.rows
        # C-level passes over the rows: a long session's plan has ~34,000 of them
        hits = list(map(self._last.get, map(id, rows), repeat(_NOT_WRITTEN)))
        same = list(map(is_, map(itemgetter(0), hits), rows))
        if 2 * same.count(True) < len(rows):
            self._last = dict(zip(map(id, rows), zip(rows, repeat(None))))
            return _dumps(table.to_json())
        texts = list(map(itemgetter(1), hits))
        for i in [i for i, ok in enumerate(same) if not ok]:
            texts[i] = None
        kept = texts.copy()
        missing = [i for i, text in enumerate(texts) if text is None]
        names = field_names(table.cls)
        if missing:
            values = attrgetter(*names) if len(names) > 1 else (lambda r: (getattr(r, names[0]),))
            written = list(map(values, map(rows.__getitem__, missing)))
            for i, text, frozen in zip(missing, _dumps_each(written), _immutable_rows(written)):
                texts[i] = text
                kept[i] = text if frozen else None
        self._last = dict(zip(map(id, rows), zip(rows, kept)))
        return f'{{"columns":{_dumps(list(names))},"rows":[{",".join(texts)}]}}'


def _dumps_each(values: list[Any]) -> list[str]:
    """The text of each value, as ``_dumps`` would write it alone, by one ``json.dumps`` of them all."""
    if len(values) < 2:
        return [_dumps(v) for v in values]
    mark = "\0" + secrets.token_hex(16)  # between the values; no value's text can hold it (a fresh nonce)
    joined = [mark] * (2 * len(values) - 1)
    joined[0::2] = values
    cut = f",{_dumps(mark)},"
    texts = _dumps(joined)[1:-1].split(cut)
    return texts if len(texts) == len(values) else [_dumps(v) for v in values]


def _immutable_rows(rows: list[tuple[Any, ...]]) -> list[bool]:
    """Whether each row holds only scalars and tuples of scalars (a column at a time, in C where it can)."""
    frozen = [True] * len(rows)
    for column in range(len(rows[0]) if rows else 0):
        values = list(map(itemgetter(column), rows))
        kinds = set(map(type, values))
        if kinds <= _IMMUTABLE or (kinds == {tuple} and set(map(type, chain.from_iterable(values))) <= _IMMUTABLE):
            continue
        for i in [i for i, v in enumerate(values) if v != () and type(v) not in _IMMUTABLE]:  # () is the usual
            v = values[i]
            if not (type(v) is tuple and set(map(type, v)) <= _IMMUTABLE):
                frozen[i] = False
    return frozen


_NOT_WRITTEN = (None, None)


def _compact(obj: Any) -> Any:
    """``json.dumps``'s hook for what JSON has no form of: records, tables, ScoredIds and other mappings."""
    if isinstance(obj, (ScoredIds, _Table)):
        return obj.to_json()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _record_writer(type(obj))(obj)
    if isinstance(obj, Mapping):
        return {str(k): v for k, v in obj.items()}
    raise TypeError(f"{type(obj).__name__} has no JSON form")


@lru_cache(maxsize=None)
def _record_writer(cls: type) -> Callable[[Any], dict[str, Any]]:
    """The object of a record's fields, its tuples of records (of their declared type) as tables."""
    names = field_names(cls)
    values = attrgetter(*names) if len(names) > 1 else (lambda obj: (getattr(obj, names[0]),) if names else ())
    hints = _hints(cls)
    tables = tuple((name, row_cls) for name in names if (row_cls := _record_tuple(hints.get(name))) is not None)

    def write(obj: Any) -> dict[str, Any]:
        out = dict(zip(names, values(obj)))
        for name, row_cls in tables:
            rows = out[name]
            if isinstance(rows, (tuple, list)) and rows and all(type(r) is row_cls for r in rows):
                out[name] = _Table(row_cls, rows)
        return out

    return write


def _record_tuple(tp: Any) -> type | None:
    """The record class of a ``tuple[Record, ...]`` hint, else None."""
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
            return args[0]
    return None


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _identity(data: Any) -> Any:
    return data


def from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild a value of type ``tp`` from :func:`to_jsonable` output."""
    return _decoder(tp)(data)


@lru_cache(maxsize=None)
def _decoder(tp: Any) -> Callable[[Any], Any]:
    """A function turning JSON data into a value of type ``tp`` (built once per type)."""
    if tp is Any or tp is object:
        return _identity
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return _union_decoder(args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            if item is _identity:
                return tuple
            if _record_tuple(tp) is not None:
                return _rows_decoder(item)
            return lambda data: tuple(item(x) for x in data)
        if not args:
            return tuple
        parts = tuple(_decoder(a) for a in args)
        return lambda data: tuple(d(x) for d, x in zip(parts, data))
    if origin in (list, typing.Sequence):
        item = _decoder(args[0]) if args else _identity
        return lambda data: [item(x) for x in data]
    if origin in (dict, Mapping) or tp is dict:
        value = _decoder(args[1]) if len(args) == 2 else _identity
        if value is _identity:
            return dict
        return lambda data: {k: value(v) for k, v in data.items()}
    if tp is float:
        return _float
    if tp in (int, str, bool):
        return _exact(tp)
    return _identity


def _dataclass_decoder(cls: type) -> Callable[[Any], Any]:
    hints = _hints(cls)
    fields = tuple((f.name, _decoder(hints[f.name])) for f in dataclasses.fields(cls) if f.init)

    def decode(data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError(f"expected an object for {cls.__name__}, got {type(data).__name__}")
        return cls(**{name: dec(data[name]) for name, dec in fields if name in data})

    return decode


def _rows_decoder(item: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Records from a list of objects, or from a table (:func:`compact_json`)."""

    def decode(data: Any) -> Any:
        if isinstance(data, Mapping):
            columns = data["columns"]
            return tuple(item(dict(zip(columns, row))) for row in data["rows"])
        return tuple(item(x) for x in data)

    return decode


def _union_decoder(args: tuple[Any, ...]) -> Callable[[Any], Any]:
    nullable = type(None) in args
    options = tuple(_decoder(a) for a in args if a is not type(None))

    def decode(data: Any) -> Any:
        if data is None and nullable:
            return None
        for option in options:
            try:
                return option(data)
            except (TypeError, ValueError):
                continue
        raise ValueError(f"value {data!r} fits none of {args}")

    return decode


def _float(data: Any) -> float:
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise ValueError(f"expected a number, got {data!r}")
    return float(data)


def _exact(tp: type) -> Callable[[Any], Any]:
    def decode(data: Any) -> Any:
        if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
            raise ValueError(f"expected {tp.__name__}, got {data!r}")
        return data

    return decode


def loads(tp: type[T], text: str) -> T:
    return from_jsonable(tp, json.loads(text))
