"""Store component ``vectors``: the embedding cache and the FAISS index files of each repository.

``card_vectors`` caches one vector per (content hash, embedder key), so unchanged text is never
embedded twice (cards of the code index and, with the same table, turns of the semantic history
strategy); ``vector_indexes`` names the FAISS file built for a repository's card set and model, and
the digest of that card set, so an unchanged index is read from its file instead of rebuilt. The FAISS
logic lives in :mod:`ctxbench.retrieval.vectors`; this module is its SQL.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ctxbench.store.db import Connections, migrate, transaction

COMPONENT = "vectors"
MIGRATIONS = (
    """
    CREATE TABLE card_vectors (
        card_hash TEXT NOT NULL,
        model TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (card_hash, model)
    ) WITHOUT ROWID;
    CREATE TABLE vector_indexes (
        repo TEXT NOT NULL,
        model TEXT NOT NULL,
        card_set TEXT NOT NULL,
        kind TEXT NOT NULL,
        count INTEGER NOT NULL,
        file TEXT NOT NULL,
        PRIMARY KEY (repo, model)
    );
    """,
)
_SQL_PARAMS = 500  # hashes per IN (...) query
# what a turn's model key holds (``retrieval.history_vectors.cache_key``): those rows are not card vectors
TURN_KEY_MARK = "|turn-"
# what a single message's model key holds (``retrieval.history_vectors.message_cache_key``): not card vectors either
MESSAGE_KEY_MARK = "|msg-"
# what a capsule's model key holds (``retrieval.capsules.vector_key``): those rows are not card vectors either
CAPSULE_KEY_MARK = "|capsule-"


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Bring the component up to date on a connection that did not come from a Database (tests, tools)."""
    migrate(conn, COMPONENT, MIGRATIONS)


def _blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def load_vectors(conn: sqlite3.Connection, hashes: Iterable[str], key: str) -> dict[str, np.ndarray]:
    """Cached vectors for the given content hashes under the (full) model key."""
    ensure_schema(conn)
    wanted = list(dict.fromkeys(hashes))
    found: dict[str, np.ndarray] = {}
    for start in range(0, len(wanted), _SQL_PARAMS):
        chunk = wanted[start:start + _SQL_PARAMS]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
            f"SELECT card_hash, vector FROM card_vectors WHERE model = ? AND card_hash IN ({marks})", (key, *chunk)
        ):
            found[row[0]] = np.frombuffer(row[1], dtype=np.float32)
    return found


def save_vectors(conn: sqlite3.Connection, rows: Sequence[tuple[str, np.ndarray]], key: str) -> None:
    """Cache (content hash, vector) rows under the (full) model key, in one transaction."""
    ensure_schema(conn)
    if not rows:
        return
    with transaction(conn):
        conn.executemany(
            "INSERT OR REPLACE INTO card_vectors(card_hash, model, dim, vector) VALUES (?, ?, ?, ?)",
            [(h, key, int(np.asarray(v).shape[-1]), _blob(v)) for h, v in rows],
        )


def prune_card_vectors(conn: sqlite3.Connection) -> int:
    """Delete the cached card vectors no card of any repository indexed here has any more (a card whose
    text changed left its old vector behind); turn, message and capsule vectors are kept (an index run used to
    delete every message vector of the fused strategy, so the history was embedded again after it). Returns how
    many were deleted."""
    ensure_schema(conn)
    with transaction(conn):
        try:
            cursor = conn.execute(
                "DELETE FROM card_vectors WHERE instr(model, ?) = 0 AND instr(model, ?) = 0 AND instr(model, ?) = 0 "
                "AND card_hash NOT IN (SELECT card_hash FROM code_cards)",
                (TURN_KEY_MARK, MESSAGE_KEY_MARK, CAPSULE_KEY_MARK))
        except sqlite3.OperationalError:  # no code index in this database
            return 0
        return cursor.rowcount


def database_file(conn: sqlite3.Connection) -> Path | None:
    """The main database's file, or None for an in-memory database."""
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return Path(row[2]) if row[2] else None
    return None


@dataclass(frozen=True)
class IndexRow:
    """The FAISS file last built for a repository and model: the card set it holds, its kind and path."""

    card_set: str
    kind: str
    file: Path


def index_row(conn: sqlite3.Connection, repo: str, key: str) -> IndexRow | None:
    ensure_schema(conn)
    row = conn.execute("SELECT card_set, kind, file FROM vector_indexes WHERE repo = ? AND model = ?",
                       (repo, key)).fetchone()
    return IndexRow(row[0], row[1], Path(row[2])) if row is not None else None


def save_index_row(conn: sqlite3.Connection, repo: str, key: str, card_set: str, kind: str, count: int,
                   file: Path) -> None:
    with transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO vector_indexes(repo, model, card_set, kind, count, file) VALUES (?,?,?,?,?,?)",
            (repo, key, card_set, kind, count, str(file)),
        )


class VectorCache:
    """The vector cache as a repository: ``load`` / ``save`` on connections the database lends."""

    def __init__(self, database: Connections) -> None:
        self._db = database

    def load(self, hashes: Iterable[str], key: str) -> dict[str, np.ndarray]:
        with self._db.connection() as conn:
            return load_vectors(conn, hashes, key)

    def save(self, rows: Sequence[tuple[str, np.ndarray]], key: str) -> None:
        with self._db.transaction() as conn:
            save_vectors(conn, rows, key)

    def copy_out(self, target: Path) -> int:
        with self._db.connection() as conn:
            return copy_vectors_out(conn, target)

    def copy_in(self, source: Path) -> int:
        with self._db.transaction() as conn:
            return copy_vectors_in(conn, source)


def copy_vectors_out(conn: sqlite3.Connection, target: Path) -> int:
    """Write every cached vector of this database into the SQLite file ``target`` (made 0600, replaced whole: a
    reader never sees half of it); returns how many rows it holds (0: this database has none, nothing written)."""
    import os

    ensure_schema(conn)
    rows = conn.execute("SELECT card_hash, model, dim, vector FROM card_vectors").fetchall()
    if not rows:
        return 0  # nothing to keep: ``target`` is left as it was
    partial = target.with_name(target.name + ".part")
    partial.unlink(missing_ok=True)
    os.close(os.open(partial, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))  # the user's alone from the start
    out = sqlite3.connect(partial)
    try:
        out.execute("CREATE TABLE card_vectors (card_hash TEXT NOT NULL, model TEXT NOT NULL, dim INTEGER NOT NULL, "
                    "vector BLOB NOT NULL, PRIMARY KEY (card_hash, model)) WITHOUT ROWID")  # the table alone
        with transaction(out):
            out.executemany("INSERT OR REPLACE INTO card_vectors(card_hash, model, dim, vector) VALUES (?, ?, ?, ?)",
                            rows)
    finally:
        out.close()
    os.replace(partial, target)
    return len(rows)


def copy_vectors_in(conn: sqlite3.Connection, source: Path) -> int:
    """Add the cached vectors of the SQLite file ``source`` (written by :func:`copy_vectors_out`) to this database's
    cache; rows it has already are kept. Returns how many were added (0 for a file that is not such a cache)."""
    ensure_schema(conn)
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        rows = src.execute("SELECT card_hash, model, dim, vector FROM card_vectors").fetchall()
    except sqlite3.Error:
        return 0
    finally:
        src.close()
    with transaction(conn):
        before = conn.total_changes
        conn.executemany("INSERT OR IGNORE INTO card_vectors(card_hash, model, dim, vector) VALUES (?, ?, ?, ?)", rows)
        return conn.total_changes - before
