"""The one door to a plan: a :class:`~ctxbench.records.plan_request.PlanRequest` in, a ContextPlan out.

:class:`Planning` reads a request's inputs from the store in one snapshot (the session's branch view from the
history cache, the turn the request names, pins, state, scratchpad, memos, summaries, the open task), chooses the
query's cluster, asks the code retrieval for the RetrievalSet (``CodeRetrieval``, plugged into the workbench by
``service.attach``), masks what is not masked yet, lets the :class:`~ctxbench.service.history_ranker.HistoryRanker`
fill in what the strategy compares, and hands the inputs to the pure planner; a stored plan is saved with the
query's cluster. The settings are one checked value, never unpacked.
"""
from __future__ import annotations

import dataclasses
import sqlite3
from contextlib import AbstractContextManager
from operator import attrgetter
from typing import Mapping, Protocol, Sequence

from ctxbench.config import Config
from ctxbench.records.derived import deriving_for
from ctxbench.records.errors import UnknownGroup
from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.plan_request import PlanRequest, SentMessage, StoredTurn
from ctxbench.records.plans import ContextPlan, Pin, PlanInputs, PreviousHistory
from ctxbench.records.retrieval import EMPTY_RETRIEVAL_SET, RetrievalSet
from ctxbench.records.sessions import SessionSettings
from ctxbench.service.derived_texts import DerivedTexts
from ctxbench.service.history_cache import HistoryCache
from ctxbench.service.history_ranker import HistoryRanker
from ctxbench.service.query_clusters import SessionClusters
from ctxbench.service.redaction import mark_redactions, redact_inputs
from ctxbench.service.settings import SettingsRules
from ctxbench.store import sessions as session_store
from ctxbench.store.activation import Activation
from ctxbench.store.compaction import active_summaries, open_task
from ctxbench.store.memory import Memory
from ctxbench.store.pins import Pins
from ctxbench.store import plans as plan_store
from ctxbench.store.plans import Plans
from ctxbench.tokens import Tokenizer


class CodeRetrieval(Protocol):
    """Code retrieval as a plan asks for it (``service.attach.AttachedRepository`` is the product's).

    ``budget`` is the plan's token budget (the scaffold is folded to its share of it); ``pins`` the
    session's live pins; ``activation`` its activation scores (``card:…``, ``path:…``, ``group:…``);
    ``mentioned`` the names and paths the query mentions (``retrieval.mentions``).
    """

    def retrieve(self, query: str, *, mode: str, budget: int | None, pins: Sequence[Pin],
                 activation: Mapping[str, float], mentioned: Sequence[str]) -> RetrievalSet: ...


