"""The SQLite connection: one file, WAL mode, schema versioned per component, forward migrations.

Each component of the store (``core`` for sessions and messages, ``index`` for the code
index, ...) owns an ordered list of migrations; ``migrate`` applies the ones a database has
not seen, each in its own transaction, and records the version in ``schema_versions``.
"""
from __future__ import annotations

import os
import sqlite3
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Protocol, Sequence, Union

import platformdirs

from ctxbench.config import APP_NAME
from ctxbench.records.errors import StoreError, StoreFull, disk_full, is_disk_full

Migration = Union[str, Callable[[sqlite3.Connection], None]]


class Connections(Protocol):
    """What a repository needs of its database (``store.database.Database``): a connection for a block of
    work, and one inside a transaction (joining the caller's when one is open on the thread)."""

    def connection(self) -> ContextManager[sqlite3.Connection]: ...

    def transaction(self) -> ContextManager[sqlite3.Connection]: ...

SQL_PARAMS = 500  # values per IN (...) list (SQLite allows at most 32,766 variables per statement)

# how long a statement waits for another connection's write lock before "database is locked"
BUSY_TIMEOUT_S = 30.0

# the store holds what people paste into chat: it is the user's alone
FOLDER_MODE = 0o700  # every folder the store creates
FILE_MODE = 0o600  # the database, its -wal/-shm/-journal files and the lock files beside it
SIDE_FILES = ("", "-wal", "-shm", "-journal")
# a writing command (import, branch fork, compact) runs ``PRAGMA quick_check`` on a store up to this size before
# it writes (a bad page in the middle went unnoticed, and the command wrote on): about a second on this size
QUICK_CHECK_MAX_BYTES = 1 << 30  # SQLite makes the others with the database file's mode


