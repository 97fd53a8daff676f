"""Events of one turn, in the order a consumer sees them.

The turn runner (:mod:`ctxbench.llm.loop`) is a generator of these frozen records; the service
passes them on (each plan as a :class:`TurnPlanned` carrying what the screens show with it), the TUI
posts each one to its screen in one typed message and the CLI prints or collects them. A turn always
ends with exactly one :class:`TurnFinished`.

(wait)      TurnWaiting                          another turn of the session is running: this one waits for it
(recover)   TurnRecovered                        the session's last turn ended with its process: settled first
Intent      TurnStarted                          the user's message is stored (before any call)
Context     PlanReady (TurnPlanned from the service) the plan for this model call (one per round)
Action      CallStarted, Retrying, ReplyDelta,   streaming; ToolCallRequested as the model names a tool
            ToolCallRequested, AssistantStored
Feedback    ToolStarted, ToolFinished,           tool rounds; usage vs estimate per call
            UsageRecorded, StateUpdated
Reflection  ReflectionDone                       activation, leases, promotions, suggestions
end         TurnFailed | TurnCancelled (if so), then TurnFinished
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Union

from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.plans import ContextPlan
from ctxbench.records.views import PlanView


@dataclass(frozen=True)
class TurnWaiting:
    """Another turn of the same session is running (another process, another window): this one waits."""

    session_id: str
    holder: str  # who runs it ("process 4242")


@dataclass(frozen=True)
class TurnRecovered:
    """The session's last turn ended with its process mid-turn (``kill -9``, a closed terminal): its message, if
    it got no reply, is now flagged ``unanswered`` and left out of plans; a reply saved mid-stream is kept as
    partial. Comes before this turn's message is stored."""

    session_id: str
    left_by: str  # the process id that ran it
    message: Message  # the unanswered user message, or the partial reply kept
    note: str  # one line saying so


def recovered_note(session_id: str, left_by: str, message: Message) -> str:
    """What :class:`TurnRecovered` says (also after ``open`` and ``plan``)."""
    head = f"the last turn of session {session_id} ended with its process ({left_by}) mid-turn: "
    if message.role == "assistant":
        return head + f"its partial reply is kept ({len(message.content):,} characters saved as it streamed)"
    return head + "its message got no reply and is flagged unanswered, left out of later plans " \
                  "(/context restore brings it back)"


@dataclass(frozen=True)
class TurnStarted:
    session_id: str
    group_id: int
    user_message: Message


@dataclass(frozen=True)
class PlanReady:
    plan: ContextPlan
    round: int  # 0 for the turn's first call, then one per tool round


@dataclass(frozen=True)
class TurnPlanned:
    """A plan of the turn as the workbench shows it (the service's form of PlanReady, with pins and suggestions)."""

    view: PlanView
    round: int


@dataclass(frozen=True)
class CallStarted:
    plan_id: str
    round: int
    model: str
    tools_offered: bool


@dataclass(frozen=True)
class Retrying:
    plan_id: str
    attempt: int  # the attempt that failed, 1-based
    wait_s: float
    reason: str


@dataclass(frozen=True)
class ReplyDelta:
    plan_id: str
    text: str


@dataclass(frozen=True)
class ToolCallRequested:
    plan_id: str
    index: int
    name: str


@dataclass(frozen=True)
class AssistantStored:
    plan_id: str
    message: Message  # partial=True for a reply cut off by a failure or a cancel


@dataclass(frozen=True)
class ToolStarted:
    plan_id: str
    call: ToolCall


@dataclass(frozen=True)
class ToolFinished:
    plan_id: str
    call: ToolCall
    ok: bool
    message: Message  # the stored tool result
    duration_ms: float


