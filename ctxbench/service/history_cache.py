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
from bisect import bisect_left, bisect_right
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Callable, Iterator, Sequence

from ctxbench.records.messages import Message
from ctxbench.service.redaction import redact_message
from ctxbench.store import message_changes
from ctxbench.store import sessions as session_store

_ID = attrgetter("id")
# messages read at a time when a branch's start is read part by part: few at first (the first turn comes at
# once), then as many as were read so far (a long session is read in a few dozen parts), at most the second
PREFIX_PART = (200, 5000)
Lineage = tuple[tuple[str, int | None], ...]  # (branch id, last message id it contributes or None: all)


@dataclass
class _View:
    messages: tuple[Message, ...]
    dropped_groups: tuple[int, ...] | None = None
    first_at: dict[int, int] | None = None  # group id -> position of its first message


@dataclass
class _Prefix:
    """The start of a branch's view, read a part at a time (while no full view is kept): its messages, where each
    group starts, and the groups none of whose messages is active (in order of first appearance)."""

    seq: int  # the change stamp when the first part was read (a change since: the parts are read again)
    read_to: int = 0  # every message of the session up to this id has been read
    messages: list[Message] = field(default_factory=list)
    first_at: dict[int, int] = field(default_factory=dict)
    dropped: dict[int, None] = field(default_factory=dict)  # groups with no active message so far, in order
    done: bool = False  # the whole session is read


@dataclass(frozen=True)
class TurnHistory:
    """What a stored message saw when it was sent: the history before its turn, the message, the turns dropped
    among that history (``HistoryCache.turn_history``)."""

    history: tuple[Message, ...]
    message: Message
    dropped_groups: tuple[int, ...]


@dataclass
class _Session:
    seq: int = 0
    messages: dict[int, Message] = field(default_factory=dict)  # id -> masked message, any branch
    max_id: int = 0
    views: dict[Lineage, _View] = field(default_factory=dict)
    prefixes: dict[Lineage, _Prefix] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _visible(m: Message, lineage: Lineage) -> bool:
    for branch, limit in lineage:
        if m.branch_id == branch:
            return limit is None or m.id <= limit
    return False


@dataclass(frozen=True)
class Kept:
    """A session's messages as kept here (masked), current to change stamp ``seq``, and each branch view's messages
    (by lineage): what a fresh process starts from instead of reading the session (``service.history_snapshot``)."""

    seq: int
    messages: dict[int, Message]
    views: dict[Lineage, tuple[Message, ...]]


