"""A long session's history as planned, kept in the store so a fresh process plans it without reading it again.

The first plan of a session in a process read every message (~50,000 for 10,000 turns), masked each, rendered
and counted every turn and hashed every message for the PlanId: 4-5 s before a reopened long session showed a
plan, and its first stored plan keyed every message again (2-3 s). :class:`HistorySnapshots` keeps, when the
workbench closes, what that work produced for each session of at least ``SNAPSHOT_MIN_MESSAGES`` messages it
planned (``store.history_snapshots``): the masked messages and branch views (``HistoryCache.kept``), the turns'
views with their rendered, counted atoms (``planner.atoms.kept_views``), and the ``plan_messages`` keys of the
messages already stored (``Plans.known_keys``). A fresh workbench starts a session from it
(``HistoryCache.restore``) and reads only the messages changed after its change stamp: the same message
records, views and digests as a full read makes, so the same PlanIds and plans.

What else the snapshot depends on is its fingerprint, and a snapshot of another fingerprint is not used: the
tokenizer's name, the masking rules (``redaction.rules_fingerprint``), and the source of the modules whose
code made what it holds. The blob is read by an unpickler that builds only the records it holds (a tampered
file cannot name other classes).
"""
from __future__ import annotations

import dataclasses
import gc
import hashlib
import io
import pickle
import sqlite3
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ctxbench.heap import gc_paused
from ctxbench.service.code_digest import package_digest
from ctxbench.config.constants import SNAPSHOT_MIN_MESSAGES
from ctxbench.redaction import rules_fingerprint
from ctxbench.service.history_cache import HistoryCache, Kept
from ctxbench.service.history_ranker import HistoryRanker
from ctxbench.store import history_snapshots as store
from ctxbench.store.plans import Plans
from ctxbench.tokens import Tokenizer

if TYPE_CHECKING:
    from ctxbench.planner import atoms

FORMAT = "1"  # what the blob holds and how; a change here makes every kept snapshot unused
# modules whose code shapes what a snapshot holds (messages as read and masked, views as laid out and counted)
# the only classes a snapshot may hold
_ALLOWED = {("ctxbench.records.messages", "Message"), ("ctxbench.records.messages", "ToolCall"),
            ("ctxbench.planner.atoms", "GroupView"), ("ctxbench.planner.atoms", "Atom"),
            ("ctxbench.planner.atoms", "SystemMessage"), ("ctxbench.retrieval.history_keywords", "HistoryKeywords"),
            ("array", "_array_reconstructor"), ("array", "array"), ("builtins", "frozenset"), ("builtins", "set")}
_CONFIG = "ctxbench.config."  # the config's frozen dataclasses (keys of the views' memos) may be named too


