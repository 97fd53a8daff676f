"""Work that must not run twice at once on one database: an advisory lock file beside it.

``exclusive(conn, name, on_wait)`` holds ``<database>.<name>.lock`` (``fcntl.flock``) for the block. A
second process (or thread) asking for the same lock calls ``on_wait(holder)`` once — ``holder`` says
who holds it — and then waits its turn; the operating system releases the lock when its holder ends,
however it ends (``kill -9`` included), so a crashed run never blocks the next one. In-memory
databases use a process-wide lock per connection instead.
"""
from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

_THREAD_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _database_file(conn: sqlite3.Connection) -> Path | None:
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return Path(row[2]) if row[2] else None
    return None


def _thread_lock(key: tuple[str, str]) -> threading.Lock:
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())


@contextmanager
def exclusive(conn: sqlite3.Connection, name: str, on_wait: Callable[[str], None] | None = None) -> Iterator[bool]:
    """Hold the ``name`` lock of ``conn``'s database for the block; yields True when it had to wait first."""
    path = _database_file(conn)
    key = (str(path) if path is not None else f"memory:{id(conn)}", name)
    local = _thread_lock(key)  # threads of one process (flock is per open file, so they would not wait)
    waited = False
    if not local.acquire(blocking=False):
        waited = True
        if on_wait is not None:
            on_wait("another thread of this process")
        local.acquire()
    try:
        if path is None:
            yield waited
            return
        lock_path = path.with_name(f"{path.name}.{name}.lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not waited and on_wait is not None:
                    on_wait(_holder(fd))
                waited = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            try:
                yield waited
            finally:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    finally:
        local.release()


def _holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except OSError:
        pid = ""
    return f"process {pid}" if pid.isdigit() else "another process"
