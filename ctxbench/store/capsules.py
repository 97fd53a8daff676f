"""The ``capsules`` component of the store: capsules of code (seed 002) and their keyword index.

- ``capsules``: one row per (repository root, kind, subject): the text, its source (``extractive`` or
  ``model:NAME``), confidence, when it was generated, the content hash of every file it covers
  (``files``, JSON ``[[path, sha], …]``) and, once the code index has seen a covered file change, the
  files that changed (``stale_files``) and when (``stale_at``). Writing a capsule again (a rebuild)
  makes it fresh.
- ``capsule_state``: per repository a stamp bumped on every change, so a loaded code index knows when its
  capsules are out of date, and the digest of the capsules the keyword rows were built from.
- ``capsule_fts``: FTS5 rows over each capsule's text (rowid = capsule id); the text processing lives
  in :mod:`ctxbench.retrieval.capsules`, this module is its SQL.

:class:`Capsules` is the repository the service uses; the module-level functions take a connection
(the code index marks capsules stale inside its own transaction).
"""
from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Iterable, Mapping, Sequence

from ctxbench.records.capsules import Capsule
from ctxbench.records.errors import NotFound
from ctxbench.store import db
from ctxbench.store.clock import now_iso

COMPONENT = "capsules"

_V1 = """
CREATE TABLE capsules (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    repo         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('module', 'process')),
    subject      TEXT NOT NULL,
    title        TEXT NOT NULL,
    text         TEXT NOT NULL,
    source       TEXT NOT NULL,
    confidence   REAL NOT NULL,
    generated_at TEXT NOT NULL,
    files        TEXT NOT NULL,
    stale_files  TEXT NOT NULL DEFAULT '[]',
    stale_at     TEXT NOT NULL DEFAULT '',
    UNIQUE (repo, kind, subject)
);
CREATE INDEX capsules_by_repo ON capsules (repo, kind, subject);

CREATE TABLE capsule_state (
    repo        TEXT PRIMARY KEY,
    stamp       INTEGER NOT NULL DEFAULT 0,
    fts_digest  TEXT NOT NULL DEFAULT ''
);

CREATE VIRTUAL TABLE capsule_fts USING fts5 (repo UNINDEXED, title, text, tokenize = 'porter unicode61');
"""