class _Workbench(Protocol):
    history_cache: HistoryCache
    plans: Plans
    history: HistoryRanker

    @property
    def tokenizer(self) -> Tokenizer: ...

    def connection(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module.startswith(_CONFIG):
            found = super().find_class(module, name)
            if isinstance(found, type) and dataclasses.is_dataclass(found):
                return found
        raise pickle.UnpicklingError(f"a history snapshot holds no {module}.{name}")


def code_digest() -> str:
    """What shapes what a snapshot holds in code: the snapshot's format and the whole package's source."""
    return hashlib.sha256(f"{FORMAT}\n{package_digest()}".encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """What a blob holds: the session's kept messages and views, the turns' views laid out (per layout key), the
    ``plan_messages`` keys of its messages already stored, its keyword index (``HistoryKeywords`` or None)."""

    session_id: str
    kept: Kept
    layouts: list[tuple[tuple[Any, ...], tuple["atoms.GroupView", ...]]]
    keys: dict[int, str]
    keywords: Any


def dumps(snapshot: Snapshot) -> bytes:
    """The blob of a session's kept state."""
    s = snapshot
    return pickle.dumps((s.session_id, s.kept.seq, s.kept.messages, s.kept.views, s.layouts, s.keys, s.keywords),
                        protocol=5)


def loads(data: bytes) -> Snapshot:
    """The snapshot a blob holds. It holds ~100,000 records and ~1,000,000 objects in
    all, alive as long as the session is kept: the collector is paused while they are made, then they are moved
    to its permanent generation (``gc.freeze``, as ``heap.settle`` does after a load), or the next collections
    would walk every one of them, a second each."""
    with gc_paused():
        session_id, seq, messages, views, layouts, keys, keywords = _Unpickler(io.BytesIO(data)).load()
        gc.freeze()
    return Snapshot(session_id, Kept(seq, messages, views), layouts, keys, keywords)


class HistorySnapshots:
    """Keeps the sessions a workbench planned (``save``, on close) and starts sessions from them (``restore``);
    ``min_messages``: the fewest messages a session kept has (default ``SNAPSHOT_MIN_MESSAGES``)."""

    def __init__(self, workbench: _Workbench, min_messages: int | None = None) -> None:
        self._wb = workbench
        self._min = min_messages
        # session -> change stamp of its snapshot in the store (read or written), and how many stored keys it holds
        self._stored: dict[str, tuple[int, int]] = {}

    def fingerprint(self) -> str:
        return hashlib.sha256(f"{code_digest()}\n{self._wb.tokenizer.name}\n{rules_fingerprint()}".encode()
                              ).hexdigest()[:32]

    def restore(self, conn: sqlite3.Connection, session_id: str) -> Kept | None:
        """The session's kept state, its views and stored keys handed to the planner and the plans (None: no
        snapshot of this fingerprint, or one that cannot be read)."""
        if store.stored_seq(conn, session_id) is None:  # most sessions: no need to hash the package's source
            return None
        found = store.load(conn, session_id, self.fingerprint())
        if found is None:
            return None
        try:
            snapshot = loads(found[1])
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError):
            return None
        kept = snapshot.kept
        if snapshot.session_id != session_id or kept.seq != found[0]:
            return None
        from ctxbench.planner import atoms  # imported on first use (start-up)

        tokenizer = self._wb.tokenizer
        for key, views in snapshot.layouts:
            atoms.adopt_views(tokenizer, key, views)
        self._wb.plans.adopt_keys(kept.messages, snapshot.keys)
        if snapshot.keywords is not None:
            self._wb.history.adopt_keywords(session_id, snapshot.keywords)
        self._stored[session_id] = (kept.seq, len(snapshot.keys))
        return kept

    def save(self) -> int:
        """Keep every session of at least ``min_messages`` messages this workbench read whose messages changed
        since its snapshot (or that has none), or whose stored messages' keys this workbench knows more of than its
        snapshot holds (one made by a process that stored no plan: its next process keyed every message again);
        returns how many were written. The store is a cache here: a write that fails (busy, read-only) leaves the
        next process to read the session again."""
        written = 0
        for session_id in self._wb.history_cache.sessions():
            try:
                with self._wb.connection() as conn:
                    kept = self._wb.history_cache.kept(conn, session_id)
                    least = SNAPSHOT_MIN_MESSAGES if self._min is None else self._min
                    if kept is None or len(kept.messages) < least:
                        continue
                    keys = self._wb.plans.known_keys(kept.messages)
                    seq, held = self._stored.get(session_id, (None, 0))
                    if seq == kept.seq and len(keys) <= held and store.stored_seq(conn, session_id) == kept.seq:
                        continue
                data = dumps(Snapshot(session_id, kept, self._layouts(session_id, kept), keys,
                                      self._wb.history.kept_keywords(session_id)))
                with self._wb.transaction() as conn:
                    store.save(conn, session_id, self.fingerprint(), kept.seq, data)
            except (sqlite3.Error, pickle.PicklingError, TypeError, AttributeError, RuntimeError):
                continue  # RuntimeError: a plan in another thread changed a memo while it was written
            self._stored[session_id] = (kept.seq, len(keys))
            written += 1
        return written

    def forget(self, session_id: str) -> None:
        """Forget the session's snapshot (benchmarks of a first open)."""
        with self._wb.transaction() as conn:
            store.forget(conn, session_id)
        self._stored.pop(session_id, None)

    @staticmethod
    def _layouts(session_id: str, kept: Kept) -> list[tuple[tuple[Any, ...], tuple[atoms.GroupView, ...]]]:
        """The kept layouts' views made of the very messages kept (others are stale), each view once."""
        from ctxbench.planner import atoms

        messages = kept.messages
        seen: set[int] = set()
        out = []
        for key, views in atoms.kept_views(session_id):
            fresh = tuple(v for v in views if id(v) not in seen
                          and all(messages.get(m.id) is m for m in v.messages))
            seen.update(map(id, fresh))
            if fresh:
                out.append((key, fresh))
        return out