class PlanningStore(Protocol):
    """What planning reads of the workbench (``service.workbench.Workbench``)."""

    config: Config
    rules: SettingsRules
    retriever: CodeRetrieval | None
    pins: Pins
    memory: Memory
    activation: Activation
    plans: Plans
    clusters: SessionClusters
    derived_texts: DerivedTexts
    history_cache: HistoryCache

    @property
    def tokenizer(self) -> Tokenizer: ...

    def connection(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def settings(self, session_id: str) -> SessionSettings: ...

    def count_tokens(self, role: str, content: str, tool_calls: Sequence[ToolCall], tool_call_id: str | None) -> int: ...


class Planning:
    """Plans of one workbench's sessions: ``inputs(request)``, ``plan(request)``, ``build(inputs, store=…)``."""

    def __init__(self, store: PlanningStore, ranker: HistoryRanker) -> None:
        self.store = store
        self.ranker = ranker

    def plan(self, request: PlanRequest) -> ContextPlan:
        """The ContextPlan of ``request``, stored when it asks."""
        return self.build(self.inputs(request), store=request.store)

    def inputs(self, request: PlanRequest) -> PlanInputs:
        """Everything the planner needs for ``request``, read from the store (the settings checked once)."""
        sid = request.session_id
        with deriving_for(sid):  # what is masked and counted here is the session's (``records.derived``)
            inputs = self._inputs(request)
        self.store.derived_texts.save(sid)  # its texts' masking, stored before a turn of them can be deleted
        return inputs

    def build(self, inputs: PlanInputs, *, store: bool = False) -> ContextPlan:
        """The ContextPlan of ``inputs`` (from :meth:`inputs`), each item saying how many secrets it holds masked;
        stored when asked."""
        from ctxbench.planner import build_plan  # imported on first use

        wb = self.store
        plan = mark_redactions(build_plan(inputs, wb.config.planner, wb.tokenizer))  # counts the session's texts
        if store:
            wb.plans.save(inputs, plan)
            wb.clusters.commit(inputs)  # a stored turn's query keeps the cluster it was planned with
        wb.derived_texts.save(inputs.session_id)
        return plan

    def recall(self, request: PlanRequest) -> int:
        """Have the store remember which chunks of history keys and atom rows the plan of ``request`` shares with the
        session's stored plans (``Plans.recall``): the first plan of a reopened session, recalled once it is shown,
        so the next turn's plan is stored as fast as any later one. Returns how many chunks it holds."""
        inputs = self.inputs(request)  # the plan just shown: its inputs and plan come from the planner's caches
        return self.store.plans.recall(inputs, self.build(inputs))

    def retrieval(self, request: PlanRequest, inputs: PlanInputs, *, clear_activation: bool = False) -> RetrievalSet:
        """The RetrievalSet of ``inputs`` (its query and pins) under ``request``'s settings, steered by the session's
        live pins, its activation scores (none with ``clear_activation``: the query starts a cluster activation is
        scoped to) and what the query mentions. With no retriever attached, plans get the empty set."""
        if self.store.retriever is None:
            return EMPTY_RETRIEVAL_SET
        return self._retrieval(request.session_id, inputs, self.settings(request), clear_activation)

    def _retrieval(self, session_id: str, inputs: PlanInputs, settings: SessionSettings,
                   clear_activation: bool) -> RetrievalSet:
        wb = self.store
        if wb.retriever is None:
            return EMPTY_RETRIEVAL_SET
        from ctxbench.retrieval.mentions import mentions

        live = tuple(p for p in inputs.pins if not (p.kind == "leased" and p.ttl <= 0))
        activation = {} if clear_activation else wb.activation.scores(session_id)
        return wb.retriever.retrieve(inputs.query, mode=settings.mode, budget=settings.budget, pins=live,
                                     activation=activation, mentioned=mentions(inputs.query))

    def settings(self, request: PlanRequest) -> SessionSettings:
        """The request's settings (the session's stored ones when it names none), checked."""
        settings = request.settings if request.settings is not None else self.store.settings(request.session_id)
        return self.store.rules.check(settings)

    def _inputs(self, request: PlanRequest) -> PlanInputs:
        settings = self.settings(request)
        with self.store.connection() as conn:  # one snapshot of the session for the whole read
            inputs = self._read(conn, request, settings)
        cluster = self.store.clusters.choose(inputs, replay=isinstance(request.turn, SentMessage))
        if cluster is not None:
            inputs = cluster.apply(inputs)
        retrieval = request.retrieval
        if retrieval is None:
            retrieval = self._retrieval(request.session_id, inputs, settings,
                                        cluster is not None and cluster.clear_activation)
        # the history comes masked from the history cache; the rest is masked here
        inputs = dataclasses.replace(redact_inputs(inputs, history=False), retrieval=retrieval,
                                     tools_tokens=request.tools_tokens)
        return self.ranker.ranked(inputs)

    def _read(self, conn: sqlite3.Connection, request: PlanRequest, s: SessionSettings) -> PlanInputs:
        wb, session_id, query, turn = self.store, request.session_id, request.query, request.turn
        wb.derived_texts.load(conn, session_id)
        branch_id = session_store.active_branch(conn, session_id)
        if isinstance(turn, SentMessage):  # replay: the history the message had, read only as far as it
            seen = wb.history_cache.turn_history(conn, session_id, branch_id, turn.message_id)
            if seen is None:
                raise UnknownGroup(f"message {turn.message_id} is not on the active branch of {session_id}")
            current: tuple[Message, ...] = (dataclasses.replace(seen.message, status="active"),)  # as it was sent
            history, dropped = seen.history, seen.dropped_groups
            query = seen.message.content if query is None else query
        else:
            visible, dropped = wb.history_cache.branch_view(conn, session_id, branch_id)
            if not isinstance(turn, StoredTurn):
                if query is None:
                    raise ValueError("a plan needs the user's query or a current group")
                pending = Message(id=0, session_id=session_id, branch_id=branch_id,
                                  group_id=session_store.next_group_id(conn, session_id), role="user", content=query,
                                  parsing_strategy=s.provider_family, tokens=wb.count_tokens("user", query, (), None))
                current = (pending,)
                history = visible
            else:
                current, history = _split_turn(visible, turn.group_id, turn.dropped)
                if not current:
                    raise UnknownGroup(
                        f"group {turn.group_id} has no active messages on the active branch of {session_id}")
                if query is None:
                    query = next((m.content for m in current if m.role == "user"), "")
        current_gid = current[0].group_id
        current_group = current_gid if current[0].id else None
        summaries = tuple(x for x in active_summaries(conn, branch_id) if all(g < current_gid for g in x.group_ids))
        task = open_task(conn, branch_id)
        keyword_ranking: tuple[int, ...] = ()
        if s.strategy == "hybrid":
            keyword_ranking = self.ranker.keyword_ranking(session_id, history, query)
        in_task = task is not None and task.started_group <= current_gid
        from ctxbench.planner.cache import keeps_previous  # the planner is imported on first use

        previous = None
        if keeps_previous(wb.config.planner, s.strategy):
            previous = _previous_plan(conn, branch_id, history, current_gid)
        return PlanInputs(
            session_id=session_id,
            query=query,
            history=history,
            current_turn=current,
            budget=s.budget,
            mode=s.mode,
            strategy=s.strategy,
            window_groups=s.window_groups,
            provider_family=s.provider_family,
            system_prompt=wb.config.planner.system_prompt,
            pins=wb.pins.list(session_id),
            dropped_groups=tuple(g for g in dropped if g != current_group),
            state_block=wb.memory.state(session_id),
            scratchpad=wb.memory.scratchpad(session_id),
            memos=wb.memory.search_memos(query),
            keyword_ranking=keyword_ranking,
            tokenizer=wb.tokenizer.name,
            summaries=summaries,
            task_id=task.id if task is not None and in_task else 0,
            task_name=task.name if task is not None and in_task else "",
            previous=previous,
        )


def _previous_plan(conn: sqlite3.Connection, branch_id: str, history: Sequence[Message],
                   group_id: int) -> PreviousHistory | None:
    """What the last stored plan of the latest turn before ``group_id`` that this branch sees sent from the history,
    and its settings (the cache-keeping selection's ``PlanInputs.previous``); None when there is none."""
    from ctxbench.planner.cache import previous_history

    branch_ids = [bid for bid, _limit in session_store.lineage(conn, branch_id)]
    found = plan_store.turn_plan_before(conn, branch_ids, {m.group_id for m in history}, group_id)
    if found is None:
        return None
    return previous_history(*plan_store.get_plan_with_inputs(conn, found))


_GROUP_ID = attrgetter("group_id")


def _split_turn(visible: tuple[Message, ...], group_id: int, dropped: bool = False
                ) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
    """(the active messages of turn ``group_id`` — all of them with ``dropped`` — and every other message) of a
    branch's view; a slice when the turn is the latest one (the usual case)."""
    start = len(visible)
    while start > 0 and visible[start - 1].group_id == group_id:
        start -= 1
    rest = visible[:start]
    if start == len(visible) or group_id in map(_GROUP_ID, rest):
        return (tuple(m for m in visible if m.group_id == group_id and (dropped or m.status == "active")),
                tuple(m for m in visible if m.group_id != group_id))
    return tuple(m for m in visible[start:] if dropped or m.status == "active"), rest
