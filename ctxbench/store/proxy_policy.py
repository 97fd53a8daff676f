"""The ``proxy_policy`` component of the store: steering set once for every proxied assistant, and drops held
back until they keep the prompt cache.

- ``proxy_policy``: rules that apply to every proxied conversation, whatever client sends it: ``drop`` (a tool
  definition by name, ``tool:NAME``, ``*`` matching any characters: ``tool:mcp__*``; a tool's results,
  ``result:NAME``; an anatomy kind, ``kind:skill_list``; a system block, ``system:N``), ``pin`` (a text added
  back to the system prompt of any request that does not carry it), ``results`` (the most tokens of tool results
  a request carries, oldest left out first), ``mode`` (the Context Mode whose truncation
  tiers cut long tool results where a conversation has no mode of its own) and ``budget`` (the meter's limit,
  which overflow findings measure against).
- ``proxy_deferred_drops``: a conversation's drops held back so as not to break the provider's prompt cache:
  one applies once the cache breaks anyway before the item (the request changes an earlier block) or has
  expired (no answered request for ``proxy.cache_ttl_s``).

Deferred drops go with their session (foreign key, ON DELETE CASCADE). :class:`ProxyPolicy` is the repository.
"""
from __future__ import annotations

from ctxbench.records.proxy_cost import PolicyRule
from ctxbench.store import db
from ctxbench.store.clock import now_iso

COMPONENT = "proxy_policy"

_V1 = """
CREATE TABLE proxy_policy (
    n          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT NOT NULL CHECK (kind IN ('drop', 'pin', 'mode', 'budget')),
    target     TEXT NOT NULL,
    label      TEXT NOT NULL DEFAULT '',
    content    TEXT NOT NULL DEFAULT '',
    origin     TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);

CREATE TABLE proxy_deferred_drops (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    item_id    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, item_id)
);
"""

# v2: ``results`` rules (the most tokens of tool results a request may carry, oldest left out first)
_V2 = """
CREATE TABLE proxy_policy_v2 (
    n          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT NOT NULL CHECK (kind IN ('drop', 'pin', 'mode', 'budget', 'results')),
    target     TEXT NOT NULL,
    label      TEXT NOT NULL DEFAULT '',
    content    TEXT NOT NULL DEFAULT '',
    origin     TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
INSERT INTO proxy_policy_v2 (n, kind, target, label, content, origin, created_at)
    SELECT n, kind, target, label, content, origin, created_at FROM proxy_policy;
DROP TABLE proxy_policy;
ALTER TABLE proxy_policy_v2 RENAME TO proxy_policy;
"""

MIGRATIONS: tuple[db.Migration, ...] = (_V1, _V2)
SINGLE = ("mode", "budget", "results")  # kinds with one rule at a time: a new one replaces the old


class ProxyPolicy:
    """The ``proxy_policy`` and ``proxy_deferred_drops`` tables of one database."""

    def __init__(self, database: db.Connections) -> None:
        self._db = database

    def add(self, kind: str, target: str, *, label: str = "", content: str = "", origin: str = "") -> PolicyRule:
        with self._db.transaction() as conn:
            if kind in SINGLE:
                conn.execute("DELETE FROM proxy_policy WHERE kind = ?", (kind,))
            else:
                conn.execute("DELETE FROM proxy_policy WHERE kind = ? AND target = ?", (kind, target))
            cur = conn.execute("INSERT INTO proxy_policy (kind, target, label, content, origin, created_at) "
                               "VALUES (?, ?, ?, ?, ?, ?)", (kind, target, label, content, origin, now_iso()))
            n = int(cur.lastrowid or 0)
        return PolicyRule(n, kind, target, label, content, origin)

    def remove(self, n: int) -> bool:
        with self._db.transaction() as conn:
            return conn.execute("DELETE FROM proxy_policy WHERE n = ?", (n,)).rowcount > 0

    def rules(self) -> tuple[PolicyRule, ...]:
        with self._db.connection() as conn:
            rows = conn.execute("SELECT n, kind, target, label, content, origin FROM proxy_policy ORDER BY n").fetchall()
        return tuple(PolicyRule(int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5])) for r in rows)

    # -- drops held back for the cache ---------------------------------------------------------------------------
    def defer(self, session_id: str, item_id: str) -> None:
        with self._db.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO proxy_deferred_drops (session_id, item_id, created_at) "
                         "VALUES (?, ?, ?)", (session_id, item_id, now_iso()))

    def undefer(self, session_id: str, item_id: str) -> bool:
        with self._db.transaction() as conn:
            return conn.execute("DELETE FROM proxy_deferred_drops WHERE session_id = ? AND item_id = ?",
                                (session_id, item_id)).rowcount > 0

    def deferred(self, session_id: str) -> tuple[str, ...]:
        with self._db.connection() as conn:
            rows = conn.execute("SELECT item_id FROM proxy_deferred_drops WHERE session_id = ? ORDER BY created_at, "
                                "item_id", (session_id,)).fetchall()
        return tuple(str(r[0]) for r in rows)