class HistoryCache:
    """The messages each branch of a session sees, oldest first, dropped ones included (masked).

    ``restore``: asked for a session's :class:`Kept` state before the session is first read here (None: read it
    all); the messages changed after its stamp are then read as after any earlier read."""

    def __init__(self, max_sessions: int,
                 restore: Callable[[sqlite3.Connection, str], Kept | None] | None = None,
                 before_masking: Callable[[sqlite3.Connection, str], None] | None = None) -> None:
        self._sessions: dict[str, _Session] = {}
        self._max = max(1, max_sessions)
        self._lock = threading.Lock()
        self.restore = restore
        self.before_masking = before_masking

    def sessions(self) -> list[str]:
        """The sessions kept here, least recently used first."""
        with self._lock:
            return list(self._sessions)

    def kept(self, conn: sqlite3.Connection, session_id: str) -> Kept | None:
        """The session's kept messages and views, first brought up to date with the store (None: not read here)."""
        with self._lock:
            entry = self._sessions.get(session_id)
        if entry is None:
            return None
        with entry.lock:
            if entry.seq <= 0:
                return None
            self._update(conn, entry, session_id)
            return Kept(entry.seq, dict(entry.messages), {k: v.messages for k, v in entry.views.items()})

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
        return self.branch_view(conn, session_id, branch_id)[1]

    def branch_view(self, conn: sqlite3.Connection, session_id: str, branch_id: str
                    ) -> tuple[tuple[Message, ...], tuple[int, ...]]:
        """``branch_messages`` and ``dropped_groups`` from one look at the store (a plan needs both)."""
        view = self._view(conn, session_id, branch_id)
        _derive(view)
        assert view.dropped_groups is not None
        return view.messages, view.dropped_groups

    def turn_history(self, conn: sqlite3.Connection, session_id: str, branch_id: str, message_id: int
                     ) -> TurnHistory | None:
        """The history message ``message_id`` had when it was sent (None: it is not on the branch). From the full
        view when one is kept and current, else from the branch's start read only as far as the message (a long
        session's first turns are replayed without reading the rest)."""
        with self._kept(conn, session_id, branch_id) as (entry, lineage, now, view):
            if view is not None:
                messages = view.messages
                _derive(view)
                first_at, all_dropped = view.first_at, view.dropped_groups
                at = _position(messages, message_id)
            else:
                prefix = self._prefix(conn, entry, session_id, lineage, now, message_id)
                messages, first_at, all_dropped = prefix.messages, prefix.first_at, tuple(prefix.dropped)
                at = _position(messages, message_id)
            if at is None:
                return None
            group = messages[at].group_id
            cut = at
            while cut > 0 and messages[cut - 1].group_id == group:
                cut -= 1
            if first_at[group] >= cut:
                history = tuple(messages[:cut])
            else:  # the turn has messages before others (not the usual case): those of other turns before it
                history = tuple(m for m in messages[:at] if m.group_id != group)
            dropped = tuple(g for g in all_dropped if g != group and first_at[g] < cut)
            return TurnHistory(history, messages[at], dropped)

    def view_part(self, conn: sqlite3.Connection, session_id: str, branch_id: str, after_id: int
                  ) -> tuple[tuple[Message, ...], int | None]:
        """(the next messages of the branch's view after message id ``after_id``, the id to ask after next time or
        None: there is nothing more): from the full view when one is kept and current, else read a part at a time
        (replay lists a long session's turns as it plans them, without reading it all first)."""
        with self._kept(conn, session_id, branch_id) as (entry, lineage, now, view):
            if view is not None:
                return tuple(view.messages[bisect_right(view.messages, after_id, key=_ID):]), None
            prefix = self._prefix(conn, entry, session_id, lineage, now, after_id + 1)
            part = tuple(prefix.messages[bisect_right(prefix.messages, after_id, key=_ID):])
            return part, (None if prefix.done else prefix.read_to)

    @contextmanager
    def _kept(self, conn: sqlite3.Connection, session_id: str, branch_id: str
              ) -> Iterator[tuple[_Session, Lineage, int, _View | None]]:
        """Under the session's lock: (its entry, the branch's lineage, the change stamp now, the branch's full view
        when one is kept and current, else None)."""
        entry = self._session(session_id)
        lineage: Lineage = tuple(session_store.lineage(conn, branch_id))
        with entry.lock:
            now = message_changes.current_seq(conn)
            yield entry, lineage, now, (entry.views.get(lineage) if entry.seq == now else None)

    def _prefix(self, conn: sqlite3.Connection, entry: _Session, session_id: str, lineage: Lineage, now: int,
                upto: int) -> _Prefix:
        """The branch's view read at least up to message ``upto`` (in parts: ``PREFIX_PART``)."""
        prefix = entry.prefixes.get(lineage)
        if prefix is None or prefix.seq != now:
            prefix = entry.prefixes[lineage] = _Prefix(now)
        while not prefix.done and prefix.read_to < upto:
            size = min(PREFIX_PART[1], max(PREFIX_PART[0], len(prefix.messages)))
            part = message_changes.messages_after(conn, session_id, prefix.read_to, size)
            if len(part) < size:
                prefix.done = True
            if part:
                prefix.read_to = part[-1].id
            for m in part:
                if not _visible(m, lineage):
                    continue
                m = redact_message(m)
                if m.group_id not in prefix.first_at:
                    prefix.first_at[m.group_id] = len(prefix.messages)
                    if m.status != "active":
                        prefix.dropped[m.group_id] = None
                elif m.status == "active":
                    prefix.dropped.pop(m.group_id, None)
                prefix.messages.append(m)
        return prefix

    def _view(self, conn: sqlite3.Connection, session_id: str, branch_id: str) -> _View:
        entry = self._session(session_id)
        lineage: Lineage = tuple(session_store.lineage(conn, branch_id))
        with entry.lock:
            entry.prefixes.clear()  # the full view is read: it answers from now on
            if entry.seq <= 0 and self.restore is not None:
                kept = self.restore(conn, session_id)
                if kept is not None:
                    entry.seq, entry.messages = kept.seq, dict(kept.messages)
                    entry.max_id = max(entry.messages, default=0)
                    entry.views = {k: _View(v) for k, v in kept.views.items()}
            self._update(conn, entry, session_id)
            view = entry.views.get(lineage)
            if view is None:
                ordered = [entry.messages[i] for i in sorted(entry.messages)]
                view = entry.views[lineage] = _View(tuple(m for m in ordered if _visible(m, lineage)))
            return view

    def _update(self, conn: sqlite3.Connection, entry: _Session, session_id: str) -> None:
        """Bring the entry up to date: every message read (a first read), else the changed ones applied."""
        if self.before_masking is not None:  # what the store keeps of earlier maskings, before any text is masked
            self.before_masking(conn, session_id)
        changes = message_changes.changes_since(conn, session_id, entry.seq)
        if changes.full:
            entry.messages = {m.id: redact_message(m) for m in changes.messages}
            entry.max_id = max(entry.messages, default=0)
            entry.views.clear()
        elif changes.messages or changes.deleted:
            self._apply(entry, changes)
        entry.seq = changes.seq

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
                entry.views[lineage] = _View(messages)
            else:  # only new messages (the usual case): what was derived from the view is extended too
                added = tuple(m for m in fresh if _visible(m, lineage))
                entry.views[lineage] = _extended(view, added)
        entry.max_id = max(entry.messages, default=0)


