"""Pin lifecycle as pure functions (seed 002).

* sticky — the user's; never changed or dropped here;
* leased — auto-added for a scope (``turn`` or ``task``) with a TTL in turns; ``advance_turn``
  counts it down once per new turn and drops it when it reaches 0 — except a lease of scope ``task``
  while a task is open: it lives as long as the task (ending the task ends it);
* ephemeral — a thin card for one plan; ``advance_turn`` drops it once its turn is over.

Promotion: an ephemeral pin whose target was referenced in at least ``promote_after_turns`` turns
becomes leased with the default TTL (``task_lease_ttl`` for task scope). Nothing is ever promoted
to sticky: only the user makes a pin sticky.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from ctxbench.config import PinConfig
from ctxbench.records.plans import Pin


def advance_turn(pins: Sequence[Pin], turn: int, *, task_open: bool = False) -> tuple[Pin, ...]:
    """The pins that live on into ``turn`` (call once per new turn).

    Pins created at ``turn`` or later are new for this turn and pass unchanged. Older leased pins
    lose one turn of TTL and are dropped at 0 (leases of scope ``task`` do not age while ``task_open``);
    older ephemeral pins are dropped.
    """
    out: list[Pin] = []
    for pin in pins:
        if pin.kind == "sticky" or pin.created_turn >= turn or (task_open and pin.kind == "leased" and pin.scope == "task"):
            out.append(pin)
        elif pin.kind == "leased":
            ttl = pin.ttl - 1
            if ttl > 0:
                out.append(dataclasses.replace(pin, ttl=ttl))
        elif pin.kind != "ephemeral":
            raise ValueError(f"pin {pin.id}: unknown kind {pin.kind!r}")
    return tuple(out)


def reference_count(pin: Pin, reference_counts: Mapping[str, int]) -> int:
    """Turns in which ``pin`` was referenced; counts are keyed by pin target (pin ids work too)."""
    return max(reference_counts.get(pin.target, 0), reference_counts.get(pin.id, 0))


def promote(pins: Sequence[Pin], reference_counts: Mapping[str, int], config: PinConfig) -> tuple[Pin, ...]:
    """Ephemeral pins referenced in >= ``promote_after_turns`` turns become leased; order is kept."""
    out: list[Pin] = []
    for pin in pins:
        if pin.kind == "ephemeral" and reference_count(pin, reference_counts) >= config.promote_after_turns:
            ttl = config.task_lease_ttl if pin.scope == "task" else config.default_lease_ttl
            out.append(dataclasses.replace(pin, kind="leased", ttl=ttl, source="promotion"))
        else:
            out.append(pin)
    return tuple(out)
