"""What the service hands a front end about an open session: its snapshot, a plan with what the screens
show beside it, the suggested pins, a replayed turn, and the progress of background work."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.records.diffs import PlanDiff
from ctxbench.records.messages import Message
from ctxbench.records.plans import ContextPlan, Pin
from ctxbench.records.proxy_cost import PlanCounts
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.item_refs import ItemRef, PinRef


@dataclass(frozen=True)
class SessionSnapshot:
    session_id: str
    title: str
    repo: str | None
    settings: SessionSettings
    history: tuple[Message, ...]  # active and dropped messages of the active branch, oldest first
    dropped: frozenset[int]
    pins: tuple[Pin, ...]
    branch: str = "main"  # the active branch's name
    task: str = ""  # the open task's name ("" when none is open)
    notice: str = ""  # something the opening settled (a turn that ended with its process mid-turn), to be said


@dataclass(frozen=True)
class Suggestion:
    """A suggested pin: shown dimmed under the overlay's ``suggested pins`` delimiter."""

    target: str
    label: str
    score: float
    why: str
    content: str = ""
    tokens: int = 0  # what pinning it would add to the plan (its item's tokens; 0: not known before it is pinned)


@dataclass(frozen=True)
class PlanView:
    """A plan and what the screens show with it."""

    plan: ContextPlan
    settings: SessionSettings | None
    pins: tuple[Pin, ...]
    suggestions: tuple[Suggestion, ...]
    group_id: int | None  # the turn planned (None: a draft that is not stored yet)
    draft: bool = False
    diff: PlanDiff | None = None  # against the previous turn's last stored plan (None: there is none)
    compact_warning: str = ""  # the meter's auto-compact warning ("" below the threshold)
    task: str = ""  # the task open now ("" when none), for the status line
    # a proxied plan's counts as shown (calibrated to the model where usage is known); None: the plan's own counts
    counts: PlanCounts | None = None

    def pin_for(self, item_id: str) -> Pin | None:
        ref = ItemRef.parse(item_id)
        if isinstance(ref, PinRef):
            return next((p for p in self.pins if p.id == ref.pin_id), None)
        return next((p for p in self.pins if p.target == item_id), None)


@dataclass(frozen=True)
class ReplayStep:
    """The plan turn ``turn`` would get now."""

    turn: int  # 1-based position among the session's user turns
    group_id: int
    user_message: Message
    plan: ContextPlan
    history_messages: int  # messages the planner could choose from
    # tokens of the longest prefix this plan's payload shares with the previous turn's plan (a provider's prompt cache
    # can read them; 0 for the first turn, and for a turn replayed alone)
    prefix_tokens: int = 0


@dataclass(frozen=True)
class ReplayPage:
    """A replayed turn (or why there is none) and how many user turns the session has."""

    total: int
    step: ReplayStep | None
    error: str = ""


@dataclass(frozen=True)
class Progress:
    """One slot of background work (``index``, ``embedder``, ``turn``): replaced on each update."""

    slot: str
    text: str
    state: str = "busy"  # busy | ready | error | idle
    fraction: float | None = None  # 0..1 when known