class Connection(sqlite3.Connection):
    """A connection with its own transaction lock: threads sharing it take turns in :func:`transaction`,
    while other connections (the code index's, another database's) never wait for it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tx_lock = threading.RLock()


def connect(path: Path | str, *, readonly: bool = False, check_same_thread: bool = False) -> sqlite3.Connection:
    """Open the database (creating its folder), WAL mode, foreign keys on.

    Anything that keeps the file from being used as a ctxbench store (a folder that cannot be made,
    a file that is not a database, a locked or read-only file) is a :class:`StoreError` naming the path.
    """
    conn: sqlite3.Connection | None = None
    try:
        if str(path) != ":memory:":
            if not readonly:
                make_private_file(Path(path))
            tighten(Path(path))
        if readonly:
            conn = sqlite3.connect(f"file:{Path(path).as_posix()}?mode=ro", uri=True,
                                   check_same_thread=check_same_thread, factory=Connection)
        else:
            conn = sqlite3.connect(str(path), check_same_thread=check_same_thread, timeout=BUSY_TIMEOUT_S,
                                   factory=Connection)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        if not readonly and str(path) != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA busy_timeout = {round(BUSY_TIMEOUT_S * 1000)}")
        if not readonly:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        else:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a file that is not a database fails here
    except (sqlite3.Error, OSError) as exc:
        if conn is not None:
            conn.close()
        raise StoreError(f"cannot open database {path}: {_reason(exc)}") from exc
    return conn


def make_private_folder(folder: Path) -> None:
    """Create ``folder`` and any missing folder above it, each ``FOLDER_MODE`` (``mkdir(parents=True)`` would
    give the ones above the umask's mode)."""
    missing = [d for d in (folder, *folder.parents) if not d.exists()]
    for d in reversed(missing):
        try:
            os.mkdir(d, FOLDER_MODE)
        except FileExistsError:  # made by another process meanwhile
            continue
        os.chmod(d, FOLDER_MODE)  # the umask may have taken bits away, never added: make it exact


def make_private_file(path: Path) -> None:
    """Create the database file empty with ``FILE_MODE`` before SQLite opens it (SQLite gives its -wal and -shm
    files the database file's mode); an existing file is left to :func:`tighten`."""
    make_private_folder(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def tighten(path: Path) -> None:
    """Take the group's and others' bits off the database and its side files where they belong to this user (a
    store made by an older version was readable by every account)."""
    for suffix in SIDE_FILES:
        tighten_file(path.with_name(path.name + suffix))
    if path.parent == own_data_folder():  # ctxbench's own folder; a folder the user chose (--db) is left as it is
        tighten_file(path.parent)


def own_data_folder() -> Path:
    """The folder the default store lives in (``<user data dir>/ctxbench``)."""
    return Path(platformdirs.user_data_dir(APP_NAME))


def tighten_file(path: Path, fd: int | None = None) -> None:
    """``path`` (or the open ``fd``) without group and other bits, when this user owns it; else left alone."""
    try:
        info = os.fstat(fd) if fd is not None else os.stat(path)
    except OSError:
        return
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.getuid() or not mode & 0o077:
        return
    try:
        if fd is not None:
            os.fchmod(fd, mode & 0o700)
        else:
            os.chmod(path, mode & 0o700)
    except OSError:
        pass


def _reason(exc: BaseException) -> str:
    """One line saying why: the OS message for OS errors, SQLite's for the others."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} ({exc.filename})" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


def quick_check(conn: sqlite3.Connection, path: Path | str) -> None:
    """Refuse a damaged store before writing to it: SQLite's ``quick_check`` (every page's structure, not the
    indexes against their tables) on a store up to ``QUICK_CHECK_MAX_BYTES``; a :class:`StoreError` naming the
    first problem."""
    if str(path) == ":memory:":
        return
    try:
        size = sum(Path(f"{path}{suffix}").stat().st_size for suffix in ("", "-wal") if Path(f"{path}{suffix}").exists())
        if size > QUICK_CHECK_MAX_BYTES:
            return
        found = [row[0] for row in conn.execute("PRAGMA quick_check(1)")]
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"database {path} is damaged: {_reason(exc)}; nothing was written") from exc
    if found != ["ok"]:
        raise StoreError(f"database {path} is damaged ({' '.join(' '.join(found).split())}); nothing was written: "
                         f"restore a copy, or try `sqlite3 {path} .recover`")


def schema_version(conn: sqlite3.Connection, component: str) -> int:
    row = conn.execute("SELECT version FROM schema_versions WHERE component = ?", (component,)).fetchone()
    return int(row[0]) if row else 0


def migrate(conn: sqlite3.Connection, component: str, migrations: Sequence[Migration]) -> int:
    """Apply the migrations of ``component`` not yet applied; returns the resulting version."""
    current = schema_version(conn, component)
    if current > len(migrations):
        raise StoreError(
            f"database schema for {component!r} is version {current}, newer than this ctxbench knows "
            f"({len(migrations)}); upgrade ctxbench"
        )
    for version, step in enumerate(migrations[current:], start=current + 1):
        with transaction(conn):
            if schema_version(conn, component) >= version:
                continue  # another process applied it while this one waited for the write lock
            if callable(step):
                step(conn)
            else:
                for statement in _split_sql(step):
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_versions(component, version) VALUES (?, ?) "
                "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                (component, version),
            )
    return len(migrations)


def _split_sql(script: str) -> list[str]:
    """Split a migration script into complete statements (handles ';' inside strings and triggers)."""
    statements: list[str] = []
    buf = ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n\t;"):
                statements.append(buf.strip())
            buf = ""
    if buf.strip(" \n\t;"):
        statements.append(buf.strip())
    return statements


# transactions on connections not made by connect() (plain sqlite3 ones) share this lock
_SHARED_TX_LOCK = threading.RLock()


def _tx_lock(conn: sqlite3.Connection) -> Any:
    return getattr(conn, "tx_lock", None) or _SHARED_TX_LOCK


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE … COMMIT; rolls back on any error so nothing is half-written.

    Threads sharing ``conn`` take turns (its own lock); a transaction already open on the calling
    thread is joined (nested use).
    """
    with _tx_lock(conn):
        if conn.in_transaction:  # nested: join the outer transaction
            yield conn
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.commit()
        except BaseException as exc:
            if conn.in_transaction:
                conn.rollback()
            if is_disk_full(exc):
                raise full_error(conn) from exc
            raise


def full_error(conn: sqlite3.Connection) -> StoreFull:
    """The one line a write that found the disk full ends with, naming the database."""
    try:
        where = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    except sqlite3.Error:
        where = ""
    return disk_full(where)


def in_chunks(items: Sequence[Any]) -> Iterator[tuple[Sequence[Any], str]]:
    """``items`` in slices of at most ``SQL_PARAMS``, each with its ``?,?,…`` placeholders for ``IN (...)``."""
    for start in range(0, len(items), SQL_PARAMS):
        chunk = items[start : start + SQL_PARAMS]
        yield chunk, ",".join("?" * len(chunk))
