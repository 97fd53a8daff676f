"""The ``proxy_cache`` component of the store: what each proxied request could reuse of the provider's prompt
cache, estimated and reported.

- ``proxy_cache_reports``: one row per recorded exchange: the request as it went upstream in blocks (tool
  definitions, system blocks, messages), each block's hash and tokens (its ``fingerprint``); how many blocks,
  and tokens, are an unchanged prefix of the conversation's previous answered request (what a provider that
  caches prefixes can read from its cache); and the cached tokens the provider reported
  (``cache_read_input_tokens``, ``cached_tokens``, ``cachedContentTokenCount``) once the reply ended.

Rows go with their session (foreign key, ON DELETE CASCADE). :class:`CacheReports` is the repository.
"""
from __future__ import annotations

import json
import sqlite3

from ctxbench.records.proxy import CacheReport
from ctxbench.store import db

COMPONENT = "proxy_cache"

_V1 = """
CREATE TABLE proxy_cache_reports (
    exchange_id     INTEGER PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    fingerprint     TEXT NOT NULL,
    prefix_blocks   INTEGER NOT NULL,
    prefix_tokens   INTEGER NOT NULL,
    request_tokens  INTEGER NOT NULL,
    first_request   INTEGER NOT NULL,
    reported_cached INTEGER,
    reported_prompt INTEGER
);
CREATE INDEX proxy_cache_reports_by_session ON proxy_cache_reports (session_id, exchange_id);
"""

MIGRATIONS: tuple[db.Migration, ...] = (_V1,)


def _report(r: sqlite3.Row) -> CacheReport:
    return CacheReport(exchange_id=int(r["exchange_id"]), prefix_blocks=int(r["prefix_blocks"]),
                       prefix_tokens=int(r["prefix_tokens"]), request_tokens=int(r["request_tokens"]),
                       first_request=bool(r["first_request"]), reported_cached=r["reported_cached"],
                       reported_prompt=r["reported_prompt"])


class CacheReports:
    """The ``proxy_cache_reports`` table of one database."""

    def __init__(self, database: db.Connections) -> None:
        self._db = database

    def add(self, session_id: str, report: CacheReport, fingerprint: tuple[tuple[str, int], ...]) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO proxy_cache_reports (exchange_id, session_id, fingerprint, prefix_blocks, "
                "prefix_tokens, request_tokens, first_request, reported_cached, reported_prompt) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (report.exchange_id, session_id, json.dumps([list(b) for b in fingerprint]), report.prefix_blocks,
                 report.prefix_tokens, report.request_tokens, int(report.first_request), report.reported_cached,
                 report.reported_prompt))

    def fingerprint(self, exchange_id: int) -> tuple[tuple[str, int], ...] | None:
        """The blocks (hash, tokens) of the request ``exchange_id`` sent upstream, or None when not recorded."""
        with self._db.connection() as conn:
            row = conn.execute("SELECT fingerprint FROM proxy_cache_reports WHERE exchange_id = ?",
                               (exchange_id,)).fetchone()
        return tuple((str(h), int(t)) for h, t in json.loads(row[0])) if row else None

    def set_reported(self, exchange_id: int, cached: int | None, prompt: int | None) -> None:
        with self._db.transaction() as conn:
            conn.execute("UPDATE proxy_cache_reports SET reported_cached = ?, reported_prompt = ? WHERE exchange_id = ?",
                         (cached, prompt, exchange_id))

    def get(self, exchange_id: int) -> CacheReport | None:
        with self._db.connection() as conn:
            row = conn.execute("SELECT * FROM proxy_cache_reports WHERE exchange_id = ?", (exchange_id,)).fetchone()
        return _report(row) if row else None
