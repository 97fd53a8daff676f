"""Typed references to plan items and pin targets: ``ItemRef.parse(item_id)`` and ``str(ref)`` back.

An item id (and a pin target) is ``kind:rest``: ``card:pkg.mod.f``, ``group:12``, ``atom:12:40`` (a turn's part:
its first message id, or a tool call's id in the proxy, empty when the client sent none), ``capsule:3``,
``summary:4``, ``pin:p_ab12``, ``path:src/app.py``, and the proxy's ``tool:NAME`` (a tool definition) and
``file:MESSAGE:PART`` (an attached file: the message's index in the request and the part's).
:meth:`ItemRef.parse` reads one into its typed reference; an id of another kind (``memo:``, ``text:``,
``system:``, ``system_prompt``...) or a malformed one (``group:x``) becomes an
:class:`OtherRef` holding the id as it was. ``str(ItemRef.parse(x)) == x`` for every id the planner and the
proxy make. This is the one place an id is taken apart.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_INT = re.compile(r"0|-?[1-9][0-9]*")  # written as str(int) writes it, so the id reads back the same


def _int(text: str) -> int | None:
    return int(text) if _INT.fullmatch(text) else None


@dataclass(frozen=True)
class ItemRef:
    """A reference to a plan item or pin target (one of the frozen subclasses below)."""

    @property
    def kind(self) -> str:
        raise NotImplementedError

    @staticmethod
    def parse(item_id: str) -> "ItemRef":
        """The typed reference ``item_id`` names (an :class:`OtherRef` for a kind without a type of its own)."""
        kind, sep, rest = item_id.partition(":")
        if sep:
            if kind == "card" and rest:
                return CardRef(rest)
            if kind == "path" and rest:
                return PathRef(rest)
            if kind == "pin" and rest:
                return PinRef(rest)
            if kind == "group" and (n := _int(rest)) is not None:
                return GroupRef(n)
            if kind == "atom":
                head, has_part, part = rest.partition(":")
                n = _int(head)
                if n is not None:
                    return AtomRef(n, part if has_part else None)
            if kind == "tool":
                return ToolRef(rest)
            if kind == "file":
                message, has_part, part = rest.partition(":")
                if has_part and (m := _int(message)) is not None and (k := _int(part)) is not None:
                    return FileRef(m, k)
            if kind in ("capsule", "summary") and (n := _int(rest)) is not None and n >= 0:
                return CapsuleRef(n) if kind == "capsule" else SummaryRef(n)
        return OtherRef(item_id)

    @property
    def group_id(self) -> int | None:
        """The turn the reference points into (a group or an atom), else None."""
        return None


@dataclass(frozen=True)
class CardRef(ItemRef):
    symbol: str

    @property
    def kind(self) -> str:
        return "card"

    def __str__(self) -> str:
        return f"card:{self.symbol}"


@dataclass(frozen=True)
class PathRef(ItemRef):
    path: str

    @property
    def kind(self) -> str:
        return "path"

    def __str__(self) -> str:
        return f"path:{self.path}"


@dataclass(frozen=True)
class PinRef(ItemRef):
    pin_id: str

    @property
    def kind(self) -> str:
        return "pin"

    def __str__(self) -> str:
        return f"pin:{self.pin_id}"


@dataclass(frozen=True)
class GroupRef(ItemRef):
    group: int

    @property
    def kind(self) -> str:
        return "group"

    @property
    def group_id(self) -> int | None:
        return self.group

    def __str__(self) -> str:
        return f"group:{self.group}"


@dataclass(frozen=True)
class AtomRef(ItemRef):
    """A part of a turn: ``part`` is its first message id (the planner's atoms) or a tool call's id (the proxy's,
    "" for a call the client sent without an id)."""

    group: int
    part: str | None = None

    @property
    def kind(self) -> str:
        return "atom"

    @property
    def group_id(self) -> int | None:
        return self.group

    @property
    def message_id(self) -> int | None:
        """The part as a stored message id, when it is one."""
        return _int(self.part) if self.part is not None else None

    def __str__(self) -> str:
        return f"atom:{self.group}" if self.part is None else f"atom:{self.group}:{self.part}"


@dataclass(frozen=True)
class ToolRef(ItemRef):
    """A tool definition in a proxied request (``tool:read_file``; the name as the client sent it, maybe empty)."""

    name: str

    @property
    def kind(self) -> str:
        return "tool"

    def __str__(self) -> str:
        return f"tool:{self.name}"


@dataclass(frozen=True)
class FileRef(ItemRef):
    """A file attached to a proxied request: the message's index in the request and the part's in the message."""

    message: int
    part: int

    @property
    def kind(self) -> str:
        return "file"

    def __str__(self) -> str:
        return f"file:{self.message}:{self.part}"


@dataclass(frozen=True)
class CapsuleRef(ItemRef):
    capsule_id: int

    @property
    def kind(self) -> str:
        return "capsule"

    def __str__(self) -> str:
        return f"capsule:{self.capsule_id}"


@dataclass(frozen=True)
class SummaryRef(ItemRef):
    summary_id: int

    @property
    def kind(self) -> str:
        return "summary"

    def __str__(self) -> str:
        return f"summary:{self.summary_id}"


@dataclass(frozen=True)
class OtherRef(ItemRef):
    """An id of a kind without a type of its own (``memo:3``, ``text:label``, ``system_prompt``)."""

    item_id: str

    @property
    def kind(self) -> str:
        return self.item_id.partition(":")[0]

    @property
    def value(self) -> str:
        """What follows the kind ("" for an id without one)."""
        return self.item_id.partition(":")[2]

    def __str__(self) -> str:
        return self.item_id


def card_symbol(item_id: str) -> str | None:
    """The symbol a card id (``card:pkg.mod.f``) names; None for an id of another kind."""
    ref = ItemRef.parse(item_id)
    return ref.symbol if isinstance(ref, CardRef) else None


def tool_name(item_id: str) -> str | None:
    """The tool a tool definition's id (``tool:read_file``) names; None for an id of another kind."""
    ref = ItemRef.parse(item_id)
    return ref.name if isinstance(ref, ToolRef) else None


def atom_call_id(item_id: str) -> str | None:
    """The part an atom id names after its turn (``atom:12:call_1`` → ``call_1``); None for another id."""
    ref = ItemRef.parse(item_id)
    return ref.part if isinstance(ref, AtomRef) else None
