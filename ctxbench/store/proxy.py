"""The ``proxy`` component of the store: proxied conversations, their exchanges, and the user's drops of
single items in them.

- ``proxy_conversations``: one row per proxied conversation (a session): the hashes of the latest
  request's messages and the stored messages each became (how the next request is recognised by its
  growing prefix), the last reply (how a compacted conversation is recognised), and the user's switch
  back to pass-through;
- ``proxy_exchanges``: one row per request: the original body and, when steering changed it, the body
  that went upstream (both zlib-compressed; request headers are never stored), the plan, what steering
  changed and why, and how it ended: HTTP status, outcome, error excerpt, reply text and reported usage;
- ``proxy_drops``: items of a proxied conversation the user dropped (a tool call with its result, a file),
  finer than the turn-level drops of ``messages.status``.

Rows go with their session (foreign keys, ON DELETE CASCADE). :class:`ProxyStore` is the repository.
"""
from __future__ import annotations

import json
import sqlite3
import zlib
from typing import Sequence

from ctxbench.records.errors import NotFound
from ctxbench.records.proxy import ConversationState, ProxyExchange
from ctxbench.store import db
from ctxbench.store.clock import now_iso

COMPONENT = "proxy"
ZLIB_LEVEL = 6  # request bodies are written once and read rarely

_V1 = """
CREATE TABLE proxy_conversations (
    session_id  TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    provider    TEXT NOT NULL,
    first_hash  TEXT NOT NULL,
    hashes      TEXT NOT NULL,
    message_ids TEXT NOT NULL,
    groups      TEXT NOT NULL,
    last_reply  TEXT NOT NULL DEFAULT '',
    passthrough INTEGER NOT NULL DEFAULT 0,
    requests    INTEGER NOT NULL DEFAULT 0,
    updated_at  TEXT NOT NULL
);
CREATE INDEX proxy_conversations_by_first ON proxy_conversations (provider, first_hash);
CREATE INDEX proxy_conversations_by_time ON proxy_conversations (updated_at);

CREATE TABLE proxy_exchanges (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id          TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    plan_id             TEXT NOT NULL DEFAULT '',
    provider            TEXT NOT NULL,
    path                TEXT NOT NULL,
    model               TEXT NOT NULL DEFAULT '',
    stream              INTEGER NOT NULL DEFAULT 0,
    steered             INTEGER NOT NULL DEFAULT 0,
    changes             TEXT NOT NULL DEFAULT '[]',
    request             BLOB NOT NULL,
    upstream_request    BLOB,
    status              INTEGER,
    outcome             TEXT NOT NULL DEFAULT 'pending'
                        CHECK (outcome IN ('pending', 'ok', 'upstream_error', 'upstream_down', 'cut', 'client_gone')),
    error               TEXT NOT NULL DEFAULT '',
    reply               TEXT NOT NULL DEFAULT '',
    reply_cut           INTEGER NOT NULL DEFAULT 0,
    reported_prompt     INTEGER,
    reported_completion INTEGER,
    estimated           INTEGER NOT NULL DEFAULT 0,
    created_at          TEXT NOT NULL,
    finished_at         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX proxy_exchanges_by_session ON proxy_exchanges (session_id, id);

CREATE TABLE proxy_drops (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    item_id    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, item_id)
);
"""

MIGRATIONS: tuple[db.Migration, ...] = (_V1,)

_EXCHANGE_COLUMNS = (
    "id, session_id, plan_id, provider, path, model, stream, steered, changes, status, outcome, error, reply, "
    "reply_cut, reported_prompt, reported_completion, estimated, created_at, finished_at"
)


def _pack(body: bytes) -> bytes:
    return zlib.compress(body, ZLIB_LEVEL)


def _exchange(r: sqlite3.Row) -> ProxyExchange:
    return ProxyExchange(
        id=int(r["id"]), session_id=r["session_id"], plan_id=r["plan_id"], provider=r["provider"], path=r["path"],
        model=r["model"], stream=bool(r["stream"]), steered=bool(r["steered"]),
        changes=tuple(json.loads(r["changes"])), status=r["status"], outcome=r["outcome"], error=r["error"],
        reply=r["reply"], reply_cut=bool(r["reply_cut"]), reported_prompt=r["reported_prompt"],
        reported_completion=r["reported_completion"], estimated=int(r["estimated"]), created_at=r["created_at"],
        finished_at=r["finished_at"])


