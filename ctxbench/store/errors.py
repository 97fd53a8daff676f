"""Errors raised by the store for things the caller names but the database does not hold."""
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
