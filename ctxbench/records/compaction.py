"""Summaries of history, the compaction preview that makes them, and tasks (seeds 002 and 004).

A :class:`Summary` stands in for the turns it covers: the planner offers it as a candidate (section
``history``, reason ``summary``) and excludes its covered turns with reason ``summarised``. The turns stay
in the store; undoing the compaction brings them back. A :class:`CompactionPreview` is what a compaction
would do, turn by turn, before anything changes. A :class:`Task` is a named scope of turns that leases of
scope ``task`` live in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# what a compaction does with one turn
KEPT = "kept"  # sent verbatim as before
SUMMARISED = "summarised"  # replaced by the summary
DROPPED = "dropped"  # dropped by the user before: neither kept nor summarised
PROTECTED = "protected"  # never summarised: a sticky pin, a standing instruction, the STATE, a task lease
DISPOSITIONS = (KEPT, SUMMARISED, DROPPED, PROTECTED)

SOURCE_EXTRACTIVE = "extractive"
MODEL_SOURCE_PREFIX = "model:"

SUMMARY_STATUSES = ("active", "undone")


@dataclass(frozen=True)
class Summary:
    """A stored summary of turns (the ``summaries`` record of seed 004).

    ``group_ids`` are the turns it replaces, ``message_ids`` their messages (the source ids);
    ``kept_groups`` are the protected turns inside its span, sent verbatim beside it.
    """

    id: int
    session_id: str
    branch_id: str
    group_ids: tuple[int, ...]
    message_ids: tuple[int, ...]
    text: str
    source: str  # "extractive" or "model:NAME"
    tokens_before: int  # tokens of the covered turns' messages
    tokens_after: int  # tokens of the summary as the planner sends it
    created_at: str
    kept_groups: tuple[int, ...] = ()
    task_id: int = 0  # the finished task it summarises (0: none)
    status: str = "active"

    @property
    def label(self) -> str:
        return f"s{self.id}"

    @property
    def span(self) -> str:
        """``turns 3–40`` (first and last covered turn)."""
        if not self.group_ids:
            return "no turns"
        first, last = min(self.group_ids), max(self.group_ids)
        return f"turn {first}" if first == last else f"turns {first}–{last}"

    @property
    def ratio(self) -> float:
        """Compression ratio: tokens before over tokens after (4.2 means 4.2×)."""
        return self.tokens_before / self.tokens_after if self.tokens_after else 0.0


@dataclass(frozen=True)
class TurnDisposition:
    """One row of a compaction preview: a turn and what the compaction does with it."""

    group_id: int
    disposition: str  # one of DISPOSITIONS
    reason: str  # why: "recent turn", "sticky pin p2", "standing instruction", "chosen by you", ...
    tokens: int  # tokens of the turn's active messages
    first_words: str  # the turn's user message, cut for a row
    toggleable: bool  # the user may switch it between kept and summarised
    summary: str = ""  # an earlier summary that already covers it ("s2"), else ""


@dataclass(frozen=True)
class CompactionPreview:
    """What a compaction would do (nothing changes until it is applied)."""

    session_id: str
    branch_id: str
    target_tokens: int
    rows: tuple[TurnDisposition, ...]
    summary_text: str
    source: str
    tokens_before: int  # history tokens now (active turns not yet summarised, plus earlier summaries)
    tokens_after: int  # the same after applying
    summary_tokens: int  # tokens of the new summary as the planner would send it
    choices: tuple[tuple[int, str], ...] = ()  # the user's kept/summarised choices it was built with
    cost_note: str = ""  # the model call's tokens (and cost when known); "" for an extractive summary
    notes: tuple[str, ...] = ()
    message_ids: tuple[int, ...] = ()  # the source ids: the messages of the turns it summarises
    kept_groups: tuple[int, ...] = ()  # protected turns older than the last summarised one (sent beside it)
    task_id: int = 0  # the finished task it summarises (``/compact task``)

    @property
    def summarised_groups(self) -> tuple[int, ...]:
        return tuple(r.group_id for r in self.rows if r.disposition == SUMMARISED and not r.summary)

    @property
    def protected(self) -> tuple[TurnDisposition, ...]:
        return tuple(r for r in self.rows if r.disposition == PROTECTED)

    @property
    def ratio(self) -> float:
        """Compression ratio of the turns this compaction summarises (before over after)."""
        before = sum(r.tokens for r in self.rows if r.disposition == SUMMARISED and not r.summary)
        return before / self.summary_tokens if self.summary_tokens else 0.0

    @property
    def changes_anything(self) -> bool:
        return bool(self.summarised_groups)

    @property
    def refusal(self) -> str:
        """Why this preview cannot be applied ("" when it can): it summarises no turn, its summary is empty,
        or the summary would not be smaller than the turns it replaces."""
        if not self.changes_anything:
            return "nothing to apply: the preview summarises no turn"
        if not self.summary_text.strip():
            return "the summary is empty: nothing to apply (keep more turns or choose others)"
        if self.tokens_after >= self.tokens_before:
            replaced = sum(r.tokens for r in self.rows if r.disposition == SUMMARISED and not r.summary)
            return (f"nothing to gain: the summary ({self.summary_tokens:,} tokens) is not smaller than the "
                    f"{replaced:,} tokens of the turns it would replace; summarise more turns")
        return ""

    def to_json(self, summary_ids: tuple[int, ...] = ()) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "target_tokens": self.target_tokens,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summary_tokens": self.summary_tokens,
            "compression_ratio": round(self.ratio, 3),
            "protected": [{"turn": r.group_id, "reason": r.reason} for r in self.protected],
            "summarised_groups": list(self.summarised_groups),
            "summary_ids": list(summary_ids),
            "source": self.source,
            "summary": self.summary_text,
            "cost": self.cost_note or None,
            "notes": list(self.notes),
            "turns": [
                {"turn": r.group_id, "disposition": r.disposition, "reason": r.reason, "tokens": r.tokens,
                 **({"summary": r.summary} if r.summary else {})}
                for r in self.rows
            ],
        }


@dataclass(frozen=True)
class CompactionMetrics:
    """Seed 004's metrics of one plan: the summaries it sends and what they save."""

    summaries: int  # summaries included
    summary_tokens: int  # their tokens
    covered_tokens: int  # tokens of the turns they stand in for (as the planner would have sent them)
    tokens_saved: int

    @property
    def ratio(self) -> float:
        return self.covered_tokens / self.summary_tokens if self.summary_tokens else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"summaries": self.summaries, "summary_tokens": self.summary_tokens,
                "covered_tokens": self.covered_tokens, "tokens_saved": self.tokens_saved,
                "compression_ratio": round(self.ratio, 3)}