MIGRATIONS: tuple[db.Migration, ...] = (_V1,)


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Bring the component up to date on a connection that did not come from a Database (the code index's)."""
    db.migrate(conn, COMPONENT, MIGRATIONS)


def _capsule(r: sqlite3.Row) -> Capsule:
    return Capsule(id=int(r["id"]), repo=r["repo"], kind=r["kind"], subject=r["subject"], title=r["title"],
                   text=r["text"], source=r["source"], confidence=float(r["confidence"]),
                   generated_at=r["generated_at"], files=tuple((p, h) for p, h in json.loads(r["files"])),
                   stale_files=tuple(json.loads(r["stale_files"])), stale_at=r["stale_at"])


def _bump(conn: sqlite3.Connection, repo: str) -> None:
    conn.execute("INSERT INTO capsule_state (repo, stamp) VALUES (?, 1) "
                 "ON CONFLICT(repo) DO UPDATE SET stamp = stamp + 1", (repo,))


def stamp(conn: sqlite3.Connection, repo: str) -> int:
    """Bumped on every change to the repository's capsules (0: it never had one)."""
    try:
        row = conn.execute("SELECT stamp FROM capsule_state WHERE repo = ?", (repo,)).fetchone()
    except sqlite3.OperationalError:  # the component's tables do not exist on this connection yet
        return 0
    return int(row[0]) if row else 0


def capsules_of(conn: sqlite3.Connection, repo: str, *, stale: bool | None = None) -> tuple[Capsule, ...]:
    """The repository's capsules (``stale``: only stale ones, only fresh ones, or all), by kind and subject."""
    try:
        rows = conn.execute("SELECT * FROM capsules WHERE repo = ? ORDER BY kind, subject", (repo,)).fetchall()
    except sqlite3.OperationalError:
        return ()
    found = tuple(_capsule(r) for r in rows)
    return found if stale is None else tuple(c for c in found if c.stale == stale)


def put(conn: sqlite3.Connection, capsule: Capsule) -> int:
    """Store ``capsule`` (fresh), replacing the one of the same repository, kind and subject; its id."""
    row = conn.execute(
        "INSERT INTO capsules (repo, kind, subject, title, text, source, confidence, generated_at, files) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(repo, kind, subject) DO UPDATE SET title = excluded.title, text = excluded.text, "
        "source = excluded.source, confidence = excluded.confidence, generated_at = excluded.generated_at, "
        "files = excluded.files, stale_files = '[]', stale_at = '' RETURNING id",
        (capsule.repo, capsule.kind, capsule.subject, capsule.title, capsule.text, capsule.source,
         capsule.confidence, capsule.generated_at or now_iso(), json.dumps([list(f) for f in capsule.files])),
    ).fetchone()
    _bump(conn, capsule.repo)
    return int(row[0])


def remove(conn: sqlite3.Connection, repo: str, ids: Iterable[int]) -> int:
    wanted = list(ids)
    removed = 0
    for chunk, marks in db.in_chunks(wanted):
        removed += conn.execute(f"DELETE FROM capsules WHERE repo = ? AND id IN ({marks})", (repo, *chunk)).rowcount
    if removed:
        _bump(conn, repo)
    return removed


def mark_stale(conn: sqlite3.Connection, repo: str, shas: Mapping[str, str]) -> tuple[Capsule, ...]:
    """Compare every capsule of ``repo`` with the files as indexed now (path -> content hash): a capsule is
    stale while a covered file's hash differs or the file is gone, fresh again if the content comes back.
    Returns the capsules that became stale in this call."""
    ensure_schema(conn)
    became: list[Capsule] = []
    changed = False
    for capsule in capsules_of(conn, repo):
        differs = tuple(path for path, sha in capsule.files if shas.get(path) != sha)
        if differs == capsule.stale_files:
            continue
        changed = True
        when = capsule.stale_at if (differs and capsule.stale_at) else (now_iso() if differs else "")
        conn.execute("UPDATE capsules SET stale_files = ?, stale_at = ? WHERE id = ?",
                     (json.dumps(list(differs)), when, capsule.id))
        if differs and not capsule.stale:
            became.append(dataclasses.replace(capsule, stale_files=differs, stale_at=when))
    if changed:
        _bump(conn, repo)
    return tuple(became)


# -- the keyword rows ------------------------------------------------------------------------------------
def fts_digest(conn: sqlite3.Connection, repo: str) -> str:
    row = conn.execute("SELECT fts_digest FROM capsule_state WHERE repo = ?", (repo,)).fetchone()
    return str(row[0]) if row else ""


def replace_fts(conn: sqlite3.Connection, repo: str, rows: Sequence[tuple[int, str, str]], digest: str) -> None:
    """Rewrite the repository's keyword rows, ``(capsule id, title words, text words)`` each."""
    with db.transaction(conn):
        conn.execute("DELETE FROM capsule_fts WHERE repo = ?", (repo,))
        conn.executemany("INSERT INTO capsule_fts (rowid, repo, title, text) VALUES (?, ?, ?, ?)",
                         [(cid, repo, title, text) for cid, title, text in rows])
        conn.execute("INSERT INTO capsule_state (repo, fts_digest) VALUES (?, ?) "
                     "ON CONFLICT(repo) DO UPDATE SET fts_digest = excluded.fts_digest", (repo, digest))


def search_fts(conn: sqlite3.Connection, repo: str, match: str, limit: int) -> list[tuple[int, float]]:
    """``(capsule id, relevance)`` of the rows matching ``match`` (already quoted), best first."""
    if not match:
        return []
    try:
        rows = conn.execute("SELECT rowid, bm25(capsule_fts, 0.0, 2.0, 1.0) AS rank FROM capsule_fts "
                            "WHERE capsule_fts MATCH ? AND repo = ? ORDER BY rank LIMIT ?",
                            (match, repo, limit)).fetchall()
    except sqlite3.OperationalError:
        return []
    return [(int(r[0]), -float(r[1])) for r in rows]


class Capsules:
    """Capsules of one database's indexed repositories."""

    def __init__(self, database: db.Connections) -> None:
        self._db = database

    def repos(self) -> tuple[str, ...]:
        """The repositories that have capsules."""
        with self._db.connection() as conn:
            return tuple(r[0] for r in conn.execute("SELECT DISTINCT repo FROM capsules ORDER BY repo"))

    def list(self, repo: str | None = None, *, stale: bool | None = None) -> tuple[Capsule, ...]:
        """The capsules of ``repo`` (every repository's when None), filtered by ``stale`` when given."""
        with self._db.connection() as conn:
            repos = (repo,) if repo is not None else self.repos()
            return tuple(c for r in repos for c in capsules_of(conn, r, stale=stale))

    def get(self, capsule_id: int) -> Capsule:
        with self._db.connection() as conn:
            row = conn.execute("SELECT * FROM capsules WHERE id = ?", (capsule_id,)).fetchone()
        if row is None:
            raise NotFound(f"no capsule c{capsule_id}")
        return _capsule(row)

    def save(self, capsules: Sequence[Capsule]) -> tuple[Capsule, ...]:
        """Store ``capsules`` together (each replaces its repository's capsule of the same subject), fresh."""
        with self._db.transaction() as conn:
            ids = [put(conn, c) for c in capsules]
            return tuple(_capsule(conn.execute("SELECT * FROM capsules WHERE id = ?", (i,)).fetchone()) for i in ids)

    def remove(self, repo: str, ids: Iterable[int]) -> int:
        with self._db.transaction() as conn:
            return remove(conn, repo, ids)
