"""The workbench as a unit of work: one database, its repositories, and plans built from them.

A :class:`Workbench` opens its database on first use and exposes one repository per concern —
``sessions``, ``branches``, ``messages``, ``search``, ``pins``, ``memory``, ``activation``, ``plans``,
``traces``, ``vectors``, ``proxy``, ``summaries``, ``tasks``, ``capsules`` — each call on a connection the
database lends to the calling thread, each write its own transaction unless the caller holds one:
``with wb.transaction(): …`` makes several repository calls commit or roll back together. Every method is safe from any thread.

What is more than storage lives here: a session's settings (the config defaults under its overrides,
checked once by :mod:`ctxbench.service.settings`), importing a transcript as a new session, and the
plan of a turn (its inputs read from the store, code retrieval asked through :attr:`retriever`, the
earlier turns ranked by :attr:`embedder` for the semantic strategy).
"""
from __future__ import annotations

import dataclasses
import importlib
import sqlite3
import threading
from contextlib import AbstractContextManager
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

from ctxbench.config import BM25_B, BM25_K1, CACHED_SESSIONS, Config, default_db_path, load_config
from ctxbench.records.derived import deriving_for
from ctxbench.records.errors import UnknownGroup
from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.plans import ContextPlan, Pin, PlanInputs
from ctxbench.records.retrieval import EMPTY_RETRIEVAL_SET, RetrievalSet
from ctxbench.records.sessions import NewMessage, SessionSettings
from ctxbench.records.transcripts import Transcript, TranscriptError
from ctxbench.records.turns import recovered_note
from ctxbench.records.vocab import EMBEDDING_STRATEGIES
from ctxbench.service.derived_texts import DerivedTexts
from ctxbench.service.history_cache import HistoryCache
from ctxbench.service.query_clusters import SessionClusters
from ctxbench.service.redaction import mark_redactions, redact_calls, redact_inputs
from ctxbench.service.settings import SettingsRules
from ctxbench.store import sessions as session_store
from ctxbench.store.activation import Activation
from ctxbench.store.capsules import Capsules
from ctxbench.store.compaction import Summaries, Tasks, active_summaries, open_task
from ctxbench.store.database import Database
from ctxbench.store.locks import FileLock
from ctxbench.store.memory import Memory
from ctxbench.store.messages import Messages
from ctxbench.store.pins import Pins
from ctxbench.store.plans import Plans
from ctxbench.store.proxy import ProxyStore
from ctxbench.store.proxy_billing import Billing
from ctxbench.store.proxy_cache import CacheReports
from ctxbench.store.proxy_chains import ResponseChains
from ctxbench.store.proxy_policy import ProxyPolicy
from ctxbench.store.query_clusters import QueryClusters
from ctxbench.store.search import GroupSearch
from ctxbench.store.branches import Branches
from ctxbench.store.sessions import Sessions
from ctxbench.store.traces import Traces
from ctxbench.store.vectors import VectorCache
from ctxbench.tokens import Tokenizer, count_message, get_tokenizer

# format name -> "module:function" taking a path and returning a Transcript (imported lazily).
TRANSCRIPT_FORMATS: dict[str, str] = {
    "openai": "ctxbench.transcripts.openai:parse_file",
    "claude-code": "ctxbench.transcripts.claude_code:parse_file",
    "aider": "ctxbench.transcripts.aider:parse_file",
}


class CodeRetrieval(Protocol):
    """Code retrieval as a plan asks for it (``service.attach.AttachedRepository`` is the product's).

    ``budget`` is the plan's token budget (the scaffold is folded to its share of it); ``pins`` the
    session's live pins; ``activation`` its activation scores (``card:…``, ``path:…``, ``group:…``);
    ``mentioned`` the names and paths the query mentions (``retrieval.mentions``).
    """

    def retrieve(self, query: str, *, mode: str, budget: int | None, pins: Sequence[Pin],
                 activation: Mapping[str, float], mentioned: Sequence[str]) -> RetrievalSet: ...


class HistoryEmbedder(Protocol):
    """What the semantic history strategy needs of an embedder (``retrieval.embedder.Embedder``)."""

    key: str
    ready: bool
    error: Any

    def encode(self, texts: list[str], **kwargs: Any) -> Any: ...


