"""A stored plan's excluded history items: the rows of its atoms once per chunk, shared by every plan, and the plan's
own reasons, details and scores as runs; and its inputs' history keys, once per chunk.

A 10,000-turn session's plan lists ~34,000 history atoms it left out; written as rows of a table, each plan was
~7 MB of JSON, nearly all of it what the atoms are (id, label, tokens, message ids), the same in the plan before.
The planner hands them over as columns (``records.history_items.ExcludedHistory``): chunks of the rows of every
atom of a run of turns, and one reason, detail and score per excluded atom. Here each chunk is stored once in
``plan_chunks`` under a content key (sha256 of its session and its text; the session's plans share it, and
deleting the session deletes it), and a plan's result holds the chunks' keys, the positions of the atoms it
included and its three columns as runs of equal values. :class:`StoredChunks` remembers the chunks this process
stored by the identity of the turn views they were read from, so a new turn's plan writes and even encodes only
the chunks that changed (the last one); in a fresh process :func:`recall_history` fills that memory from a plan
shown (not stored) with the chunks the store holds already, so the first new turn's store is no slower than the next.
:func:`read_history` rebuilds the same columns, and so the same items.

The same table keeps a plan's inputs' history keys (``plan_messages`` keys of ~48,000 messages, ~1.3 MB per plan
of a 10,000-turn session) by chunks of ``KEYS_PER_CHUNK`` messages (:func:`write_keys`, :func:`read_keys`).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from typing import Any, Callable, Iterator, Sequence

from ctxbench.records.errors import UnknownPlan
from ctxbench.records.history_items import (AtomChunk, AtomRow, ExcludedHistory, from_runs, runs,
                                            score_runs)
from ctxbench.store import db

ROWS_KEY_HEX = 24  # 96 bits of the sha256 of a chunk's session and text
ROWS_ZLIB_LEVEL = 1
KEYS_PER_CHUNK = 2048  # history messages per chunk of plan_messages keys: a new turn changes the last chunk only
ATOMS, KEYS = "atoms", "keys"  # the kinds of chunk

# v8 of the core component (``schema.MIGRATIONS``): the chunks plans share
TABLE = """
CREATE TABLE IF NOT EXISTS plan_chunks (
    key        TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    kind       TEXT NOT NULL,  -- 'atoms': rows of history atoms; 'keys': plan_messages keys of history messages
    data       BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS plan_chunks_by_session ON plan_chunks (session_id, kind);
"""

_Identity = tuple[str, str, tuple[int, ...]]


class StoredChunks:
    """The key of each chunk of atom rows stored by the last plan written, by its session and the identity of its
    owners (kept, so no id is reused while remembered). ``begin`` starts a plan's write, ``commit`` keeps what it
    stored once its transaction committed (a rolled-back write is forgotten at the next ``begin``)."""

    def __init__(self) -> None:
        self._last: dict[_Identity, tuple[tuple[object, ...], str]] = {}
        self._pending: dict[_Identity, tuple[tuple[object, ...], str]] = {}

    def begin(self) -> None:
        self._pending = {}

    def key(self, identity: _Identity) -> str | None:
        hit = self._last.get(identity)
        return hit[1] if hit is not None else None

    def stored(self, identity: _Identity, owners: tuple[object, ...], key: str) -> None:
        self._pending[identity] = (owners, key)

    def commit(self) -> None:
        if self._pending:  # a plan already stored, or one without history, leaves the memory as it was
            self._last = self._pending
        self._pending = {}


def chunk_text(rows: tuple[AtomRow, ...]) -> str:
    return json.dumps(rows, separators=(",", ":"))


def chunk_key(session_id: str, text: str) -> str:
    data = f"{session_id}\n{text}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:ROWS_KEY_HEX]


def write_history(conn: sqlite3.Connection, session_id: str, history: ExcludedHistory,
                  known: StoredChunks | None = None) -> str:
    """Store the chunks of ``history`` not stored yet; the JSON text of the rest, for the plan's result. A plan that
    left no history atom out stores no rows."""
    if not history.reasons:
        return '{"chunks":[],"skipped":[],"reasons":[[],[]],"details":[[],[]],"scores":[[],[]]}'
    keys = [_stored_chunk(conn, session_id, ATOMS, owners, text, known) for owners, text in _atom_chunks(history)]
    data = {"chunks": keys, "skipped": list(history.skipped), "reasons": runs(history.reasons),
            "details": runs(history.details), "scores": score_runs(history.scores)}
    return json.dumps(data, separators=(",", ":"))


def recall_history(conn: sqlite3.Connection, session_id: str, history: ExcludedHistory, known: StoredChunks) -> int:
    """Remember (in ``known``) each chunk of ``history``'s atom rows the store holds already; nothing is written.
    Returns how many it holds."""
    return sum(_stored_chunk(conn, session_id, ATOMS, owners, text, known, write=False) is not None
               for owners, text in _atom_chunks(history))


def _atom_chunks(history: ExcludedHistory) -> Iterator[tuple[tuple[object, ...], Callable[[], str]]]:
    """The owners of each chunk of ``history``'s atom rows and how to make its text."""
    for chunk in history.chunks:
        yield chunk.owners, lambda c=chunk: chunk_text(c.rows())


def read_history(conn: sqlite3.Connection, data: Any) -> ExcludedHistory:
    """The columns :func:`write_history` stored (``data``: its JSON, read)."""
    keys = list(data["chunks"])
    found = _read_chunks(conn, keys, "plan atom rows", lambda rows: tuple(
        (str(i), str(label), _int(tokens), tuple(map(_int, ids)), tuple(map(str, ext)))
        for i, label, tokens, ids, ext in rows))
    chunks = [AtomChunk((), rows=found[k]) for k in keys]
    return ExcludedHistory(chunks, tuple(data["skipped"]), from_runs(*data["reasons"]), from_runs(*data["details"]),
                           [float(s) for s in from_runs(*data["scores"])])


def _int(value: Any) -> int:
    if type(value) is not int:
        raise ValueError(f"expected an int in stored atom rows, got {value!r}")
    return value


def _stored_chunk(conn: sqlite3.Connection, session_id: str, kind: str, owners: tuple[Any, ...],
                  text: Callable[[], str], known: StoredChunks | None, *, write: bool = True) -> str | None:
    """The key of the chunk made from ``owners`` (its ``text()``), stored unless it is; a chunk of the very objects
    stored before (``known``) is not encoded or written again. Not ``write``: nothing is stored, and a chunk the
    store does not hold is None (and not remembered)."""
    identity = (session_id, kind, tuple(map(id, owners)))
    key = known.key(identity) if known is not None else None
    if key is None:
        data = text()
        key = chunk_key(session_id, data)
        if write:
            _insert(conn, key, session_id, kind, data)
        elif not _held(conn, key):
            return None
    if known is not None:
        known.stored(identity, owners, key)
    return key


def _read_chunks(conn: sqlite3.Connection, keys: Sequence[str], what: str, decode: Callable[[Any], Any]) -> dict:
    """``decode`` of each stored chunk of ``keys`` (its JSON, read), by key; UnknownPlan when one is missing."""
    found: dict[str, Any] = {}
    for part, marks in db.in_chunks(sorted(set(keys))):
        for r in conn.execute(f"SELECT key, data FROM plan_chunks WHERE key IN ({marks})", part):
            found[r["key"]] = decode(json.loads(zlib.decompress(r["data"])))
    missing = [k for k in keys if k not in found]
    if missing:
        raise UnknownPlan(f"{what} missing from the store: {', '.join(missing[:3])}")
    return found


def _insert(conn: sqlite3.Connection, key: str, session_id: str, kind: str, text: str) -> None:
    """Store a chunk unless its key is stored (an unchanged chunk in the first store of a process, whose memory of
    the chunks stored before is empty): compressed only when it is written."""
    if _held(conn, key):
        return
    conn.execute("INSERT OR IGNORE INTO plan_chunks (key, session_id, kind, data) VALUES (?, ?, ?, ?)",
                 (key, session_id, kind, zlib.compress(text.encode("ascii"), ROWS_ZLIB_LEVEL)))


def _held(conn: sqlite3.Connection, key: str) -> bool:
    return conn.execute("SELECT 1 FROM plan_chunks WHERE key = ?", (key,)).fetchone() is not None


def write_keys(conn: sqlite3.Connection, session_id: str, messages: Sequence[Any],
               keyed: Callable[[Sequence[Any]], list[str]], known: StoredChunks | None = None) -> dict[str, list[str]]:
    """Store the ``plan_messages`` keys of a plan's history messages by chunks of ``KEYS_PER_CHUNK``, each once; what
    the plan's inputs hold instead of the keys. ``keyed`` gives the keys of some of the messages (storing those not
    stored yet); a chunk of the very message records stored before (``known``) is not keyed, encoded or written
    again."""
    return {"chunks": [_stored_chunk(conn, session_id, KEYS, owners, text, known)
                       for owners, text in _key_chunks(messages, keyed)]}


def recall_keys(conn: sqlite3.Connection, session_id: str, messages: Sequence[Any],
                keyed: Callable[[Sequence[Any]], list[str]], known: StoredChunks) -> list[tuple[Any, ...]]:
    """Remember (in ``known``) each chunk of the keys of ``messages`` the store holds already (``keyed``: their keys,
    nothing stored); nothing is written. Returns the messages of each chunk it holds (stored with their keys)."""
    return [owners for owners, text in _key_chunks(messages, keyed)
            if _stored_chunk(conn, session_id, KEYS, owners, text, known, write=False) is not None]


def _key_chunks(messages: Sequence[Any], keyed: Callable[[Sequence[Any]], list[str]]
                ) -> Iterator[tuple[tuple[object, ...], Callable[[], str]]]:
    """The messages of each chunk of keys and how to make its text."""
    for start in range(0, len(messages), KEYS_PER_CHUNK):
        owners = tuple(messages[start:start + KEYS_PER_CHUNK])
        yield owners, lambda o=owners: json.dumps(keyed(o), separators=(",", ":"))


def read_keys(conn: sqlite3.Connection, data: Any) -> list[str]:
    """The keys :func:`write_keys` stored (``data``: what it returned), or ``data`` itself when it is the list of keys
    (as plans stored before chunks hold them)."""
    if isinstance(data, list):
        return data
    chunks = list(data["chunks"])
    found = _read_chunks(conn, chunks, "plan message keys", lambda keys: [str(k) for k in keys])
    return [k for chunk in chunks for k in found[chunk]]


def key_chunk_texts(conn: sqlite3.Connection, chunks: Sequence[str]) -> Iterator[str]:
    """The text of each of these chunks of message keys."""
    for part, marks in db.in_chunks(list(chunks)):
        for r in conn.execute(f"SELECT data FROM plan_chunks WHERE key IN ({marks})", part):
            yield zlib.decompress(r["data"]).decode("ascii")
