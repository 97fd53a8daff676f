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


class ProviderError(ValueError):
    """The LLM settings cannot make a client (unknown provider, missing model, a base URL that is no URL)."""


class EmbedderError(RuntimeError):
    """The embedding model cannot be used: missing, not what it claims to be, or failed to load."""


class RefusedRepository(ValueError):
    """A folder that is no repository to index: the home folder, the whole disk, the system's folders."""
