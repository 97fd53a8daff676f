"""Frozen dataclasses to JSON and back, guided by their type hints.

Plans, plan inputs and retrieval sets are stored as JSON and rebuilt into the same frozen
records, so that a stored plan renders exactly the payload it had when it was made.
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import lru_cache
from typing import Any, Mapping, TypeVar, Union

T = TypeVar("T")


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data for a (nested) dataclass record."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    return obj


def canonical_json(obj: Any) -> str:
    """One canonical text for a record: sorted keys, no whitespace, UTF-8 kept."""
    return json.dumps(to_jsonable(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild a value of type ``tp`` from :func:`to_jsonable` output."""
    if tp is Any or tp is object:
        return data
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, Mapping):
            raise ValueError(f"expected an object for {tp.__name__}, got {type(data).__name__}")
        hints = _hints(tp)
        kwargs = {
            f.name: from_jsonable(hints[f.name], data[f.name])
            for f in dataclasses.fields(tp)
            if f.init and f.name in data
        }
        return tp(**kwargs)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return from_jsonable(arg, data)
            except (TypeError, ValueError):
                continue
        raise ValueError(f"value {data!r} fits none of {tp}")
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_jsonable(args[0], x) for x in data)
        if not args:
            return tuple(data)
        return tuple(from_jsonable(a, x) for a, x in zip(args, data))
    if origin in (list, typing.Sequence):
        return [from_jsonable(args[0] if args else Any, x) for x in data]
    if origin in (dict, Mapping) or tp is dict:
        value_type = args[1] if len(args) == 2 else Any
        return {k: from_jsonable(value_type, v) for k, v in data.items()}
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise ValueError(f"expected a number, got {data!r}")
        return float(data)
    if tp in (int, str, bool):
        if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
            raise ValueError(f"expected {tp.__name__}, got {data!r}")
        return data
    return data


def loads(tp: type[T], text: str) -> T:
    return from_jsonable(tp, json.loads(text))
