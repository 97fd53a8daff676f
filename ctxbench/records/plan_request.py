"""What a caller asks the planning service for: one frozen :class:`PlanRequest`, the one door to a plan.

A request names the session, the query, the settings to plan with (a :class:`SessionSettings` value; None: the
session's stored ones), which turn the plan is for, the tokens of the tool definitions the call offers, a
RetrievalSet already made (None: asked of the code retrieval) and whether the plan is stored. The turn is one
of three: the next one (a pending user message holding the query, not stored), a stored one (a turn in progress:
its tool rounds), or a sent message (replay: the plan that message got when it was sent).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ctxbench.records.retrieval import RetrievalSet
from ctxbench.records.sessions import SessionSettings


@dataclass(frozen=True)
class NextTurn:
    """The next turn: a pending user message holding the query (id 0, not stored, in the group the next user
    message will get)."""


@dataclass(frozen=True)
class StoredTurn:
    """A stored turn (``group_id``): its active messages are the current turn (all of them with ``dropped``: the
    user may have dropped it since) and the query defaults to its user message."""

    group_id: int
    dropped: bool = False


@dataclass(frozen=True)
class SentMessage:
    """A stored user message (``message_id``), as it was sent: the history before it (its own turn left out), the
    message as the current turn, its content as the query unless one is given."""

    message_id: int


Turn = Union[NextTurn, StoredTurn, SentMessage]
NEXT_TURN = NextTurn()


@dataclass(frozen=True)
class PlanRequest:
    """One plan asked of the planning service (``service.planning.Planning``)."""

    session_id: str
    query: str | None = None  # None: the stored turn's (or sent message's) user message
    settings: SessionSettings | None = None  # None: the session's stored settings; checked once by the service
    turn: Turn = NEXT_TURN
    tools_tokens: int = 0  # the tool definitions the call offers count against the budget
    retrieval: RetrievalSet | None = None  # None: the code retrieval is asked (the empty set without one)
    store: bool = False  # plan(): store the plan (and the query's cluster)
