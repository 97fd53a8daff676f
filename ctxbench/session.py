"""The session facade: the one object the TUI, the LLM loop and the CLI talk to.

A :class:`Workbench` owns one SQLite connection (opened lazily, schema migrated) and a
tokenizer. Every method is safe to call from a worker thread: database access is
serialised by a lock, and every write is one transaction, committed before the method
returns. Records going in and out are frozen dataclasses.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, ParamSpec, Protocol, Sequence, TypeVar

from ctxbench.config import Config, ConfigError, default_db_path, load_config
from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.vocab import ROLES
from ctxbench.records.plans import ContextPlan, Memo, Pin, PlanInputs
from ctxbench.records.vocab import STRATEGIES
from ctxbench.records.retrieval import EMPTY_RETRIEVAL_SET, RetrievalSet
from ctxbench.store import activation as activation_store
from ctxbench.store import db
from ctxbench.store import memory as memory_store
from ctxbench.store import messages as message_store
from ctxbench.store import pins as pin_store
from ctxbench.store import plans as plan_store
from ctxbench.store import search as search_store
from ctxbench.store import sessions as session_store
from ctxbench.records.errors import NotFound, SettingsError, UnknownGroup, UnknownPlan, UnknownSession
from ctxbench.records.sessions import SETTING_NAMES, NewMessage, SessionSettings
from ctxbench.records.sessions import PlanSummary, UsageReport
from ctxbench.store.schema import open_core
from ctxbench.records.sessions import BranchInfo, SessionInfo
from ctxbench.tokens import Tokenizer, count_message, get_tokenizer
from ctxbench.records.transcripts import Transcript, TranscriptError

__all__ = [
    "BranchInfo",
    "NotFound",
    "PlanSummary",
    "Retriever",
    "SessionInfo",
    "SessionSettings",
    "SettingsError",
    "TRANSCRIPT_FORMATS",
    "TranscriptError",
    "UnknownPlan",
    "UnknownSession",
    "UsageReport",
    "Workbench",
]

# format name -> "module:function" taking a path and returning a Transcript (imported lazily).
TRANSCRIPT_FORMATS: dict[str, str] = {
    "openai": "ctxbench.transcripts.openai:parse_file",
    "claude-code": "ctxbench.transcripts.claude_code:parse_file",
    "aider": "ctxbench.transcripts.aider:parse_file",
}


STORED_MESSAGE_CACHE = 50_000  # entries in the Workbench's stored-plan-message cache before it is reset


MAX_RETRIEVER_WRAPPERS = 4  # wrappers (caching, mode) looked through for the code retriever's embedder


class _LockedVectorCache:
    """The vector cache on the Workbench's connection, each access under its lock."""

    def __init__(self, workbench: "Workbench") -> None:
        self.workbench = workbench

    def load(self, hashes: Any, key: str) -> Any:
        from ctxbench.retrieval.vectors import load_vectors

        with self.workbench._lock:
            return load_vectors(self.workbench.conn, hashes, key)

    def save(self, rows: Any, key: str) -> None:
        from ctxbench.retrieval.vectors import save_vectors

        with self.workbench._lock:
            save_vectors(self.workbench.conn, rows, key)




class Retriever(Protocol):
    """What code retrieval provides to the facade.

    ``budget`` is the plan's token budget (the scaffold is folded to its share of it); ``pins`` the
    session's live pins; ``activation`` its activation scores (``card:…``, ``path:…``, ``group:…``);
    ``mentioned`` the names and paths the query mentions (``retrieval.mentions``). A retriever whose
    ``retrieve`` takes only ``query`` and ``mode`` still works: it is given what it accepts.
    """

    def retrieve(self, query: str, *, mode: str, budget: int | None = None, pins: Sequence[Pin] = (),
                 activation: dict[str, float] | None = None, mentioned: Sequence[str] = ()) -> RetrievalSet: ...


