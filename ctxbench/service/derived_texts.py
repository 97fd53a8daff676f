"""What plans derive from texts alone — their masking, their token counts — kept in the store between processes.

The first plan of a long session masks every message and counts every rendered message's tokens; in one
process both are remembered in memory (``redaction.redact_cached``, the tokenizer's cache). :class:`DerivedTexts`
hands a session's kept results to those caches when the session is first planned in this workbench (one query
per table), and after each plan stores what was computed anew for that session's texts (``store.derived_texts``),
so a session reopened in a fresh process plans without scanning or encoding its history again. The results are
the same values the cold path computes, looked up by content hash, so a plan is the same (same PlanId) either way.

The caches are process-wide and a process plans several sessions: what is derived is held per session
(``records.derived``: the workbench derives a session's texts :func:`~ctxbench.records.derived.deriving_for` it),
and a session's store takes only its own, so deleting a session's turn purges every masked copy of their texts.
"""
from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager
from typing import Callable, Protocol

from ctxbench.redaction import forget_fresh_masks, remember_masks, rules_fingerprint, take_fresh_masks
from ctxbench.store import derived_texts as store
from ctxbench.tokens import Tokenizer


class _Transactions(Protocol):
    def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...


class DerivedTexts:
    """Loads a session's kept masking and token counts once per workbench, and keeps what plans compute anew."""

    def __init__(self, database: _Transactions, tokenizer: Callable[[], Tokenizer]) -> None:
        self._db = database
        self._tokenizer = tokenizer
        self._loaded: set[tuple[str, str]] = set()  # (session id, tokenizer name)
        self._lock = threading.Lock()

    def load(self, conn: sqlite3.Connection, session_id: str) -> None:
        """Hand what the store keeps for ``session_id`` to the in-memory caches (once per session and tokenizer)."""
        tokenizer = self._tokenizer()
        key = (session_id, tokenizer.name)
        with self._lock:
            if key in self._loaded:
                return
            self._loaded.add(key)
        remember_masks(store.masks(conn, session_id, rules_fingerprint()))
        remember = getattr(tokenizer, "remember", None)
        if remember is not None:
            remember(store.token_counts(conn, session_id, tokenizer.name))

    def save(self, session_id: str) -> None:
        """Keep for ``session_id`` what was masked and counted anew for its texts since the last call (what other
        sessions' texts got stays for their own saves). The store is a cache here: when it cannot be written (busy
        past the timeout, read-only, the session deleted meanwhile) the results stay in memory only and the plan
        goes on."""
        tokenizer = self._tokenizer()
        take = getattr(tokenizer, "take_fresh", None)
        counts = take(session_id) if take is not None else {}
        masks = take_fresh_masks(session_id)
        if not counts and not masks:
            return
        try:
            with self._db.transaction() as conn:
                store.save_masks(conn, session_id, rules_fingerprint(), masks)
                store.save_token_counts(conn, session_id, tokenizer.name, counts)
        except (sqlite3.OperationalError, sqlite3.IntegrityError):
            pass

    def drop(self, session_id: str) -> None:
        """Drop what was derived for ``session_id`` and not kept yet (the session is deleted)."""
        forget_fresh_masks(session_id)
        forget = getattr(self._tokenizer(), "forget_fresh", None)
        if forget is not None:
            forget(session_id)
        with self._lock:
            self._loaded = {key for key in self._loaded if key[0] != session_id}

    def forget(self, session_id: str) -> None:
        """Forget what the store keeps for ``session_id`` (benchmarks of a first open)."""
        with self._db.transaction() as conn:
            store.forget_session(conn, session_id)
        with self._lock:
            self._loaded = {key for key in self._loaded if key[0] != session_id}
