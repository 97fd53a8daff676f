"""The ``proxy_billing`` component of the store: what each proxied request was billed, and what it takes to
price it and to calibrate the proxy's token counts.

- ``proxy_token_counts``: what an upstream's ``count_tokens`` endpoint answered for a request a client asked it
  about, beside the proxy's estimate of the same request (not an exchange: such requests are not recorded).
- ``proxy_billing``: one row per recorded exchange: the model, the request's estimated tokens as it went
  upstream (tiktoken, item by item; ``fixed``: those of its images, counted by the provider's rule), the blocks (in cache order) that carry an Anthropic ``cache_control``
  breakpoint, and once the reply ended, the usage the provider billed split as it bills it: uncached input,
  cache writes (5-minute, 1-hour), cache reads and output.

Rows go with their session (foreign key, ON DELETE CASCADE). :class:`Billing` is the repository.
"""
from __future__ import annotations

import json
import sqlite3

from ctxbench.records.proxy_cost import BilledUsage
from ctxbench.store import db
from ctxbench.store.clock import now_iso

COMPONENT = "proxy_billing"

_V1 = """
CREATE TABLE proxy_billing (
    exchange_id    INTEGER PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    model          TEXT NOT NULL DEFAULT '',
    estimated      INTEGER NOT NULL,
    breakpoints    TEXT NOT NULL DEFAULT '[]',
    input          INTEGER,
    cache_write    INTEGER,
    cache_write_1h INTEGER,
    cache_read     INTEGER,
    output         INTEGER
);
CREATE INDEX proxy_billing_by_model ON proxy_billing (model, exchange_id);
CREATE INDEX proxy_billing_by_session ON proxy_billing (session_id, exchange_id);

-- the token counts an upstream's count_tokens endpoint gave for requests a client asked it about, beside the
-- proxy's estimate of the same request: the exact calibration of the proxy's counts for that model
CREATE TABLE proxy_token_counts (
    n          INTEGER PRIMARY KEY AUTOINCREMENT,
    model      TEXT NOT NULL,
    estimated  INTEGER NOT NULL,
    counted    INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX proxy_token_counts_by_model ON proxy_token_counts (model, n);
"""

# the tokens of each request counted by the provider's own rule, not by the tokenizer (images): calibration leaves them
_V2 = """
ALTER TABLE proxy_billing ADD COLUMN fixed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE proxy_token_counts ADD COLUMN fixed INTEGER NOT NULL DEFAULT 0;
"""

MIGRATIONS: tuple[db.Migration, ...] = (_V1, _V2)


def _usage(r: sqlite3.Row) -> BilledUsage | None:
    if r["input"] is None:
        return None
    return BilledUsage(int(r["input"]), int(r["cache_write"] or 0), int(r["cache_write_1h"] or 0),
                       int(r["cache_read"] or 0), int(r["output"] or 0))


class Billing:
    """The ``proxy_billing`` table of one database."""

    def __init__(self, database: db.Connections) -> None:
        self._db = database

    def add(self, exchange_id: int, session_id: str, model: str, estimated: int, breakpoints: tuple[int, ...],
            fixed: int = 0) -> None:
        with self._db.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO proxy_billing (exchange_id, session_id, model, estimated, breakpoints, "
                         "fixed) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         (exchange_id, session_id, model, estimated, json.dumps(breakpoints), fixed))

    def set_usage(self, exchange_id: int, usage: BilledUsage) -> None:
        """The usage the provider billed for the exchange."""
        with self._db.transaction() as conn:
            conn.execute("UPDATE proxy_billing SET input = ?, cache_write = ?, cache_write_1h = ?, cache_read = ?, "
                         "output = ? WHERE exchange_id = ?",
                         (usage.input, usage.cache_write, usage.cache_write_1h, usage.cache_read, usage.output,
                          exchange_id))

    def session_usages(self, session_id: str, *, upto: int | None = None) -> tuple[tuple[str, BilledUsage], ...]:
        """(model, billed usage) of the conversation's exchanges with a reported usage (up to exchange ``upto``)."""
        with self._db.connection() as conn:
            rows = conn.execute("SELECT * FROM proxy_billing WHERE session_id = ? AND input IS NOT NULL "
                                "AND exchange_id <= ? ORDER BY exchange_id",
                                (session_id, upto if upto is not None else 2 ** 62)).fetchall()
        return tuple((str(r["model"]), u) for r in rows if (u := _usage(r)) is not None)

    def usage(self, exchange_id: int) -> BilledUsage | None:
        with self._db.connection() as conn:
            row = conn.execute("SELECT * FROM proxy_billing WHERE exchange_id = ?", (exchange_id,)).fetchone()
        return _usage(row) if row else None

    def model(self, exchange_id: int) -> str:
        with self._db.connection() as conn:
            row = conn.execute("SELECT model FROM proxy_billing WHERE exchange_id = ?", (exchange_id,)).fetchone()
        return str(row[0]) if row else ""

    def breakpoints(self, exchange_id: int) -> tuple[int, ...]:
        """The blocks of the request ``exchange_id`` that carried a ``cache_control`` breakpoint."""
        with self._db.connection() as conn:
            row = conn.execute("SELECT breakpoints FROM proxy_billing WHERE exchange_id = ?", (exchange_id,)).fetchone()
        return tuple(int(b) for b in json.loads(row[0])) if row else ()

    def samples(self, model: str, *, before: int | None = None,
                limit: int = 50) -> tuple[tuple[int, int, int], ...]:
        """(estimated, billed prompt, fixed) of the latest answered exchanges of ``model`` (before exchange
        ``before``); ``fixed``: the estimate's tokens counted by the provider's rule (images), not the tokenizer."""
        with self._db.connection() as conn:
            rows = conn.execute(
                "SELECT estimated, input + COALESCE(cache_write, 0) + COALESCE(cache_write_1h, 0) "
                "+ COALESCE(cache_read, 0) AS billed, fixed FROM proxy_billing WHERE model = ? AND input IS NOT NULL "
                "AND estimated > 0 AND exchange_id < ? AND input + COALESCE(cache_write, 0) + COALESCE(cache_write_1h, 0) "
                "+ COALESCE(cache_read, 0) > 0 ORDER BY exchange_id DESC LIMIT ?",
                (model, before if before is not None else 2 ** 62, limit)).fetchall()
        return tuple((int(e), int(b), int(f)) for e, b, f in rows)

    def add_count(self, model: str, estimated: int, counted: int, fixed: int = 0) -> None:
        with self._db.transaction() as conn:
            conn.execute("INSERT INTO proxy_token_counts (model, estimated, counted, created_at, fixed) "
                         "VALUES (?, ?, ?, ?, ?)", (model, estimated, counted, now_iso(), fixed))

    def counts(self, model: str, *, limit: int = 50) -> tuple[tuple[int, int, int], ...]:
        """(estimated, counted, fixed) of the latest count_tokens answers for ``model``."""
        with self._db.connection() as conn:
            rows = conn.execute("SELECT estimated, counted, fixed FROM proxy_token_counts WHERE model = ? "
                                "AND estimated > 0 AND counted > 0 "
                                "ORDER BY n DESC LIMIT ?", (model, limit)).fetchall()
        return tuple((int(e), int(c), int(f)) for e, c, f in rows)