def _extended(view: _View, added: tuple[Message, ...]) -> _View:
    """``view`` with ``added`` (newer messages) at its end; its groups' first positions and dropped groups, when
    they were made, brought up to date from the new messages alone."""
    if view.first_at is None or view.dropped_groups is None:
        return _View(view.messages + added)
    first = dict(view.first_at)
    dropped = dict.fromkeys(view.dropped_groups)
    at = len(view.messages)
    for m in added:
        if m.group_id not in first:
            first[m.group_id] = at
            if m.status != "active":
                dropped[m.group_id] = None
        elif m.status == "active":
            dropped.pop(m.group_id, None)
        at += 1
    return _View(view.messages + added, tuple(dropped), first)


def _first_positions(messages: Sequence[Message]) -> dict[int, int]:
    first: dict[int, int] = {}
    for at, m in enumerate(messages):
        first.setdefault(m.group_id, at)
    return first


def _position(messages: Sequence[Message], message_id: int) -> int | None:
    """Where message ``message_id`` is in a view (ids grow along a view: a binary search, else a scan)."""
    at = bisect_left(messages, message_id, key=_ID)
    if at < len(messages) and messages[at].id == message_id:
        return at
    return next((i for i, m in enumerate(messages) if m.id == message_id), None)


def _derive(view: "_View") -> None:
    """The view's dropped groups and first positions, made once (together, so the next view can extend both)."""
    if view.dropped_groups is None:
        view.dropped_groups = dropped_groups(view.messages)
    if view.first_at is None:
        view.first_at = _first_positions(view.messages)


def dropped_groups(messages: Sequence[Message]) -> tuple[int, ...]:
    """Groups (in order of their first message) none of whose ``messages`` is active."""
    has_active: dict[int, bool] = {}
    for m in messages:
        has_active[m.group_id] = has_active.get(m.group_id, False) or m.status == "active"
    return tuple(g for g, active in has_active.items() if not active)