def _conversation(r: sqlite3.Row) -> ConversationState:
    return ConversationState(
        session_id=r["session_id"], provider=r["provider"], hashes=tuple(json.loads(r["hashes"])),
        message_ids=tuple(tuple(ids) for ids in json.loads(r["message_ids"])),
        groups=tuple(json.loads(r["groups"])), last_reply=r["last_reply"], passthrough=bool(r["passthrough"]),
        requests=int(r["requests"]), updated_at=r["updated_at"])


class ProxyStore:
    """The ``proxy`` tables of one database."""

    def __init__(self, database: db.Connections) -> None:
        self._db = database

    # -- conversations ------------------------------------------------------------------------------
    def candidates(self, provider: str, first_hash: str, limit: int) -> tuple[ConversationState, ...]:
        """Conversations of ``provider`` whose history starts with the message hashed ``first_hash``,
        most recently active first."""
        with self._db.connection() as conn:
            rows = conn.execute(
                "SELECT * FROM proxy_conversations WHERE provider = ? AND first_hash = ? "
                "ORDER BY updated_at DESC, rowid DESC LIMIT ?", (provider, first_hash, limit)).fetchall()
        return tuple(_conversation(r) for r in rows)

    def recent(self, provider: str, limit: int) -> tuple[ConversationState, ...]:
        with self._db.connection() as conn:
            rows = conn.execute(
                "SELECT * FROM proxy_conversations WHERE provider = ? ORDER BY updated_at DESC, rowid DESC LIMIT ?",
                (provider, limit)).fetchall()
        return tuple(_conversation(r) for r in rows)

    def conversation(self, session_id: str) -> ConversationState | None:
        with self._db.connection() as conn:
            row = conn.execute("SELECT * FROM proxy_conversations WHERE session_id = ?", (session_id,)).fetchone()
        return _conversation(row) if row else None

    def latest_session(self) -> str | None:
        """The proxied conversation that had a request last."""
        with self._db.connection() as conn:
            row = conn.execute(
                "SELECT session_id FROM proxy_conversations ORDER BY updated_at DESC, rowid DESC LIMIT 1").fetchone()
        return row[0] if row else None

    def save_conversation(self, state: ConversationState) -> None:
        first = state.hashes[0] if state.hashes else ""
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO proxy_conversations (session_id, provider, first_hash, hashes, message_ids, groups, "
                "last_reply, passthrough, requests, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET provider = excluded.provider, first_hash = excluded.first_hash, "
                "hashes = excluded.hashes, message_ids = excluded.message_ids, groups = excluded.groups, "
                "last_reply = excluded.last_reply, requests = excluded.requests, updated_at = excluded.updated_at",
                (state.session_id, state.provider, first, json.dumps(list(state.hashes)),
                 json.dumps([list(ids) for ids in state.message_ids]), json.dumps(list(state.groups)),
                 state.last_reply, int(state.passthrough), state.requests, now_iso()))

    def set_last_reply(self, session_id: str, reply: str) -> None:
        with self._db.transaction() as conn:
            conn.execute("UPDATE proxy_conversations SET last_reply = ? WHERE session_id = ?", (reply, session_id))

    def set_passthrough(self, session_id: str, passthrough: bool) -> None:
        with self._db.transaction() as conn:
            cur = conn.execute("UPDATE proxy_conversations SET passthrough = ? WHERE session_id = ?",
                               (int(passthrough), session_id))
            if cur.rowcount == 0:
                raise NotFound(f"session {session_id} is not a proxied conversation")

    # -- exchanges ----------------------------------------------------------------------------------
    def add_exchange(self, *, session_id: str, plan_id: str, provider: str, path: str, model: str, stream: bool,
                     request: bytes, upstream_request: bytes | None, changes: Sequence[str], estimated: int) -> int:
        """Store a request as it arrived (and what went upstream when steering changed it); its id."""
        with self._db.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO proxy_exchanges (session_id, plan_id, provider, path, model, stream, steered, changes, "
                "request, upstream_request, estimated, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, plan_id, provider, path, model, int(stream), int(upstream_request is not None),
                 json.dumps(list(changes)), _pack(request),
                 _pack(upstream_request) if upstream_request is not None else None, estimated, now_iso()))
            return int(cur.lastrowid)

    def finish_exchange(self, exchange_id: int, *, status: int | None, outcome: str, error: str, reply: str,
                        reply_cut: bool, reported_prompt: int | None, reported_completion: int | None,
                        model: str) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE proxy_exchanges SET status = ?, outcome = ?, error = ?, reply = ?, reply_cut = ?, "
                "reported_prompt = ?, reported_completion = ?, model = CASE WHEN ? != '' THEN ? ELSE model END, "
                "finished_at = ? WHERE id = ?",
                (status, outcome, error, reply, int(reply_cut), reported_prompt, reported_completion, model, model,
                 now_iso(), exchange_id))

    def save_partial_reply(self, exchange_id: int, reply: str, reply_cut: bool) -> None:
        """What has arrived of a reply still streaming; the exchange stays pending."""
        with self._db.transaction() as conn:
            conn.execute("UPDATE proxy_exchanges SET reply = ?, reply_cut = ? WHERE id = ? AND outcome = 'pending'",
                         (reply, int(reply_cut), exchange_id))

    def close_pending(self, error: str) -> int:
        """Every pending exchange closed as cut, keeping the reply saved so far; how many there were."""
        with self._db.transaction() as conn:
            cur = conn.execute("UPDATE proxy_exchanges SET outcome = 'cut', error = ?, finished_at = ? "
                               "WHERE outcome = 'pending'", (error, now_iso()))
            return cur.rowcount

    def exchange(self, exchange_id: int) -> ProxyExchange:
        with self._db.connection() as conn:
            row = conn.execute(f"SELECT {_EXCHANGE_COLUMNS} FROM proxy_exchanges WHERE id = ?",
                               (exchange_id,)).fetchone()
        if row is None:
            raise NotFound(f"no proxied exchange {exchange_id}")
        return _exchange(row)

    def exchanges(self, session_id: str, *, after: int = 0, limit: int = 1000) -> tuple[ProxyExchange, ...]:
        """The session's exchanges with an id above ``after``, oldest first."""
        with self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT {_EXCHANGE_COLUMNS} FROM proxy_exchanges WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?",
                (session_id, after, limit)).fetchall()
        return tuple(_exchange(r) for r in rows)

    def latest_exchange(self, session_id: str, *, before: int | None = None) -> ProxyExchange | None:
        """The session's newest exchange (with an id below ``before`` when given)."""
        with self._db.connection() as conn:
            row = conn.execute(
                f"SELECT {_EXCHANGE_COLUMNS} FROM proxy_exchanges WHERE session_id = ? AND id < ? ORDER BY id DESC "
                "LIMIT 1", (session_id, before if before is not None else 2 ** 62)).fetchone()
        return _exchange(row) if row else None

    def bodies(self, exchange_id: int) -> tuple[bytes, bytes | None]:
        """The request as the client sent it, and as it went upstream (None: unchanged)."""
        with self._db.connection() as conn:
            row = conn.execute("SELECT request, upstream_request FROM proxy_exchanges WHERE id = ?",
                               (exchange_id,)).fetchone()
        if row is None:
            raise NotFound(f"no proxied exchange {exchange_id}")
        upstream = row["upstream_request"]
        return zlib.decompress(row["request"]), zlib.decompress(upstream) if upstream is not None else None

    # -- the user's drops of single items -------------------------------------------------------------
    def drop(self, session_id: str, item_id: str) -> None:
        with self._db.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO proxy_drops (session_id, item_id, created_at) VALUES (?, ?, ?)",
                         (session_id, item_id, now_iso()))

    def restore(self, session_id: str, item_id: str) -> bool:
        with self._db.transaction() as conn:
            cur = conn.execute("DELETE FROM proxy_drops WHERE session_id = ? AND item_id = ?", (session_id, item_id))
            return cur.rowcount > 0

    def drops(self, session_id: str) -> frozenset[str]:
        with self._db.connection() as conn:
            rows = conn.execute("SELECT item_id FROM proxy_drops WHERE session_id = ?", (session_id,)).fetchall()
        return frozenset(r[0] for r in rows)