def compaction_metrics(plan: Any) -> CompactionMetrics:
    """The metrics of a ContextPlan (its ``summary`` items and the ``summarised`` items they replace)."""
    summaries = [i for i in plan.included if i.kind == "summary"]
    if not summaries:  # nothing to weigh (and a deferred plan's excluded history is not made for it)
        return CompactionMetrics(0, 0, 0, 0)
    included_labels = {i.id for i in summaries}
    summary_tokens = sum(i.tokens for i in summaries)
    covered = sum(i.tokens for i in plan.items
                  if i.reason == "summarised" and _summary_of(i.detail) in included_labels)
    return CompactionMetrics(len(summaries), summary_tokens, covered, max(0, covered - summary_tokens))


def _summary_of(detail: str) -> str:
    """``summary:3`` from a ``summarised`` item's detail (``in summary s3 (turns 1–9)``)."""
    marker = "in summary s"
    at = detail.find(marker)
    if at < 0:
        return ""
    digits = ""
    for ch in detail[at + len(marker):]:
        if not ch.isdigit():
            break
        digits += ch
    return f"summary:{digits}" if digits else ""


# reasons of history items a plan could never send, whatever the budget (they do not press on it)
_NOT_DEMANDED = frozenset({"summarised", "dropped_by_user", "isolated_strategy", "duplicate"})


RECALLED = "recalled from summary"  # the detail of an atom of a summarised turn a retrieval strategy brought back


def _demanded(item: Any) -> bool:
    """A history item the whole remaining history needs: not summarised, dropped or a duplicate, and not a turn
    a summary stands in for that a retrieval strategy recalled (the summary counts for it)."""
    return item.section == "history" and item.reason not in _NOT_DEMANDED and not item.detail.startswith(RECALLED)


def history_demand(plan: Any) -> int:
    """Tokens the plan would need to send everything it has and the whole remaining history (every history
    item not summarised, dropped or a duplicate, included or not)."""
    others = sum(i.tokens for i in plan.items if i.included and i.section != "history")
    return others + sum(i.tokens for i in plan.items if _demanded(i))


def history_need(plan: Any) -> int:
    """The history part of ``history_demand`` without the current turn: the earlier turns not summarised, and the
    summaries, as the plan sends them — what a compaction preview's before and after count."""
    return sum(i.tokens for i in plan.items if _demanded(i) and i.kind != "current_turn")


@dataclass(frozen=True)
class CompactionPressure:
    """How close the history is to the auto-compact threshold, for the meter's warning."""

    demand: int  # history_demand of the plan
    budget: int
    threshold: float  # share of the budget; 0 = the warning is off

    @property
    def share(self) -> float:
        return self.demand / self.budget if self.budget > 0 else 0.0

    @property
    def warn(self) -> bool:
        return self.threshold > 0 and self.share >= self.threshold

    @property
    def line(self) -> str:
        """The meter's warning ("" when there is none)."""
        if not self.warn:
            return ""
        return (f"history needs {self.share:.0%} of the budget (auto-compact at {self.threshold:.0%}): "
                f"/compact to preview")


@dataclass(frozen=True)
class Task:
    """A named scope of turns: started by the user (``/task start``) or opened by a STATE block's goal."""

    id: int
    session_id: str
    branch_id: str
    name: str
    opened_by: str  # "user" | "state"
    started_group: int  # the first turn of the task
    ended_group: int | None  # the last turn; None while the task is open
    started_at: str
    ended_at: str = ""

    @property
    def open(self) -> bool:
        return self.ended_group is None


TASK_OPENERS = ("user", "state")


TASK_NAME_CHARS = 60  # a task opened by a STATE goal is named by the goal's first characters


def task_from_goal(current: Task | None, goal: str) -> str | None:
    """The task a STATE block's ``Goal:`` opens, or None: a goal opens a task when none is open, and
    replaces a task an earlier goal opened when it names another; a task the user started stays."""
    name = " ".join(goal.split())
    if len(name) > TASK_NAME_CHARS:
        name = name[: TASK_NAME_CHARS - 1].rstrip() + "…"
    if not name:
        return None
    if current is None:
        return name
    if current.opened_by == "state" and current.name != name:
        return name
    return None


@dataclass(frozen=True)
class TaskChange:
    """What starting or ending a task did: the task opened (or None), the one that ended (or None), and how
    many leases of scope ``task`` ended with it."""

    opened: Task | None
    ended: Task | None
    leases_ended: int = 0
