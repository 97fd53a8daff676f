"""What the LLM layer needs of the workbench (``service.workbench.Workbench`` is the one the product uses).

The turn runner, the tools and the reflection step work on a unit of work: its repositories, one
transaction around several writes, and plans. They take it as this protocol, so nothing here imports
the service layer above.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Iterator, Protocol

from ctxbench.config import Config
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

    @property
    def tokenizer(self) -> Tokenizer: ...

    def transaction(self) -> AbstractContextManager[Any]: ...

    def turn_lock(self, session_id: str) -> Any: ...  # a store.locks.FileLock: one turn of a session at a time

    def settings(self, session_id: str) -> SessionSettings: ...

    def plan(self, session_id: str, query: str | None, settings: SessionSettings | None = None, *,
             retrieval: Any = None, current_group: int | None = None, store: bool = True, tools_tokens: int = 0,
             **overrides: Any) -> ContextPlan: ...

    def plan_inputs(self, session_id: str, query: str | None, settings: SessionSettings | None = None, *,
                    retrieval: Any = None, current_group: int | None = None, tools_tokens: int = 0,
                    dropped_current: bool = False, before_message: int | None = None, **overrides: Any
                    ) -> PlanInputs: ...

    def build_plan(self, inputs: PlanInputs, *, store: bool = False) -> ContextPlan: ...

    def turn_starts(self, session_id: str) -> Iterator[Any]: ...  # each turn's first user message, read a part at a time
