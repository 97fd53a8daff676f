"""One database file and the only place its connections are opened.

A :class:`Database` brings every store component's schema up to date when it opens (``core``,
``index``, ``keyword``, ``vectors``, ``llm``), then lends connections:

- :meth:`Database.connection` lends one for the length of a ``with`` block. While the block is
  open the connection is bound to the calling thread, so every repository call the thread makes
  inside it (however nested) uses the same connection; idle connections go back to a small pool
  and keep their page cache warm. Threads never share a connection at the same time: SQLite's own
  locking (WAL: readers never wait, one writer at a time, a busy timeout) is what serialises them.
- :meth:`Database.transaction` is a connection block inside ``BEGIN IMMEDIATE … COMMIT``; one
  already open on the thread is joined, so a unit of work spanning several repositories commits
  or rolls back as one.
- :meth:`Database.dedicated_connection` hands out a long-lived connection of its own (the code
  index and its retriever, which work off the UI thread for minutes), closed with the database.
"""
from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ctxbench.store import db
from ctxbench.store.schema import components

POOL_SIZE = 4  # idle connections kept per database; more threads at once open (and then close) extra ones


class Database:
    """A SQLite file with every ctxbench table, lending connections to threads."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._idle: list[sqlite3.Connection] = []
        self._dedicated: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._bound = threading.local()
        self._closed = False
        first = self._open()  # raises StoreError for a path that cannot be a ctxbench store
        for component, migrations in components():
            db.migrate(first, component, migrations)
        self._idle.append(first)

    def _open(self) -> sqlite3.Connection:
        return db.connect(self.path)

    # -- lending ------------------------------------------------------------------------------------
    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """The calling thread's connection for the length of the block (nested blocks share it)."""
        bound: sqlite3.Connection | None = getattr(self._bound, "conn", None)
        if bound is not None:
            yield bound
            return
        conn = self._checkout()
        self._bound.conn = conn
        try:
            yield conn
        finally:
            self._bound.conn = None
            self._checkin(conn)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A connection block inside one transaction (joined when the thread already has one open)."""
        with self.connection() as conn, db.transaction(conn):
            yield conn

    def quick_check(self) -> None:
        """Refuse (StoreError) a store with a damaged page, before a command writes to it (``db.quick_check``)."""
        with self.connection() as conn:
            db.quick_check(conn, self.path)

    def dedicated_connection(self) -> sqlite3.Connection:
        """A connection of the caller's own for long work in another thread; closed with the database."""
        conn = self._open()
        with self._pool_lock:
            self._dedicated.append(conn)
        return conn

    def _checkout(self) -> sqlite3.Connection:
        with self._pool_lock:
            if self._closed:
                raise db.StoreError(f"database {self.path} is closed")
            if self._idle:
                return self._idle.pop()
        return self._open()

    def _checkin(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:  # a block left mid-transaction by a bug: never hand it to another thread
            conn.rollback()
        with self._pool_lock:
            if not self._closed and len(self._idle) < POOL_SIZE:
                self._idle.append(conn)
                return
        conn.close()

    # -- closing ------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the idle and dedicated connections; connections lent right now close when returned."""
        with self._pool_lock:
            self._closed = True
            conns = self._idle + self._dedicated
            self._idle, self._dedicated = [], []
        for conn in conns:
            conn.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
