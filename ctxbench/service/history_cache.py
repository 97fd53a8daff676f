"""A session's messages kept in memory between plans, masked, and brought up to date a few rows at a time.

Reading a 10,000-turn session (~50,000 messages) from SQLite and masking its secrets took seconds per plan.
:class:`HistoryCache` reads a session once, then asks the store only what changed since
(``store.message_changes``: triggers stamp every write, whoever made it), so a plan reads a counter when
nothing changed and the changed rows when something did. What a branch sees is filtered in memory from
the session's messages (its lineage: the parent's messages up to each fork point, then its own); the view
of each branch is kept and, when turns were only added, extended rather than rebuilt. The messages are the
ones plans see: masked by :func:`ctxbench.service.redaction.redact_message` when they enter the cache.

The same message objects come back plan after plan, so the planner's caches (keyed by identity first)
and the keyword index (``retrieval.history_keywords``) keep their work.
"""
from __future__ import annotations

import sqlite3
import threading
from bisect import bisect_left
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Sequence

from ctxbench.records.messages import Message
from ctxbench.service.redaction import redact_message
from ctxbench.store import message_changes
from ctxbench.store import sessions as session_store

_ID = attrgetter("id")
Lineage = tuple[tuple[str, int | None], ...]  # (branch id, last message id it contributes or None: all)


@dataclass
class _View:
    messages: tuple[Message, ...]
    dropped_groups: tuple[int, ...] | None = None
    first_at: dict[int, int] | None = None  # group id -> position of its first message


@dataclass
class _Session:
    seq: int = 0
    messages: dict[int, Message] = field(default_factory=dict)  # id -> masked message, any branch
    max_id: int = 0
    views: dict[Lineage, _View] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _visible(m: Message, lineage: Lineage) -> bool:
    for branch, limit in lineage:
        if m.branch_id == branch:
            return limit is None or m.id <= limit
    return False


class HistoryCache:
    """The messages each branch of a session sees, oldest first, dropped ones included (masked)."""

    def __init__(self, max_sessions: int) -> None:
        self._sessions: dict[str, _Session] = {}
        self._max = max(1, max_sessions)
        self._lock = threading.Lock()

    def _session(self, session_id: str) -> _Session:
        with self._lock:
            entry = self._sessions.pop(session_id, None) or _Session()
            self._sessions[session_id] = entry  # most recently used last
            while len(self._sessions) > self._max:
                self._sessions.pop(next(iter(self._sessions)))
            return entry

    def branch_messages(self, conn: sqlite3.Connection, session_id: str, branch_id: str) -> tuple[Message, ...]:
        """What ``branch_id`` sees: its ancestors' messages up to each fork point, then its own (any status)."""
        return self._view(conn, session_id, branch_id).messages

    def dropped_groups(self, conn: sqlite3.Connection, session_id: str, branch_id: str) -> tuple[int, ...]:
        """Groups of the branch's view none of whose messages is active, in order."""
        view = self._view(conn, session_id, branch_id)
        if view.dropped_groups is None:
            view.dropped_groups = dropped_groups(view.messages)
        return view.dropped_groups

    def first_positions(self, conn: sqlite3.Connection, session_id: str, branch_id: str) -> dict[int, int]:
        """Group id -> the position of its first message in the branch's view."""
        view = self._view(conn, session_id, branch_id)
        if view.first_at is None:
            first: dict[int, int] = {}
            for at, m in enumerate(view.messages):
                first.setdefault(m.group_id, at)
            view.first_at = first
        return view.first_at

    def forget(self, session_id: str | None = None) -> None:
        with self._lock:
            if session_id is None:
                self._sessions.clear()
            else:
                self._sessions.pop(session_id, None)

    def _view(self, conn: sqlite3.Connection, session_id: str, branch_id: str) -> _View:
        entry = self._session(session_id)
        lineage: Lineage = tuple(session_store.lineage(conn, branch_id))
        with entry.lock:
            changes = message_changes.changes_since(conn, session_id, entry.seq)
            if changes.full:
                entry.messages = {m.id: redact_message(m) for m in changes.messages}
                entry.max_id = max(entry.messages, default=0)
                entry.views.clear()
            elif changes.messages or changes.deleted:
                self._apply(entry, changes)
            entry.seq = changes.seq
            view = entry.views.get(lineage)
            if view is None:
                ordered = [entry.messages[i] for i in sorted(entry.messages)]
                view = entry.views[lineage] = _View(tuple(m for m in ordered if _visible(m, lineage)))
            return view

    @staticmethod
    def _apply(entry: _Session, changes: message_changes.Changes) -> None:
        """Patch the kept views: new messages appended, changed ones replaced, deleted ones removed (views are
        ordered by id, so each change is a binary search)."""
        for mid in changes.deleted:
            entry.messages.pop(mid, None)
        fresh = [redact_message(m) for m in changes.messages]
        for m in fresh:
            entry.messages[m.id] = m
        for lineage, view in list(entry.views.items()):
            messages = view.messages
            if changes.deleted or any(m.id <= entry.max_id for m in fresh):
                patched = list(messages)
                for mid in changes.deleted:
                    at = bisect_left(patched, mid, key=_ID)
                    if at < len(patched) and patched[at].id == mid:
                        del patched[at]
                for m in fresh:
                    at = bisect_left(patched, m.id, key=_ID)
                    present = at < len(patched) and patched[at].id == m.id
                    if present and _visible(m, lineage):
                        patched[at] = m
                    elif present:
                        del patched[at]
                    elif _visible(m, lineage):
                        patched.insert(at, m)
                messages = tuple(patched)
            else:  # only new messages (the usual case)
                messages += tuple(m for m in fresh if _visible(m, lineage))
            entry.views[lineage] = _View(messages)
        entry.max_id = max(entry.messages, default=0)


def dropped_groups(messages: Sequence[Message]) -> tuple[int, ...]:
    """Groups (in order of their first message) none of whose ``messages`` is active."""
    has_active: dict[int, bool] = {}
    for m in messages:
        has_active[m.group_id] = has_active.get(m.group_id, False) or m.status == "active"
    return tuple(g for g, active in has_active.items() if not active)
