"""Errors every layer may raise and every front end may catch: a name the store does not hold, a
setting the planner cannot use, a database that cannot be opened."""
from __future__ import annotations


class NotFound(LookupError):
    """Base: a session, branch, group, pin or plan id that does not exist."""

    def __str__(self) -> str:  # LookupError's str() quotes the message like a KeyError; keep it plain
        return str(self.args[0]) if self.args else ""


class UnknownSession(NotFound):
    pass


class UnknownBranch(NotFound):
    pass


class UnknownGroup(NotFound):
    pass


class UnknownPin(NotFound):
    pass


class UnknownPlan(NotFound):
    pass


class SettingsError(ValueError):
    """A session setting or plan option with a value the planner cannot use."""


class StoreError(RuntimeError):
    """The database cannot be opened or is from a newer ctxbench."""

    exit_code = 2  # a command ends with this when it meets one (the store given cannot be used)


class StoreFull(StoreError):
    """The disk (or the database's size limit) is full: the write was rolled back, the store is whole."""

    exit_code = 1  # nothing wrong with what was asked: run it again once there is room


class ProviderError(ValueError):
    """The LLM settings cannot make a client (unknown provider, missing model, a base URL that is no URL)."""


class EmbedderError(RuntimeError):
    """The embedding model cannot be used: missing, not what it claims to be, or failed to load."""


class RefusedRepository(ValueError):
    """A folder that is no repository to index: the home folder, the whole disk, the system's folders."""


SQLITE_FULL = 13  # SQLite's result code for "database or disk is full"


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk, or the database's size limit, is full (SQLITE_FULL, ENOSPC)."""
    import errno

    if getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL or "database or disk is full" in str(exc):
        return True
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC


def disk_full(database: str = "") -> StoreFull:
    """The one line a write that found the disk full ends with."""
    where = f" {database}" if database else ""
    return StoreFull(f"the disk is full: nothing more could be written to the database{where}; what was being "
                     "written is rolled back and the store is whole: free some space and run it again")
