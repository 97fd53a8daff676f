"""What the LLM layer needs of the workbench (``service.workbench.Workbench`` is the one the product uses).

The turn runner, the tools and the reflection step work on a unit of work: its repositories, one
transaction around several writes, and a :class:`Planner` (``service.planning.Planning``: a PlanRequest in, a
ContextPlan out). They take both as these protocols, so nothing here imports the service layer above.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Iterator, Protocol

from ctxbench.config import Config
from ctxbench.records.plan_request import PlanRequest
from ctxbench.records.plans import ContextPlan, PlanInputs
from ctxbench.records.sessions import SessionSettings
from ctxbench.store.activation import Activation
from ctxbench.store.compaction import Summaries, Tasks
from ctxbench.store.memory import Memory
from ctxbench.store.messages import Messages
from ctxbench.store.pins import Pins
from ctxbench.store.plans import Plans
from ctxbench.store.traces import Traces
from ctxbench.tokens import Tokenizer


class Planner(Protocol):
    """The one door to a plan."""

    def inputs(self, request: PlanRequest) -> PlanInputs: ...  # what the planner gets for the request, read

    def plan(self, request: PlanRequest) -> ContextPlan: ...  # the plan of the request, stored when it asks

    def build(self, inputs: PlanInputs, *, store: bool = False) -> ContextPlan: ...  # the plan of inputs read


class UnitOfWork(Protocol):
    config: Config
    db_path: Path
    messages: Messages
    memory: Memory
    pins: Pins
    activation: Activation
    plans: Plans
    traces: Traces
    summaries: Summaries
    tasks: Tasks
    planning: Planner

    @property
    def tokenizer(self) -> Tokenizer: ...

    def transaction(self) -> AbstractContextManager[Any]: ...

    def turn_lock(self, session_id: str) -> Any: ...  # a store.locks.FileLock: one turn of a session at a time

    def settings(self, session_id: str) -> SessionSettings: ...

    def turn_starts(self, session_id: str) -> Iterator[Any]: ...  # each turn's first user message, read a part at a time
