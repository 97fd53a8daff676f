"""Pins per branch of a session. One pin per target: pinning a target again updates the existing pin.

Pin ids are ``p<n>`` with ``n`` never reused, so a plan that names ``pin:p3`` stays unambiguous.
:class:`Pins` is the repository the service uses; the module functions are the SQL.
"""
from __future__ import annotations

import sqlite3
from typing import Any, Callable

from ctxbench.records.plans import Pin
from ctxbench.records.vocab import LEASE_SCOPES, PIN_KINDS
from ctxbench.store.clock import now_iso
from ctxbench.records.errors import UnknownPin
from ctxbench.store import sessions as session_store
from ctxbench.store.db import Connections

_EDITABLE = ("kind", "label", "content", "scope", "ttl", "source")


def pin_number(pin_id: str) -> int:
    if not pin_id.startswith("p") or not pin_id[1:].isdigit():
        raise UnknownPin(f"not a pin id: {pin_id!r} (pins are named p1, p2, ...)")
    return int(pin_id[1:])


def _pin(row: sqlite3.Row) -> Pin:
    return Pin(
        id=f"p{row['n']}",
        target=row["target"],
        kind=row["kind"],
        label=row["label"],
        content=row["content"],
        scope=row["scope"],
        ttl=int(row["ttl"]),
        created_turn=int(row["created_turn"]),
        source=row["source"],
    )


def _check(kind: str, scope: str, ttl: int) -> None:
    if kind not in PIN_KINDS:
        raise ValueError(f"unknown pin kind {kind!r}; expected one of {', '.join(PIN_KINDS)}")
    if scope not in LEASE_SCOPES:
        raise ValueError(f"unknown lease scope {scope!r}; expected one of {', '.join(LEASE_SCOPES)}")
    if ttl < 0:
        raise ValueError(f"pin ttl must be >= 0, got {ttl}")


def add_pin(
    conn: sqlite3.Connection,
    session_id: str,
    branch_id: str,
    target: str,
    kind: str,
    *,
    scope: str,
    ttl: int,
    label: str,
    content: str,
    source: str,
    created_turn: int,
) -> Pin:
    if not target:
        raise ValueError("a pin needs a target, e.g. group:12 or card:pkg.mod.func")
    _check(kind, scope, ttl)
    conn.execute(
        "INSERT INTO pins (session_id, branch_id, target, kind, label, content, scope, ttl, created_turn, source, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (branch_id, target) DO UPDATE SET kind = excluded.kind, label = excluded.label, "
        "content = excluded.content, scope = excluded.scope, ttl = excluded.ttl, source = excluded.source",
        (session_id, branch_id, target, kind, label, content, scope, ttl, created_turn, source, now_iso()),
    )
    row = conn.execute("SELECT * FROM pins WHERE branch_id = ? AND target = ?", (branch_id, target)).fetchone()
    return _pin(row)


def list_pins(conn: sqlite3.Connection, branch_id: str) -> tuple[Pin, ...]:
    rows = conn.execute("SELECT * FROM pins WHERE branch_id = ? ORDER BY n", (branch_id,))
    return tuple(_pin(r) for r in rows)


def get_pin(conn: sqlite3.Connection, session_id: str, branch_id: str, pin_id: str) -> Pin:
    row = conn.execute("SELECT * FROM pins WHERE branch_id = ? AND n = ?", (branch_id, pin_number(pin_id))).fetchone()
    if row is None:
        raise UnknownPin(f"session {session_id} has no pin {pin_id}")
    return _pin(row)


def update_pin(conn: sqlite3.Connection, session_id: str, branch_id: str, pin_id: str, **changes: Any) -> Pin:
    unknown = set(changes) - set(_EDITABLE)
    if unknown:
        raise ValueError(f"cannot change pin field(s) {', '.join(sorted(unknown))}")
    current = get_pin(conn, session_id, branch_id, pin_id)
    merged = {name: changes.get(name, getattr(current, name)) for name in _EDITABLE}
    _check(merged["kind"], merged["scope"], int(merged["ttl"]))
    conn.execute(
        "UPDATE pins SET kind = ?, label = ?, content = ?, scope = ?, ttl = ?, source = ? WHERE n = ?",
        (*(merged[n] for n in _EDITABLE), pin_number(pin_id)),
    )
    return get_pin(conn, session_id, branch_id, pin_id)


def remove_pin(conn: sqlite3.Connection, session_id: str, branch_id: str, pin_id: str) -> None:
    cur = conn.execute("DELETE FROM pins WHERE branch_id = ? AND n = ?", (branch_id, pin_number(pin_id)))
    if cur.rowcount == 0:
        raise UnknownPin(f"session {session_id} has no pin {pin_id}")


def copy_pins(conn: sqlite3.Connection, session_id: str, source_branch: str, target_branch: str) -> None:
    """A fork inherits its parent's pins (new pin ids; they change independently from then on)."""
    conn.execute(
        "INSERT INTO pins (session_id, branch_id, target, kind, label, content, scope, ttl, created_turn, source, "
        "created_at) SELECT session_id, ?, target, kind, label, content, scope, ttl, created_turn, source, ? "
        "FROM pins WHERE branch_id = ? ORDER BY n",
        (target_branch, now_iso(), source_branch),
    )


class Pins:
    """A session's pins. ``lease_ttl(scope)`` is the lease length (turns) a leased pin gets by default."""

    def __init__(self, database: Connections, lease_ttl: Callable[[str], int]) -> None:
        self._db = database
        self._lease_ttl = lease_ttl

    def list(self, session_id: str) -> tuple[Pin, ...]:
        """The pins of the session's active branch, oldest first."""
        with self._db.connection() as conn:
            return list_pins(conn, session_store.active_branch(conn, session_id))

    def add(self, session_id: str, target: str, kind: str, *, scope: str = "turn", ttl: int | None = None,
            label: str = "", content: str = "", source: str = "user") -> Pin:
        """Pin ``target`` (``group:12``, ``card:pkg.mod.f``, ``text:<label>``); pinning it again updates it.

        A leased pin without ``ttl`` gets the lease length of its scope; only the user makes a pin sticky.
        """
        if kind == "sticky" and source != "user":
            raise ValueError("only the user makes a pin sticky")
        if ttl is None:
            ttl = self._lease_ttl(scope) if kind == "leased" else 0
        with self._db.transaction() as conn:
            turn = session_store.next_group_id(conn, session_id)
            return add_pin(conn, session_id, session_store.active_branch(conn, session_id), target, kind,
                           scope=scope, ttl=ttl, label=label, content=content, source=source, created_turn=turn)

    def update(self, session_id: str, pin_id: str, **changes: Any) -> Pin:
        """Change a pin's kind, label, content, scope, ttl or source."""
        with self._db.transaction() as conn:
            return update_pin(conn, session_id, session_store.active_branch(conn, session_id), pin_id, **changes)

    def remove(self, session_id: str, pin_id: str) -> None:
        with self._db.transaction() as conn:
            remove_pin(conn, session_id, session_store.active_branch(conn, session_id), pin_id)
