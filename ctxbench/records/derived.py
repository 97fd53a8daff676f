"""Values derived from texts anew (masking, token counts), held for the session whose texts they are until its
store keeps them (``service.derived_texts``).

The caches that derive them (``redaction.redact_cached``, the tokenizer's counts) are process-wide, and one process
plans several sessions (the workbench, ``serve``, the MCP server). What is derived while :func:`deriving_for` a
session is that session's; what is derived outside any (a message counted as it is appended, a proxied request)
is held unclaimed until a session's work uses the same text from the cache, which claims it. A store takes only
its own session's values, so a session never files another's texts (whose deleted turns it would not purge).
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Generic, Hashable, Iterator, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_SESSION: ContextVar[str | None] = ContextVar("ctxbench_deriving_for", default=None)


@contextmanager
def deriving_for(session_id: str) -> Iterator[None]:
    """Texts derived in this block (this thread) are ``session_id``'s."""
    token = _SESSION.set(session_id)
    try:
        yield
    finally:
        _SESSION.reset(token)


class FreshValues(Generic[K, V]):
    """Values derived anew and not yet kept by a store, per session (``None``: derived outside any session), at most
    ``limit`` per session (the oldest go first). Not locked: its owner calls it under the lock of its cache."""

    def __init__(self, limit: int) -> None:
        self._limit = max(1, limit)
        self._by_session: dict[str, dict[K, V]] = {}
        self.unclaimed: dict[K, V] = {}  # derived outside any session (read on every cache hit: kept an attribute)

    def add(self, key: K, value: V) -> None:
        """A value derived now, for the session being derived for (if any)."""
        session = _SESSION.get()
        pool = self.unclaimed if session is None else self._by_session.setdefault(session, {})
        pool[key] = value
        if len(pool) > self._limit:
            pool.pop(next(iter(pool)))

    def claim(self, key: K) -> None:
        """The cached value of ``key`` was used: when it was derived outside any session, it becomes the current
        session's. Callers test ``unclaimed`` first (empty in the usual case)."""
        session = _SESSION.get()
        if session is not None and key in self.unclaimed:
            pool = self._by_session.setdefault(session, {})
            pool[key] = self.unclaimed.pop(key)
            if len(pool) > self._limit:
                pool.pop(next(iter(pool)))

    def take(self, session_id: str) -> dict[K, V]:
        """``session_id``'s values derived since the last take; forgotten here (other sessions' stay)."""
        return self._by_session.pop(session_id, {})

    def forget(self, session_id: str | None = None) -> None:
        """Forget ``session_id``'s values (a deleted session), or every value."""
        if session_id is None:
            self._by_session.clear()
            self.unclaimed.clear()
        else:
            self._by_session.pop(session_id, None)
