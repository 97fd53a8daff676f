"""The ``proxy_chains`` component of the store: the replies of proxied Responses API conversations, by the
id the upstream gave them, so a request that names one as ``previous_response_id`` (the upstream keeps the
conversation and the client sends only what is new) continues that reply's session.

- ``proxy_responses``: one row per reply with an id: the session it belongs to and the exchange it ended.

Rows go with their session (foreign key, ON DELETE CASCADE). :class:`ResponseChains` is the repository.
"""
from __future__ import annotations

from ctxbench.store import db
from ctxbench.store.clock import now_iso

COMPONENT = "proxy_chains"

_V1 = """
CREATE TABLE proxy_responses (
    response_id TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    exchange_id INTEGER NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX proxy_responses_by_session ON proxy_responses (session_id);
"""

MIGRATIONS: tuple[db.Migration, ...] = (_V1,)


class ResponseChains:
    """The ``proxy_responses`` table of one database."""

    def __init__(self, database: db.Connections) -> None:
        self._db = database

    def add(self, response_id: str, session_id: str, exchange_id: int) -> None:
        with self._db.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO proxy_responses (response_id, session_id, exchange_id, created_at) "
                         "VALUES (?, ?, ?, ?)", (response_id, session_id, exchange_id, now_iso()))

    def session_of(self, response_id: str) -> str | None:
        """The session of the reply the upstream named ``response_id``, or None when it is not known."""
        with self._db.connection() as conn:
            row = conn.execute("SELECT session_id FROM proxy_responses WHERE response_id = ?",
                               (response_id,)).fetchone()
        return row[0] if row else None