def _accepted(method: Callable[..., Any], context: dict[str, Any]) -> dict[str, Any]:
    """The part of ``context`` that ``method`` takes as keyword arguments (all of it with ``**kwargs``)."""
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return context
    names = {p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                   inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    return {k: v for k, v in context.items() if k in names}


def _dropped_groups(messages: Sequence[Message]) -> tuple[int, ...]:
    """Groups (in order of their first message) none of whose ``messages`` is active."""
    has_active: dict[int, bool] = {}
    for m in messages:
        has_active[m.group_id] = has_active.get(m.group_id, False) or m.status == "active"
    return tuple(g for g, active in has_active.items() if not active)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _locked(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run the method holding the Workbench's lock (one connection, many threads)."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with args[0]._lock:  # type: ignore[attr-defined]
            return method(*args, **kwargs)

    return wrapper


class Workbench:
    """Sessions, messages, pins, memory layers and plans over one database."""

    def __init__(self, db_path: Path | None = None, config: Config | None = None, repo: Path | None = None) -> None:
        self.db_path: Path = Path(db_path) if db_path is not None else default_db_path()
        self.config: Config = config if config is not None else load_config()
        self.repo: Path | None = Path(repo).resolve() if repo is not None else None
        # SEAM (code retrieval): set to an object with ``retrieve(query, *, mode, budget, pins,
        # activation, mentioned) -> RetrievalSet`` (see ``Retriever``); plan_inputs() then asks it
        # for the turn's RetrievalSet unless the caller passes one. None: the empty set.
        self.retriever: Retriever | None = None
        # SEAM (semantic history strategy): an embedder (``retrieval.embedder.SupportsEmbedding``)
        # for ranking earlier turns by meaning. None: the code retriever's embedder once it is
        # ready (see history_embedder()); without either, the strategy falls back to recency.
        self.embedder: Any = None
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._tokenizer: Tokenizer | None = None
        # messages already in plan_messages (this database), so the next plan of a long session
        # does not serialise its whole history again
        self._stored_messages: dict[Message, str] = {}

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        with self._lock:
            if self._conn is None:
                self._conn = open_core(self.db_path)
            return self._conn

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            cfg = self.config.tokenizer
            self._tokenizer = get_tokenizer(cfg.name, cfg.cache_size)
        return self._tokenizer

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "Workbench":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _count(self, role: str, content: str, tool_calls: Sequence[ToolCall], tool_call_id: str | None) -> int:
        probe = Message(0, "", "", 0, role, content, tuple(tool_calls), tool_call_id)
        return count_message(self.tokenizer, probe.to_openai())

    def _branch(self, session_id: str) -> str:
        return session_store.active_branch(self.conn, session_id)

    # -- sessions ---------------------------------------------------------------------------

    @_locked
    def create_session(self, title: str = "", repo: Path | None = None) -> str:
        repo_path = Path(repo).resolve() if repo is not None else self.repo
        with db.transaction(self.conn):
            return session_store.create_session(self.conn, title, str(repo_path) if repo_path else None)

    @_locked
    def list_sessions(self, repo: Path | None = None) -> list[SessionInfo]:
        """Sessions, most recently active first (only those of ``repo`` when given)."""
        return session_store.list_sessions(self.conn, str(Path(repo).resolve()) if repo is not None else None)

    @_locked
    def session_info(self, session_id: str) -> SessionInfo:
        return session_store.session_info(self.conn, session_id)

    @_locked
    def latest_session(self, repo: Path | None = None) -> str | None:
        """The most recently active session (of ``repo`` when given), or None."""
        found = self.list_sessions(repo)
        return found[0].id if found else None

    @_locked
    def rename_session(self, session_id: str, title: str) -> None:
        with db.transaction(self.conn):
            session_store.set_title(self.conn, session_id, title)

    @_locked
    def delete_session(self, session_id: str) -> None:
        with db.transaction(self.conn):
            session_store.delete_session(self.conn, session_id)

    # -- import -----------------------------------------------------------------------------

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

    @_locked
    def import_transcript(self, transcript: Transcript, *, title: str = "") -> str:
        """Store a parsed transcript as a new session in one transaction; returns its id."""
        new = [
            NewMessage(
                group_id=m.group + 1,
                role=m.role,
                content=m.content,
                tool_calls=m.tool_calls,
                tool_call_id=m.tool_call_id,
                tool_name=m.tool_name,
                parsing_strategy=m.parsing_strategy,
                tokens=self._count(m.role, m.content, m.tool_calls, m.tool_call_id),
                flags=m.flags,
            )
            for m in transcript.messages
        ]
        repo = str(self.repo) if self.repo else None
        with db.transaction(self.conn):
            session_id = session_store.create_session(self.conn, title or transcript.source, repo)
            branch_id = session_store.active_branch(self.conn, session_id)
            message_store.insert_messages(self.conn, session_id, branch_id, new)
        return session_id

    # -- messages ---------------------------------------------------------------------------

    @_locked
    def history(self, session_id: str) -> tuple[Message, ...]:
        """The active branch's active messages, oldest first."""
        return message_store.branch_messages(self.conn, session_id, self._branch(session_id))

    @_locked
    def all_messages(self, session_id: str) -> tuple[Message, ...]:
        """The active branch's messages including dropped ones, oldest first."""
        return message_store.branch_messages(self.conn, session_id, self._branch(session_id), include_dropped=True)

    @_locked
    def group(self, session_id: str, group_id: int) -> tuple[Message, ...]:
        """Every message of one group (any status)."""
        session_store.require_session(self.conn, session_id)
        found = message_store.group_messages(self.conn, session_id, group_id)
        if not found:
            raise UnknownGroup(f"session {session_id} has no group {group_id}")
        return found

    @_locked
    def group_ids(self, session_id: str) -> tuple[int, ...]:
        """Groups visible on the active branch (any status), oldest first."""
        return tuple(message_store.branch_group_ids(self.conn, session_id, self._branch(session_id)))

    @_locked
    def new_group(self, session_id: str) -> int:
        """Reserve a new group id for a Turn about to be written."""
        with db.transaction(self.conn):
            return session_store.allocate_group(self.conn, session_id)

    @_locked
    def append_message(
        self,
        session_id: str,
        role: str,
        content: str,
        *,
        group_id: int | None = None,
        tool_calls: Sequence[ToolCall] = (),
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        parsing_strategy: str = "openai",
        partial: bool = False,
        flags: Sequence[str] = (),
    ) -> Message:
        """Store one message on the active branch and return it (committed).

        Without ``group_id``, a user or system message starts a new group and any other
        message joins the branch's latest group.
        """
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        if role == "tool" and not tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        if tool_calls and role != "assistant":
            raise ValueError("only assistant messages carry tool calls")
        if group_id is not None and group_id < 1:
            raise ValueError(f"group ids start at 1, got {group_id}")
        tokens = self._count(role, content, tool_calls, tool_call_id)
        with db.transaction(self.conn):
            branch_id = self._branch(session_id)
            if group_id is None:
                groups = message_store.branch_group_ids(self.conn, session_id, branch_id)
                if role in ("user", "system") or not groups:
                    group_id = session_store.allocate_group(self.conn, session_id)
                else:
                    group_id = groups[-1]
            (stored,) = message_store.insert_messages(
                self.conn,
                session_id,
                branch_id,
                [
                    NewMessage(
                        group_id=group_id,
                        role=role,
                        content=content,
                        tool_calls=tuple(tool_calls),
                        tool_call_id=tool_call_id,
                        tool_name=tool_name,
                        parsing_strategy=parsing_strategy,
                        tokens=tokens,
                        flags=tuple(flags),
                        partial=partial,
                    )
                ],
            )
        return stored

    @_locked
    def update_message(self, session_id: str, message_id: int, content: str, *, partial: bool = False) -> Message:
        """Rewrite a stored message's text, e.g. a streamed reply as it grows or when it ends."""
        current = message_store.get_message(self.conn, message_id)
        if current is None or current.session_id != session_id:
            raise NotFound(f"session {session_id} has no message {message_id}")
        tokens = self._count(current.role, content, current.tool_calls, current.tool_call_id)
        with db.transaction(self.conn):
            return message_store.update_message(self.conn, message_id, content=content, tokens=tokens, partial=partial)

    @_locked
    def set_message_flags(self, session_id: str, message_id: int, flags: Sequence[str]) -> None:
        current = message_store.get_message(self.conn, message_id)
        if current is None or current.session_id != session_id:
            raise NotFound(f"session {session_id} has no message {message_id}")
        with db.transaction(self.conn):
            message_store.set_flags(self.conn, message_id, flags)

    @_locked
    def drop_group(self, session_id: str, group_id: int) -> None:
        """Mark a group dropped: kept in the store, left out of plans and keyword search."""
        with db.transaction(self.conn):
            session_store.require_session(self.conn, session_id)
            message_store.set_group_status(self.conn, session_id, group_id, "dropped")

    @_locked
    def restore_group(self, session_id: str, group_id: int) -> None:
        """Undo a drop."""
        with db.transaction(self.conn):
            session_store.require_session(self.conn, session_id)
            message_store.set_group_status(self.conn, session_id, group_id, "active")

    @_locked
    def remove_group(self, session_id: str, group_id: int) -> None:
        """Permanently delete a group's messages."""
        with db.transaction(self.conn):
            session_store.require_session(self.conn, session_id)
            message_store.delete_group(self.conn, session_id, group_id)

    @_locked
    def undo(self, session_id: str) -> int | None:
        """Delete the last group written on the active branch; returns its id (None: nothing to undo)."""
        with db.transaction(self.conn):
            branch_id = self._branch(session_id)
            for group_id in reversed(message_store.branch_group_ids(self.conn, session_id, branch_id)):
                if message_store.group_branch(self.conn, session_id, group_id) != branch_id:
                    return None  # the rest belongs to the parent branch; undo never reaches across a fork
                message_store.delete_group(self.conn, session_id, group_id)
                return group_id
            return None

    # -- branches ---------------------------------------------------------------------------

    @_locked
    def branches(self, session_id: str) -> list[BranchInfo]:
        return session_store.list_branches(self.conn, session_id)

    @_locked
    def active_branch(self, session_id: str) -> BranchInfo:
        return session_store.get_branch(self.conn, self._branch(session_id))

    @_locked
    def fork(self, session_id: str, name: str, *, at_message_id: int | None = None, switch: bool = True) -> str:
        """A new branch off the active one, seeing its messages up to ``at_message_id`` (default: all)."""
        with db.transaction(self.conn):
            parent = self._branch(session_id)
            visible = message_store.branch_messages(self.conn, session_id, parent, include_dropped=True)
            if at_message_id is None:
                at_message_id = visible[-1].id if visible else 0
            elif at_message_id not in {m.id for m in visible}:
                raise NotFound(f"message {at_message_id} is not on the active branch of {session_id}")
            branch_id = session_store.create_branch(self.conn, session_id, name, parent, at_message_id)
            if switch:
                session_store.set_active_branch(self.conn, session_id, branch_id)
            return branch_id

    @_locked
    def switch_branch(self, session_id: str, name_or_id: str) -> str:
        with db.transaction(self.conn):
            branch = session_store.find_branch(self.conn, session_id, name_or_id)
            session_store.set_active_branch(self.conn, session_id, branch.id)
            return branch.id

    # -- settings ---------------------------------------------------------------------------

    def _defaults(self) -> SessionSettings:
        p = self.config.planner
        return SessionSettings(p.default_mode, p.default_budget, p.default_strategy, p.window_groups, p.provider_family)

    def _validate(self, name: str, value: Any) -> Any:
        if name == "mode":
            try:
                self.config.planner.mode(str(value))
            except ConfigError as exc:
                raise SettingsError(str(exc)) from None
            return str(value)
        if name == "budget":
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SettingsError(f"budget must be a positive number of tokens, got {value!r}")
            return value
        if name == "strategy":
            if value not in STRATEGIES:
                raise SettingsError(f"unknown strategy {value!r}; expected one of {', '.join(STRATEGIES)}")
            return value
        if name == "window_groups":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SettingsError(f"window must be a number of groups >= 0 (0 = all), got {value!r}")
            return value
        if name == "provider_family":
            if not isinstance(value, str) or not value:
                raise SettingsError(f"provider family must be a name, got {value!r}")
            return value
        raise SettingsError(f"unknown setting {name!r}; known: {', '.join(SETTING_NAMES)}")

    @_locked
    def settings(self, session_id: str) -> SessionSettings:
        """The session's settings: its overrides over the config defaults."""
        overrides = session_store.settings_overrides(self.conn, session_id)
        values = dataclasses.asdict(self._defaults())
        values.update({k: v for k, v in overrides.items() if k in values})
        return SessionSettings(**values)

    @_locked
    def update_settings(self, session_id: str, **changes: Any) -> SessionSettings:
        """Override settings for this session; a value of None returns to the config default."""
        checked = {k: (None if v is None else self._validate(k, v)) for k, v in changes.items()}
        with db.transaction(self.conn):
            overrides = session_store.settings_overrides(self.conn, session_id)
            for key, value in checked.items():
                if value is None:
                    overrides.pop(key, None)
                else:
                    overrides[key] = value
            session_store.set_settings_overrides(self.conn, session_id, overrides)
        return self.settings(session_id)

    # -- pins -------------------------------------------------------------------------------

    @_locked
    def pins(self, session_id: str) -> tuple[Pin, ...]:
        session_store.require_session(self.conn, session_id)
        return pin_store.list_pins(self.conn, session_id)

    @_locked
    def add_pin(
        self,
        session_id: str,
        target: str,
        kind: str,
        *,
        scope: str = "turn",
        ttl: int | None = None,
        label: str = "",
        content: str = "",
        source: str = "user",
    ) -> Pin:
        """Pin ``target`` (``group:12``, ``card:pkg.mod.f``, ``text:<label>``); pinning it again updates it.

        A leased pin without ``ttl`` gets the config's lease length for its scope.
        """
        if kind == "sticky" and source != "user":
            raise ValueError("only the user makes a pin sticky")
        if ttl is None:
            pcfg = self.config.planner.pins
            ttl = (pcfg.task_lease_ttl if scope == "task" else pcfg.default_lease_ttl) if kind == "leased" else 0
        with db.transaction(self.conn):
            turn = session_store.next_group_id(self.conn, session_id)
            return pin_store.add_pin(
                self.conn, session_id, target, kind,
                scope=scope, ttl=ttl, label=label, content=content, source=source, created_turn=turn,
            )

    @_locked
    def update_pin(self, session_id: str, pin_id: str, **changes: Any) -> Pin:
        """Change a pin's kind, label, content, scope, ttl or source."""
        with db.transaction(self.conn):
            return pin_store.update_pin(self.conn, session_id, pin_id, **changes)

    @_locked
    def remove_pin(self, session_id: str, pin_id: str) -> None:
        with db.transaction(self.conn):
            pin_store.remove_pin(self.conn, session_id, pin_id)

    # -- memory layers ----------------------------------------------------------------------

    @_locked
    def state_block(self, session_id: str) -> str:
        session_store.require_session(self.conn, session_id)
        return memory_store.state_block(self.conn, session_id)

    @_locked
    def set_state_block(self, session_id: str, content: str) -> None:
        """Record a new ``### STATE`` version (earlier ones are kept)."""
        with db.transaction(self.conn):
            session_store.require_session(self.conn, session_id)
            memory_store.set_state_block(self.conn, session_id, content)

    @_locked
    def state_history(self, session_id: str) -> tuple[memory_store.StateVersion, ...]:
        return memory_store.state_history(self.conn, session_id)

    @_locked
    def scratchpad(self, session_id: str) -> str:
        session_store.require_session(self.conn, session_id)
        return memory_store.scratchpad(self.conn, session_id)

    @_locked
    def set_scratchpad(self, session_id: str, content: str) -> None:
        with db.transaction(self.conn):
            session_store.require_session(self.conn, session_id)
            memory_store.set_scratchpad(self.conn, session_id, content)

    @_locked
    def memos(self) -> tuple[Memo, ...]:
        """All memos (global, not per session), oldest first."""
        return memory_store.list_memos(self.conn)

    @_locked
    def add_memo(self, content: str, tags: Sequence[str] = ()) -> Memo:
        with db.transaction(self.conn):
            return memory_store.add_memo(self.conn, content, tags)

    @_locked
    def remove_memo(self, memo_id: int) -> bool:
        with db.transaction(self.conn):
            return memory_store.remove_memo(self.conn, memo_id)

    @_locked
    def search_memos(self, query: str, limit: int | None = None) -> tuple[Memo, ...]:
        """Memos ranked by keyword relevance to ``query``."""
        return memory_store.search_memos(
            self.conn, query, self.config.planner.memo_candidates if limit is None else limit
        )

    @_locked
    def activation(self, session_id: str) -> dict[str, float]:
        return activation_store.scores(self.conn, session_id)

    @_locked
    def set_activation(self, session_id: str, scores: dict[str, float], *, replace: bool = True) -> None:
        with db.transaction(self.conn):
            session_store.require_session(self.conn, session_id)
            activation_store.set_scores(self.conn, session_id, scores, replace=replace)

    # -- search -----------------------------------------------------------------------------

    @_locked
    def search_groups(self, session_id: str, query: str, limit: int | None = None) -> tuple[int, ...]:
        """Group ids of the active branch ranked by BM25 relevance to ``query``."""
        n = self.config.planner.hybrid.keyword_candidates if limit is None else limit
        return search_store.search_groups(self.conn, session_id, self._branch(session_id), query, n)

    # -- plans ------------------------------------------------------------------------------

    def _retrieve(self, query: str, mode: str, budget: int, pins: Sequence[Pin], session_id: str) -> RetrievalSet:
        """The turn's RetrievalSet from the retriever seam, steered by the session's live pins, its activation
        scores and what the query mentions. With no retriever plugged in, plans get the empty set."""
        if self.retriever is None:
            return EMPTY_RETRIEVAL_SET
        from ctxbench.retrieval.mentions import mentions

        context = {
            "budget": budget,
            "pins": tuple(p for p in pins if not (p.kind == "leased" and p.ttl <= 0)),
            "activation": activation_store.scores(self.conn, session_id),
            "mentioned": mentions(query),
        }
        retrieve = self.retriever.retrieve
        return retrieve(query, mode=mode, **_accepted(retrieve, context))

    def history_embedder(self) -> Any:
        """The ready embedder the semantic history strategy uses, or None.

        ``self.embedder`` when set, else the embedder of the plugged-in code retriever (through
        its wrappers), so history and code are compared with the same model. One that is still
        loading or failed to load counts as none.
        """
        found: list[Any] = [self.embedder]
        layer: Any = self.retriever
        for _ in range(MAX_RETRIEVER_WRAPPERS):
            if layer is None:
                break
            found.append(getattr(layer, "embedder", None))
            layer = getattr(layer, "retriever", None)
        for embedder in found:
            if embedder is not None and getattr(embedder, "ready", False) and getattr(embedder, "error", None) is None:
                return embedder
        return None

    def _semantic_ranking(self, inputs: PlanInputs) -> tuple[tuple[int, float], ...]:
        """Earlier turns most similar to the query (empty without a ready embedder).

        Runs without holding the lock while it encodes; the vector cache is read and written under it.
        """
        embedder = self.history_embedder()
        if embedder is None:
            return ()
        from ctxbench.retrieval.embedder import EmbedderError
        from ctxbench.retrieval.history_vectors import rank_turns

        try:
            ranking, _ = rank_turns(inputs.history, inputs.query, embedder, _LockedVectorCache(self),
                                    self.config.planner.semantic, skip_groups=inputs.dropped_groups)
        except EmbedderError:
            return ()
        return ranking

    def plan_inputs(
        self,
        session_id: str,
        query: str | None,
        *,
        mode: str | None = None,
        budget: int | None = None,
        strategy: str | None = None,
        window_groups: int | None = None,
        retrieval: RetrievalSet | None = None,
        current_group: int | None = None,
        tools_tokens: int = 0,
    ) -> PlanInputs:
        """Everything the planner needs for one call, read from the store.

        Without ``current_group`` the current turn is a pending user message holding
        ``query`` (id 0, not stored, in the group the next user message will get). With it,
        the stored messages of that group are the current turn (a turn in progress: tool
        rounds) and ``query`` defaults to its user message. With the ``semantic`` strategy and
        a ready embedder, earlier turns are ranked by similarity to the query. ``tools_tokens``:
        the tokens of the tool definitions the call offers (``llm.tools.tool_definitions_tokens``);
        the plan counts them against its budget.
        """
        inputs = self._plan_inputs(session_id, query, mode=mode, budget=budget, strategy=strategy,
                                   window_groups=window_groups, retrieval=retrieval, current_group=current_group)
        if tools_tokens:
            inputs = dataclasses.replace(inputs, tools_tokens=tools_tokens)
        if inputs.strategy == "semantic":
            ranking = self._semantic_ranking(inputs)
            if ranking:
                inputs = dataclasses.replace(inputs, semantic_ranking=ranking)
        return inputs

    @_locked
    def _plan_inputs(
        self,
        session_id: str,
        query: str | None,
        *,
        mode: str | None,
        budget: int | None,
        strategy: str | None,
        window_groups: int | None,
        retrieval: RetrievalSet | None,
        current_group: int | None,
    ) -> PlanInputs:
        s = self.settings(session_id)
        mode = self._validate("mode", mode if mode is not None else s.mode)
        budget = self._validate("budget", budget if budget is not None else s.budget)
        strategy = self._validate("strategy", strategy if strategy is not None else s.strategy)
        window_groups = self._validate("window_groups", window_groups if window_groups is not None else s.window_groups)
        branch_id = self._branch(session_id)
        visible = message_store.branch_messages(self.conn, session_id, branch_id, include_dropped=True)
        if current_group is None:
            if query is None:
                raise ValueError("a plan needs the user's query or a current group")
            pending = Message(
                id=0,
                session_id=session_id,
                branch_id=branch_id,
                group_id=session_store.next_group_id(self.conn, session_id),
                role="user",
                content=query,
                parsing_strategy=s.provider_family,
                tokens=self._count("user", query, (), None),
            )
            current: tuple[Message, ...] = (pending,)
            history = visible
        else:
            current = tuple(m for m in visible if m.group_id == current_group and m.status == "active")
            if not current:
                raise UnknownGroup(f"group {current_group} has no active messages on the active branch of {session_id}")
            history = tuple(m for m in visible if m.group_id != current_group)
            if query is None:
                query = next((m.content for m in current if m.role == "user"), "")
        dropped = tuple(g for g in _dropped_groups(visible) if g != current_group)
        keyword_ranking: tuple[int, ...] = ()
        if strategy == "hybrid":
            keyword_ranking = tuple(
                g
                for g in search_store.search_groups(
                    self.conn, session_id, branch_id, query, self.config.planner.hybrid.keyword_candidates
                )
                if g != current_group
            )
        pins = pin_store.list_pins(self.conn, session_id)
        if retrieval is None:
            retrieval = self._retrieve(query, mode, budget, pins, session_id)
        return PlanInputs(
            session_id=session_id,
            query=query,
            history=history,
            current_turn=current,
            budget=budget,
            mode=mode,
            strategy=strategy,
            window_groups=window_groups,
            provider_family=s.provider_family,
            system_prompt=self.config.planner.system_prompt,
            pins=pins,
            dropped_groups=dropped,
            state_block=memory_store.state_block(self.conn, session_id),
            scratchpad=memory_store.scratchpad(self.conn, session_id),
            memos=memory_store.search_memos(self.conn, query, self.config.planner.memo_candidates),
            retrieval=retrieval,
            keyword_ranking=keyword_ranking,
            tokenizer=self.tokenizer.name,
        )

    def plan(
        self,
        session_id: str,
        query: str | None,
        *,
        mode: str | None = None,
        budget: int | None = None,
        strategy: str | None = None,
        window_groups: int | None = None,
        retrieval: RetrievalSet | None = None,
        current_group: int | None = None,
        store: bool = True,
        tools_tokens: int = 0,
    ) -> ContextPlan:
        """Build (and by default store) the ContextPlan for a user turn (``tools_tokens``: see plan_inputs)."""
        inputs = self.plan_inputs(
            session_id,
            query,
            mode=mode,
            budget=budget,
            strategy=strategy,
            window_groups=window_groups,
            retrieval=retrieval,
            current_group=current_group,
            tools_tokens=tools_tokens,
        )
        from ctxbench.planner import build_plan  # imported on first use

        # planning runs outside the lock so a worker thread's plan never blocks the UI's reads
        plan = build_plan(inputs, self.config.planner, self.tokenizer)
        if store:
            self.store_plan(inputs, plan)
        return plan

    @_locked
    def store_plan(self, inputs: PlanInputs, plan: ContextPlan) -> None:
        """Store a plan with its inputs (a PlanId already stored is left as it is)."""
        with db.transaction(self.conn):
            written = plan_store.save_plan(self.conn, inputs, plan, self._stored_messages)
        if len(self._stored_messages) + len(written) > STORED_MESSAGE_CACHE:
            self._stored_messages.clear()
        self._stored_messages.update(written)

    @_locked
    def get_plan(self, plan_id: str) -> ContextPlan:
        """A stored plan, rebuilt exactly (same items, same ``messages()`` payload)."""
        return plan_store.get_plan(self.conn, plan_id)

    @_locked
    def get_plan_inputs(self, plan_id: str) -> PlanInputs:
        """The inputs a stored plan was built from (to replay or explain it)."""
        return plan_store.get_plan_inputs(self.conn, plan_id)

    @_locked
    def list_plans(self, session_id: str, limit: int = 50) -> list[PlanSummary]:
        session_store.require_session(self.conn, session_id)
        return plan_store.list_plans(self.conn, session_id, limit)

    @_locked
    def get_retrieval_set(self, retrieval_id: str) -> RetrievalSet | None:
        if retrieval_id == EMPTY_RETRIEVAL_SET.id:
            return EMPTY_RETRIEVAL_SET
        return plan_store.get_retrieval_set(self.conn, retrieval_id)

    @_locked
    def record_usage(self, plan_id: str, estimated: int, reported: int | None, model: str) -> UsageReport:
        """Record estimated vs provider-reported prompt tokens for a stored plan."""
        with db.transaction(self.conn):
            return plan_store.record_usage(self.conn, plan_id, estimated, reported, model)

    @_locked
    def usage_reports(self, plan_id: str) -> tuple[UsageReport, ...]:
        return plan_store.usage_reports(self.conn, plan_id)
