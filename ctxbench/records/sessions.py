"""Records of the store's sessions: a session and its branches, its settings, stored plans and usage,
state versions, and a message about to be stored."""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ctxbench.records.messages import ToolCall


@dataclass(frozen=True)
class SessionSettings:
    """How a session plans: its overrides over the config defaults. Front ends hold one as a value and
    pass it to ``plan()``; the service checks it once (``service.settings``) before it is stored or used."""

    mode: str
    budget: int
    strategy: str
    window_groups: int
    provider_family: str

    def with_choices(self, *, mode: str | None = None, budget: int | None = None, strategy: str | None = None,
                     window_groups: int | None = None) -> "SessionSettings":
        """These settings with each choice that is given (not None) in place of its own: a flag or a tool argument
        over the session's settings."""
        given = {"mode": mode, "budget": budget, "strategy": strategy, "window_groups": window_groups}
        return replace(self, **{name: value for name, value in given.items() if value is not None})


SETTING_NAMES: tuple[str, ...] = tuple(f.name for f in fields(SessionSettings))


@dataclass(frozen=True)
class SessionInfo:
    id: str
    title: str
    repo: str | None
    created_at: str
    message_count: int
    group_count: int
    last_activity: str  # newest message's created_at, or the session's own


@dataclass(frozen=True)
class BranchInfo:
    id: str
    session_id: str
    name: str
    parent_id: str | None
    fork_message_id: int | None  # last parent message this branch sees
    head_message_id: int | None  # newest message on this branch
    created_at: str


@dataclass(frozen=True)
class BranchSummary:
    """A branch as ``/branch`` and ``ctxbench branch list`` show it."""

    id: str
    name: str
    parent: str  # the parent branch's name ("" for the first branch)
    fork_turn: int | None  # the last turn (group id) of the parent the branch sees; None for the first branch
    head_turn: int | None  # the newest turn the branch sees
    turns: int  # turns the branch sees (its parent's up to the fork, then its own)
    own_turns: int  # turns written on this branch
    active: bool
    created_at: str


@dataclass(frozen=True)
class PlanOrigin:
    """Where a stored plan was made: its session, branch (and where that branch forked), and turn."""

    plan_id: str
    session_id: str
    branch_id: str | None  # None for plans stored before branches were recorded (schema v4 and earlier)
    branch_name: str
    parent_name: str
    fork_message_id: int | None
    group_id: int | None  # the turn planned; None for a draft


@dataclass(frozen=True)
class PlanSummary:
    plan_id: str
    session_id: str
    created_at: str
    query: str
    mode: str
    strategy: str
    budget: int
    used_tokens: int
    over_budget: bool


@dataclass(frozen=True)
class UsageReport:
    plan_id: str
    estimated: int
    reported: int | None  # prompt tokens the provider reported; None when it did not say
    model: str
    created_at: str
    completion: int | None = None  # reply tokens the provider reported
    cache_read: int | None = None  # of the prompt, read from the provider's cache (as it reported; None: not said)
    cache_write: int | None = None  # of the prompt, written to the provider's cache (as it reported)


@dataclass(frozen=True)
class StateVersion:
    id: int
    content: str
    created_at: str


@dataclass(frozen=True)
class NewMessage:
    """A message about to be stored (the store assigns id and created_at)."""

    group_id: int
    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    parsing_strategy: str = "openai"
    tokens: int = 0
    flags: tuple[str, ...] = ()
    partial: bool = False
    external_id: str = ""  # its id in the transcript it was imported from
    created_at: str = ""  # an imported message's own time; empty: the store stamps it now