@dataclass(frozen=True)
class UsageCheck:
    """Estimated vs provider-reported prompt tokens for one call; ``mismatch`` drives the badge."""

    plan_id: str
    estimated: int
    reported: int | None
    model: str
    ratio: float | None  # (reported - estimated) / reported; None when the provider reported nothing
    mismatch: bool
    completion: int | None = None  # reply tokens the provider reported
    # what the call cost in US dollars, from the reported tokens and the model's price (``[[llm.prices]]``);
    # None when the model has no price there or the provider reported no usage: never a guess
    cost_usd: float | None = None
    # of the reported prompt, the tokens the provider said it read from its prompt cache and wrote to it (Anthropic
    # ``cache_read_input_tokens`` / ``cache_creation_input_tokens``); None when it did not say
    cache_read: int | None = None
    cache_write: int | None = None

    @property
    def cache_text(self) -> str:
        """``cache read 800 · cache write 200`` as reported ("" when the provider reported neither)."""
        parts = [f"cache {what} {value:,}" for what, value in (("read", self.cache_read), ("write", self.cache_write))
                 if value is not None]
        return " · ".join(parts)

    @property
    def badge(self) -> str:
        """Short text for the badge ("" when estimate and report agree within the threshold)."""
        if not self.mismatch or self.ratio is None:
            return ""
        return f"usage {self.reported:,} vs est. {self.estimated:,} ({self.ratio:+.1%})"


def turn_cost(checks: Iterable[UsageCheck]) -> float | None:
    """What a turn's calls cost in all (US dollars); None unless every call has a known cost."""
    costs = [c.cost_usd for c in checks]
    if not costs or any(c is None for c in costs):
        return None
    return float(sum(c for c in costs if c is not None))


def cost_text(cost: float) -> str:
    """``$0.0123``: four decimals below a dollar (a turn's cost is often a fraction of a cent), else two."""
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


@dataclass(frozen=True)
class UsageRecorded:
    usage: UsageCheck


@dataclass(frozen=True)
class StateUpdated:
    session_id: str
    state_block: str


@dataclass(frozen=True)
class PinSuggestionView:
    target: str
    reason: str
    source: str  # model | activation
    score: float = 0.0


@dataclass(frozen=True)
class Reflection:
    """What the reflection step changed after a turn."""

    session_id: str
    turn: int  # the turn's group id
    referenced_by_model: tuple[str, ...] = ()  # item ids (card:…, path:…, group:…)
    referenced_by_user: tuple[str, ...] = ()
    activation: tuple[tuple[str, float], ...] = ()  # item id -> score after this turn, highest first
    expired: tuple[str, ...] = ()  # pin ids whose lease ended
    promoted: tuple[str, ...] = ()  # pin ids promoted ephemeral -> leased
    suggestions: tuple[PinSuggestionView, ...] = ()  # open suggestions (model's and activation's)
    usage: tuple[UsageCheck, ...] = ()
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class ReflectionDone:
    reflection: Reflection


@dataclass(frozen=True)
class TurnFailed:
    reason: str  # one line
    # rate_limit | server | timeout | deadline | connection | auth | request | dropped | context_limit
    # | tool_limit | over_budget | internal
    kind: str
    partial_message: Message | None


@dataclass(frozen=True)
class TurnCancelled:
    partial_message: Message | None


@dataclass(frozen=True)
class TurnFinished:
    session_id: str
    group_id: int
    status: str  # ok | failed | cancelled
    reply: str  # the final assistant text (partial text when cut off)
    plan_ids: tuple[str, ...]  # every plan sent this turn, in order
    usage: UsageCheck | None  # the last call's
    state_block: str | None  # the state stored this turn, if any
    error: str = ""


TurnEvent = Union[
    TurnWaiting, TurnRecovered, TurnStarted, PlanReady, CallStarted, Retrying, ReplyDelta, ToolCallRequested, AssistantStored, ToolStarted,
    ToolFinished, UsageRecorded, StateUpdated, ReflectionDone, TurnFailed, TurnCancelled, TurnFinished,
]
