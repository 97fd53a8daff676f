"""The workbench as a unit of work: one database, its repositories, and plans built from them.

A :class:`Workbench` opens its database on first use and exposes one repository per concern —
``sessions``, ``branches``, ``messages``, ``search``, ``pins``, ``memory``, ``activation``, ``plans``,
``traces``, ``vectors``, ``proxy``, ``summaries``, ``tasks``, ``capsules`` — each call on a connection the
database lends to the calling thread, each write its own transaction unless the caller holds one:
``with wb.transaction(): …`` makes several repository calls commit or roll back together. Every method is safe from any thread.

What is more than storage lives here: a session's settings (the config defaults under its overrides,
checked once by :mod:`ctxbench.service.settings`) and importing a transcript as a new session. Plans go through
one door, :attr:`planning` (``service.planning``: a PlanRequest in, a ContextPlan out), which asks the code
retrieval plugged into :attr:`retriever` and ranks the history with :attr:`history` (``service.history_ranker``,
using :attr:`embedder`).
"""
from __future__ import annotations

import importlib
import sqlite3
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ctxbench.config import CACHED_SESSIONS, Config, default_db_path, load_config
from ctxbench.records.derived import deriving_for
from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.sessions import NewMessage, SessionSettings
from ctxbench.records.transcripts import Transcript, TranscriptError
from ctxbench.records.turns import recovered_note
from ctxbench.records.vocab import EMBEDDING_STRATEGIES
from ctxbench.service.derived_texts import DerivedTexts
from ctxbench.service.history_cache import HistoryCache
from ctxbench.service.history_snapshot import HistorySnapshots
from ctxbench.service.history_ranker import HistoryEmbedder, HistoryRanker
from ctxbench.service.planning import CodeRetrieval, Planning
from ctxbench.service.query_clusters import SessionClusters
from ctxbench.service.redaction import redact_calls
from ctxbench.service.settings import SettingsRules
from ctxbench.store import sessions as session_store
from ctxbench.store.activation import Activation
from ctxbench.store.branches import Branches
from ctxbench.store.capsules import Capsules
from ctxbench.store.compaction import Summaries, Tasks
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
        self.snapshots = HistorySnapshots(self)  # long sessions kept as planned on close, for the next workbench
        # masking and token counts kept in the store across processes (a reopened session is not scanned again)
        self.derived_texts = DerivedTexts(self, lambda: self.tokenizer)
        # each branch's view, masked (the kept maskings loaded first)
        self.history_cache = HistoryCache(CACHED_SESSIONS, self.snapshots.restore, self.derived_texts.load)
        pins = self.config.planner.pins
        self.sessions = Sessions(self)
        self.branches = Branches(self)
        self.messages = Messages(self, self.count_tokens)
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
        self.history = HistoryRanker(self)  # the history's keyword index and vectors, kept between plans; warm-up
        self.planning = Planning(self, self.history)  # the one door to a plan: a PlanRequest in, a ContextPlan out

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
        """A connection of its own for direct SQL (inspection, tools, tests; the product uses the repositories)."""
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
        if self._database is not None:  # long sessions read are kept for the next workbench
            self.snapshots.save()
        with self._open_lock:
            database, self._database, self._inspect = self._database, None, None
        self.history.clear()
        if database is not None:
            database.close()

    def __enter__(self) -> "Workbench":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def count_tokens(self, role: str, content: str, tool_calls: Sequence[ToolCall], tool_call_id: str | None) -> int:
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
            self.history.settled(session_id)  # nothing left to warm for a strategy that embeds nothing
        return merged

    def delete_session(self, session_id: str) -> None:
        """Delete a session and everything of it (store rows, and what this workbench holds for it in memory)."""
        self.sessions.delete(session_id)
        self.forget_session(session_id)

    def forget_session(self, session_id: str) -> None:
        """Drop what this workbench holds in memory for ``session_id`` (deleted, or no longer planned here): what
        its last plan left to embed, its keyword index, what was derived from its texts and not stored yet."""
        self.history.forget(session_id)
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
                                  tokens=self.count_tokens(m.role, content, calls, m.tool_call_id), flags=m.flags,
                                  external_id=m.external_id, created_at=created_at))
        with self.transaction():
            session_id = self.sessions.create(title or transcript.source, str(self.repo) if self.repo else None)
            self.messages.insert(session_id, new)
        return session_id

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
            return self.history_cache.branch_messages(conn, session_id, session_store.active_branch(conn, session_id))