class Workbench:
    """Sessions, messages, pins, memory layers and plans over one database."""

    def __init__(self, db_path: Path | None = None, config: Config | None = None, repo: Path | None = None) -> None:
        self.db_path: Path = Path(db_path) if db_path is not None else default_db_path()
        self.config: Config = config if config is not None else load_config()
        self.repo: Path | None = Path(repo).resolve() if repo is not None else None
        # code retrieval for plans (None: plans get the empty RetrievalSet); set by service.attach
        self.retriever: CodeRetrieval | None = None
        # the embedder ranking earlier turns for the semantic strategy (None: it falls back to recency)
        self.embedder: HistoryEmbedder | None = None
        self.rules = SettingsRules(self.config)
        self._database: Database | None = None
        self._open_lock = threading.Lock()
        self._tokenizer: Tokenizer | None = None
        self._inspect: sqlite3.Connection | None = None
        self._message_vectors: Any = None
        self._turn_vectors: Any = None
        # session -> texts its last plan found without a vector (none: its last plan embedded nothing)
        self._pending: dict[str, int] = {}
        self._keywords: dict[str, Any] = {}  # session id -> its HistoryKeywords, most recent last
        self.history_cache = HistoryCache(CACHED_SESSIONS)  # what each branch sees, masked, between plans
        # masking and token counts kept in the store across processes (a reopened session is not scanned again)
        self.derived_texts = DerivedTexts(self, lambda: self.tokenizer)
        pins = self.config.planner.pins
        self.sessions = Sessions(self)
        self.branches = Branches(self)
        self.messages = Messages(self, self._count)
        self.search = GroupSearch(self, self.config.planner.hybrid.keyword_candidates)
        self.pins = Pins(self, lambda scope: pins.task_lease_ttl if scope == "task" else pins.default_lease_ttl)
        self.memory = Memory(self, self.config.planner.memo_candidates)
        self.activation = Activation(self)
        self.plans = Plans(self)
        self.traces = Traces(self)
        self.vectors = VectorCache(self)
        self.proxy = ProxyStore(self)
        self.proxy_chains = ResponseChains(self)
        self.proxy_cache = CacheReports(self)
        self.proxy_billing = Billing(self)  # each request's billed usage, priced and used to calibrate counts
        self.proxy_policy = ProxyPolicy(self)  # steering for every proxied conversation; drops held for the cache
        self.summaries = Summaries(self)
        self.tasks = Tasks(self)
        self.capsules = Capsules(self)
        self.query_clusters = QueryClusters(self)
        self.clusters = SessionClusters(self)  # the QueryClusterId of each turn's query, and scoping to it

    # -- the unit of work ---------------------------------------------------------------------------
    @property
    def database(self) -> Database:
        """The database, opened (and its schema brought up to date) on first use."""
        with self._open_lock:
            if self._database is None:
                self._database = Database(self.db_path)
            return self._database

    def connection(self) -> AbstractContextManager[sqlite3.Connection]:
        """A connection for a block of reads (the repositories' calls inside the block share it)."""
        return self.database.connection()

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One transaction for a block of work: every repository write inside it commits or rolls back
        with it (a transaction already open on the thread is joined)."""
        return self.database.transaction()

    def check_store(self) -> None:
        """Before a command writes (import, fork, compact): a store with a damaged page is refused (StoreError)."""
        self.database.quick_check()

    def recover_turn(self, session_id: str) -> str | None:
        """Settle the session's last turn if its process ended mid-turn (``kill -9``, a closed terminal: the turn
        lock was left, not released): a message with no reply is flagged ``unanswered`` and left out of plans, a
        reply saved mid-stream kept as partial. Returns the line saying so, None when there was nothing to settle
        (or a turn is running right now: then it is that turn's)."""
        lock = self.turn_lock(session_id)
        if not lock.try_acquire():
            return None
        try:
            if not lock.left_by:
                return None
            settled = self.messages.settle_last_turn(session_id)
            return recovered_note(session_id, f"process {lock.left_by}", settled) if settled is not None else None
        finally:
            lock.release()

    def turn_lock(self, session_id: str) -> FileLock:
        """The lock one turn of ``session_id`` holds (across processes): turns of one session never interleave."""
        path = None if str(self.db_path) == ":memory:" else self.db_path
        return FileLock(path, f"turn-{session_id}", memory_key=f"workbench:{id(self)}")

    @property
    def conn(self) -> sqlite3.Connection:
        """A connection of its own for direct SQL (inspection, tools, tests); the product goes through
        the repositories. Closed with the workbench."""
        if self._inspect is None:
            self._inspect = self.database.dedicated_connection()
        return self._inspect

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            cfg = self.config.tokenizer
            self._tokenizer = get_tokenizer(cfg.name, cfg.cache_size)
        return self._tokenizer

    def close(self) -> None:
        with self._open_lock:
            database, self._database, self._inspect = self._database, None, None
        self._pending.clear()
        if database is not None:
            database.close()

    def __enter__(self) -> "Workbench":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _count(self, role: str, content: str, tool_calls: Sequence[ToolCall], tool_call_id: str | None) -> int:
        probe = Message(0, "", "", 0, role, content, tuple(tool_calls), tool_call_id)
        return count_message(self.tokenizer, probe.to_openai())

    # -- settings -----------------------------------------------------------------------------------
    def settings(self, session_id: str) -> SessionSettings:
        """The session's settings: its stored overrides over the config defaults."""
        return self.rules.merge(self.sessions.overrides(session_id))

    def update_settings(self, session_id: str, **changes: Any) -> SessionSettings:
        """Override settings for this session (each value checked); None returns to the config default."""
        checked = self.rules.check_changes(changes)
        with self.transaction():
            overrides = self.sessions.overrides(session_id)
            for key, value in checked.items():
                if value is None:
                    overrides.pop(key, None)
                else:
                    overrides[key] = value
            self.sessions.set_overrides(session_id, overrides)
        merged = self.rules.merge(overrides)
        if merged.strategy not in EMBEDDING_STRATEGIES:
            self._pending.pop(session_id, None)  # nothing left to warm for a strategy that embeds nothing
        return merged

    def delete_session(self, session_id: str) -> None:
        """Delete a session and everything of it (store rows, and what this workbench holds for it in memory)."""
        self.sessions.delete(session_id)
        self.forget_session(session_id)

    def forget_session(self, session_id: str) -> None:
        """Drop what this workbench holds in memory for ``session_id`` (deleted, or no longer planned here): what
        its last plan left to embed, its keyword index, what was derived from its texts and not stored yet."""
        self._pending.pop(session_id, None)
        with self._open_lock:
            self._keywords.pop(session_id, None)
        self.derived_texts.drop(session_id)

    def new_session(self, title: str = "", repo: Path | None = None) -> str:
        """A new session (of ``repo``, else of the workbench's repository when it has one)."""
        path = Path(repo).resolve() if repo is not None else self.repo
        return self.sessions.create(title, str(path) if path else None)

    def undo(self, session_id: str) -> tuple[int | None, str | None]:
        """Remove the last turn of the active branch and put back the ``### STATE`` stored before its first
        message (the one that turn saw: what its reply, or anything after it, wrote is no longer current; the
        versions stay in the state's history). Returns the removed group id (None: nothing to undo) and the
        state now current when it changed (None: unchanged). One transaction."""
        with self.transaction():
            group_id = self.messages.undoable(session_id)
            if group_id is None:
                return None, None
            started = min(m.created_at for m in self.messages.group(session_id, group_id))
            before = self.memory.state(session_id)
            self.messages.undo(session_id)
            after = self.memory.restore_state_before(session_id, started)
        return group_id, (after if after != before else None)

    # -- import -------------------------------------------------------------------------------------
    def parse_transcript(self, path: Path, format: str = "openai") -> Transcript:
        target = TRANSCRIPT_FORMATS.get(format)
        if target is None:
            raise TranscriptError(
                0, f"unknown transcript format {format!r}; supported: {', '.join(sorted(TRANSCRIPT_FORMATS))}"
            )
        module_name, attr = target.split(":")
        parse: Callable[[Path], Transcript] = getattr(importlib.import_module(module_name), attr)
        return parse(Path(path))

    def import_file(self, path: Path, format: str = "openai", *, title: str | None = None) -> str:
        """Import a transcript as a new session; all or nothing. Raises TranscriptError."""
        transcript = self.parse_transcript(path, format)
        return self.import_transcript(transcript, title=title if title is not None else Path(path).stem)

    def import_transcript(self, transcript: Transcript, *, title: str = "") -> str:
        """Store a parsed transcript as a new session in one transaction; returns its id. Secrets in the
        messages (a tool result holding a ``.env``, a key pasted in a prompt) are masked before they are stored."""
        from ctxbench.redaction import redact

        from ctxbench.records.stamps import fill_times

        new = []
        # a message without a time of its own: its leading date stamp's, else the message before it's (the import's
        # time only when the transcript carries none at all)
        times = fill_times(transcript.messages)
        for m, created_at in zip(transcript.messages, times):
            content, calls = redact(m.content)[0], redact_calls(m.tool_calls)
            new.append(NewMessage(group_id=m.group + 1, role=m.role, content=content, tool_calls=calls,
                                  tool_call_id=m.tool_call_id, tool_name=m.tool_name,
                                  parsing_strategy=m.parsing_strategy,
                                  tokens=self._count(m.role, content, calls, m.tool_call_id), flags=m.flags,
                                  external_id=m.external_id, created_at=created_at))
        with self.transaction():
            session_id = self.sessions.create(title or transcript.source, str(self.repo) if self.repo else None)
            self.messages.insert(session_id, new)
        return session_id

    # -- plans --------------------------------------------------------------------------------------
    def plan_inputs(
        self,
        session_id: str,
        query: str | None,
        settings: SessionSettings | None = None,
        *,
        retrieval: RetrievalSet | None = None,
        current_group: int | None = None,
        tools_tokens: int = 0,
        dropped_current: bool = False,
        before_message: int | None = None,
        **overrides: Any,
    ) -> PlanInputs:
        """Everything the planner needs for one call, read from the store.

        ``settings`` is the value to plan with (default: the session's stored settings); ``overrides``
        (``mode=``, ``budget=``, ``strategy=``, ``window_groups=``) replace fields of it; the result is
        checked once. Without ``current_group`` the current turn is a pending user message holding
        ``query`` (id 0, not stored, in the group the next user message will get). With it, the stored
        messages of that group are the current turn (a turn in progress: tool rounds) and ``query``
        defaults to its user message. ``tools_tokens``: the tokens of the tool definitions the call
        offers; the plan counts them against its budget. ``dropped_current``: the current group may be one the
        user dropped since. With ``before_message`` (a stored message id, as ``replay`` does) the plan is the one
        that message got when it was sent, whatever became of it later: the history before it (its own turn left
        out), the message (active, as it was sent) as the current turn and ``query``.
        """
        with deriving_for(session_id):  # what is masked and counted here is the session's (``records.derived``)
            inputs = self._plan_inputs(session_id, query, settings, retrieval, current_group, tools_tokens,
                                       dropped_current, before_message, overrides)
        self.derived_texts.save(session_id)  # its texts' masking, stored before a turn of them can be deleted
        return inputs

    def _plan_inputs(self, session_id: str, query: str | None, settings: SessionSettings | None,
                     retrieval: RetrievalSet | None, current_group: int | None, tools_tokens: int,
                     dropped_current: bool, before_message: int | None, overrides: Mapping[str, Any]) -> PlanInputs:
        base = settings if settings is not None else self.settings(session_id)
        wanted = self.rules.check(dataclasses.replace(
            base, **{k: v for k, v in overrides.items() if v is not None}))
        with self.connection() as conn:  # one snapshot of the session for the whole read
            inputs = self._read_inputs(conn, session_id, query, wanted, current_group, dropped_current,
                                       before_message)
        cluster = self.clusters.choose(inputs, replay=before_message is not None)
        if cluster is not None:
            inputs = cluster.apply(inputs)
        if retrieval is None:
            retrieval = self.retrieval_for(session_id, inputs.query, wanted, inputs.pins,
                                           clear_activation=cluster is not None and cluster.clear_activation)
        # the history comes masked from the history cache; the rest is masked here
        inputs = dataclasses.replace(redact_inputs(inputs, history=False), retrieval=retrieval, tools_tokens=tools_tokens)
        self._pending.pop(session_id, None)  # set again below by a plan that compares by meaning
        if wanted.strategy == "semantic":
            ranking = self._semantic_ranking(inputs)
            if ranking:
                inputs = dataclasses.replace(inputs, semantic_ranking=ranking)
        elif wanted.strategy == "fused":
            inputs = self._fused_inputs(inputs)
        return inputs

    # -- the fused and semantic strategies' inputs ---------------------------------------------------------------
    @property
    def message_vectors(self) -> Any:
        """The vectors of single messages (``retrieval.history_vectors.MessageVectors``), made on first use."""
        return self._history_vectors("_message_vectors", "MessageVectors")

    @property
    def turn_vectors(self) -> Any:
        """The vectors of whole turns (``retrieval.history_vectors.TurnVectors``), made on first use."""
        return self._history_vectors("_turn_vectors", "TurnVectors")

    def _history_vectors(self, attribute: str, kind: str) -> Any:
        with self._open_lock:
            if getattr(self, attribute) is None:
                from ctxbench.retrieval import history_vectors  # numpy and the vector code load on first use

                setattr(self, attribute, getattr(history_vectors, kind)())
            return getattr(self, attribute)

    def history_keywords(self, session_id: str) -> Any:
        """The session's keyword index of its messages (``retrieval.history_keywords.HistoryKeywords``), kept
        between plans for the last ``CACHED_SESSIONS`` sessions planned."""
        with self._open_lock:
            index = self._keywords.pop(session_id, None)
            if index is None:
                from ctxbench.retrieval.history_keywords import HistoryKeywords

                index = HistoryKeywords()
            self._keywords[session_id] = index
            while len(self._keywords) > CACHED_SESSIONS:
                self._keywords.pop(next(iter(self._keywords)))
            return index

    def keyword_scores(self, session_id: str, history: Sequence[Message], query: str) -> Sequence[tuple[int, float]]:
        """(message id, BM25 relevance) of the active messages of ``history`` for ``query``, best first: Porter-stemmed
        words, BM25 with the statistics of ``history`` alone, so other branches and sessions never change them."""
        return self.history_keywords(session_id).message_scores(
            history, query, self.config.planner.fused.keyword_candidates, k1=BM25_K1, b=BM25_B)

    def keyword_ranking(self, session_id: str, history: Sequence[Message], query: str) -> tuple[int, ...]:
        """Turns (group ids) of ``history`` ranked by BM25 relevance to ``query`` on exact words, with the statistics
        of ``history`` alone (the hybrid strategy's keyword list)."""
        return self.history_keywords(session_id).group_ranking(
            history, query, self.config.planner.hybrid.keyword_candidates, k1=BM25_K1, b=BM25_B)

    def _fused_inputs(self, inputs: PlanInputs) -> PlanInputs:
        """Each earlier message's BM25 relevance (over this history's own statistics) and, with a ready embedder,
        its cosine similarity to the query (a plan embeds at most ``fused.embed_per_plan`` messages itself)."""
        keyword = self.keyword_scores(inputs.session_id, inputs.history, inputs.query)
        similarity: tuple[tuple[int, float], ...] = ()
        embedder = self.history_embedder()
        if embedder is not None:
            from ctxbench.records.errors import EmbedderError

            try:
                similarity, stats = self.message_vectors.similarity(
                    inputs.history, inputs.query, embedder, self.vectors, self.config.planner.semantic,
                    embed_limit=self.config.planner.fused.embed_per_plan, skip_groups=inputs.dropped_groups,
                    speaker_share=self.config.planner.fused.speaker_share)
                self._pending[inputs.session_id] = stats.pending
            except EmbedderError:
                similarity = ()
        return dataclasses.replace(inputs, message_keyword=keyword, message_similarity=similarity)

    def history_pending(self, session_id: str) -> int:
        """Texts the session's last plan compared by meaning had no vector for (left for :meth:`warm_history`): a
        history that grew past what a plan embeds itself, or whose texts all changed (a transcript of speakers
        that no longer reads as one)."""
        return self._pending.get(session_id, 0)

    def warm_history(self, session_id: str, progress: Callable[[int, int], None] | None = None, *,
                     strategy: str | None = None) -> int:
        """Embed what the active branch's plans compare with the query and has no vector yet — its messages for
        ``fused``, its turns for ``semantic`` (``strategy``, default: the session's) — in chunks, each saved as it
        is made (a killed warm-up keeps them), ``progress(done, total)`` after each; returns how many were
        embedded. A plan embeds only ``fused.embed_per_plan`` itself. Nothing happens without a ready embedder."""
        embedder = self.history_embedder()
        strategy = strategy or self.settings(session_id).strategy
        if embedder is None or strategy not in EMBEDDING_STRATEGIES:
            return 0
        with self.connection() as conn, deriving_for(session_id):
            branch_id = session_store.active_branch(conn, session_id)
            visible, dropped = self.history_cache.branch_view(conn, session_id, branch_id)
        if strategy == "fused":
            vectors, share = self.message_vectors, self.config.planner.fused.speaker_share
        else:
            vectors, share = self.turn_vectors, 0.0
        stats = vectors.warm(visible, embedder, self.vectors, self.config.planner.semantic, progress,
                             skip_groups=dropped, speaker_share=share)
        return stats.embedded

    def turn_starts(self, session_id: str) -> Iterator[Message]:
        """The first user message of each turn the active branch sees, dropped turns included, masked, oldest first:
        read a part at a time, so a long session's first turns come before the rest is read (replay)."""
        seen: set[int] = set()
        after: int | None = 0
        while after is not None:
            with self.connection() as conn, deriving_for(session_id):  # not across the yields below
                branch_id = session_store.active_branch(conn, session_id)
                part, after = self.history_cache.view_part(conn, session_id, branch_id, after)
            for m in part:
                if m.role == "user" and m.group_id not in seen:
                    seen.add(m.group_id)
                    yield m

    def visible_messages(self, session_id: str) -> tuple[Message, ...]:
        """What the active branch sees, oldest first, dropped messages included, masked: the messages plans are made
        of (kept in memory between calls, ``history_cache``)."""
        with self.connection() as conn, deriving_for(session_id):
            branch_id = session_store.active_branch(conn, session_id)
            return self.history_cache.branch_messages(conn, session_id, branch_id)

    def _read_inputs(self, conn: sqlite3.Connection, session_id: str, query: str | None, s: SessionSettings,
                     current_group: int | None, dropped_current: bool = False,
                     before_message: int | None = None) -> PlanInputs:
        self.derived_texts.load(conn, session_id)
        branch_id = session_store.active_branch(conn, session_id)
        if before_message is not None:  # replay: the history the message had, read only as far as it
            seen = self.history_cache.turn_history(conn, session_id, branch_id, before_message)
            if seen is None:
                raise UnknownGroup(f"message {before_message} is not on the active branch of {session_id}")
            current: tuple[Message, ...] = (dataclasses.replace(seen.message, status="active"),)  # as it was sent
            history, dropped = seen.history, seen.dropped_groups
            query = seen.message.content if query is None else query
        else:
            visible, dropped = self.history_cache.branch_view(conn, session_id, branch_id)
            if current_group is None:
                if query is None:
                    raise ValueError("a plan needs the user's query or a current group")
                pending = Message(id=0, session_id=session_id, branch_id=branch_id,
                                  group_id=session_store.next_group_id(conn, session_id), role="user", content=query,
                                  parsing_strategy=s.provider_family, tokens=self._count("user", query, (), None))
                current = (pending,)
                history = visible
            else:
                current, history = _split_turn(visible, current_group, dropped_current)
                if not current:
                    raise UnknownGroup(
                        f"group {current_group} has no active messages on the active branch of {session_id}")
                if query is None:
                    query = next((m.content for m in current if m.role == "user"), "")
        current_gid = current[0].group_id
        current_group = current_gid if current[0].id else None
        summaries = tuple(x for x in active_summaries(conn, branch_id) if all(g < current_gid for g in x.group_ids))
        task = open_task(conn, branch_id)
        keyword_ranking: tuple[int, ...] = ()
        if s.strategy == "hybrid":
            keyword_ranking = self.keyword_ranking(session_id, history, query)
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
            system_prompt=self.config.planner.system_prompt,
            pins=self.pins.list(session_id),
            dropped_groups=tuple(g for g in dropped if g != current_group),
            state_block=self.memory.state(session_id),
            scratchpad=self.memory.scratchpad(session_id),
            memos=self.memory.search_memos(query),
            keyword_ranking=keyword_ranking,
            tokenizer=self.tokenizer.name,
            summaries=summaries,
            task_id=task.id if task is not None and task.started_group <= current_gid else 0,
            task_name=task.name if task is not None and task.started_group <= current_gid else "",
        )

    def retrieval_for(self, session_id: str, query: str, settings: SessionSettings, pins: Sequence[Pin], *,
                      clear_activation: bool = False) -> RetrievalSet:
        """The turn's RetrievalSet, steered by the session's live pins, its activation scores (none with
        ``clear_activation``: the query starts a cluster activation is scoped to) and what the query mentions. With no
        retriever attached, plans get the empty set."""
        if self.retriever is None:
            return EMPTY_RETRIEVAL_SET
        from ctxbench.retrieval.mentions import mentions

        live = tuple(p for p in pins if not (p.kind == "leased" and p.ttl <= 0))
        activation = {} if clear_activation else self.activation.scores(session_id)
        return self.retriever.retrieve(query, mode=settings.mode, budget=settings.budget, pins=live,
                                       activation=activation, mentioned=mentions(query))

    def history_embedder(self) -> HistoryEmbedder | None:
        """The embedder the semantic history strategy ranks with, when it is ready; None while it loads,
        after it failed to load, or when there is none."""
        embedder = self.embedder
        if embedder is not None and embedder.ready and embedder.error is None:
            return embedder
        return None

    def _semantic_ranking(self, inputs: PlanInputs) -> tuple[tuple[int, float], ...]:
        """Earlier turns most similar to the query (empty without a ready embedder)."""
        embedder = self.history_embedder()
        if embedder is None:
            return ()
        from ctxbench.records.errors import EmbedderError

        try:
            ranking, stats = self.turn_vectors.ranking(inputs.history, inputs.query, embedder, self.vectors,
                                                       self.config.planner.semantic,
                                                       embed_limit=self.config.planner.fused.embed_per_plan,
                                                       skip_groups=inputs.dropped_groups)
            self._pending[inputs.session_id] = stats.pending
        except EmbedderError:
            return ()
        return ranking

    def plan(
        self,
        session_id: str,
        query: str | None,
        settings: SessionSettings | None = None,
        *,
        retrieval: RetrievalSet | None = None,
        current_group: int | None = None,
        store: bool = True,
        tools_tokens: int = 0,
        before_message: int | None = None,
        **overrides: Any,
    ) -> ContextPlan:
        """Build (and by default store) the ContextPlan for a user turn (arguments: see plan_inputs)."""
        inputs = self.plan_inputs(session_id, query, settings, retrieval=retrieval, current_group=current_group,
                                  tools_tokens=tools_tokens, before_message=before_message, **overrides)
        return self.build_plan(inputs, store=store)

    def build_plan(self, inputs: PlanInputs, *, store: bool = False) -> ContextPlan:
        """The ContextPlan of ``inputs`` (from :meth:`plan_inputs`), each item saying how many secrets it holds
        masked; stored when asked."""
        from ctxbench.planner import build_plan  # imported on first use

        plan = mark_redactions(build_plan(inputs, self.config.planner, self.tokenizer))  # counts the session's texts
        if store:
            self.plans.save(inputs, plan)
            self.clusters.commit(inputs)  # a stored turn's query keeps the cluster it was planned with
        self.derived_texts.save(inputs.session_id)
        return plan


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
