"""Work that must not run twice at once on one database: advisory lock files beside it.

:class:`FileLock` holds ``<database>.<name>.lock`` (``fcntl.flock``); ``exclusive(conn, name, on_wait)``
holds one for a block. A second process (or thread: each lock opens the file anew, and flock treats
two open files as two owners) asking for the same lock learns who holds it and waits its turn; the
operating system releases the lock when its holder ends, however it ends (``kill -9`` included), so a
crashed run never blocks the next one. In-memory databases use a process-wide lock instead.
"""
from __future__ import annotations

import fcntl
import os
import re
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from ctxbench.store.db import FILE_MODE, tighten_file

_MEMORY_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_MEMORY_GUARD = threading.Lock()
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def database_file(conn: sqlite3.Connection) -> Path | None:
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return Path(row[2]) if row[2] else None
    return None


class FileLock:
    """One named lock of a database file (``path`` None: an in-memory database, keyed by ``memory_key``)."""

    def __init__(self, path: Path | None, name: str, memory_key: str = "") -> None:
        self.name = _UNSAFE.sub("_", name)
        self.path = path.with_name(f"{path.name}.{self.name}.lock") if path is not None else None
        self._fd: int | None = None
        # the process id a holder that ended without releasing (kill -9, a power cut) left in the lock file, found
        # when this one took the lock: "" when the last holder released it (or there was none)
        self.left_by = ""
        self._memory: threading.Lock | None = None
        if path is None:
            with _MEMORY_GUARD:
                self._memory = _MEMORY_LOCKS.setdefault((memory_key, self.name), threading.Lock())

    def try_acquire(self) -> bool:
        """Take the lock if it is free; False when someone else holds it."""
        if self._memory is not None:
            return self._memory.acquire(blocking=False)
        assert self.path is not None and self._fd is None
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        tighten_file(self.path, fd)  # made by an older version, readable by every account
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        left = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        self.left_by = left
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return True

    def acquire(self, poll_s: float = 0.1, give_up: Callable[[], bool] | None = None) -> bool:
        """Wait for the lock (checking ``give_up`` every ``poll_s``); False when ``give_up`` said so first."""
        stop = threading.Event()
        while not self.try_acquire():
            if give_up is not None and give_up():
                return False
            stop.wait(poll_s)
        return True

    def holder(self) -> str:
        """Who holds the lock, as far as the lock file says."""
        if self.path is None:
            return "another thread of this process"
        try:
            pid = self.path.read_text().strip()
        except OSError:
            pid = ""
        if pid == str(os.getpid()):
            return "this process"
        return f"process {pid}" if pid.isdigit() else "another process"

    def release(self) -> None:
        if self._memory is not None:
            if self._memory.locked():
                self._memory.release()
            return
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def lock_for(conn: sqlite3.Connection, name: str) -> FileLock:
    return FileLock(database_file(conn), name, memory_key=f"memory:{id(conn)}")


@contextmanager
def exclusive(conn: sqlite3.Connection, name: str, on_wait: Callable[[str], None] | None = None) -> Iterator[bool]:
    """Hold the ``name`` lock of ``conn``'s database for the block; yields True when it had to wait first."""
    lock = lock_for(conn, name)
    waited = False
    if not lock.try_acquire():
        waited = True
        if on_wait is not None:
            on_wait(lock.holder())
        lock.acquire()
    try:
        yield waited
    finally:
        lock.release()
