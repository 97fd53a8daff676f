"""The ``core`` component's schema: sessions, branches, messages, groups (+ FTS5), pins, plans,
retrieval sets, usage reports, the state block, the scratchpad, memos and activation scores.

Migrations are append-only: never edit a released step, add a new one.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxbench.store import db, plan_history

COMPONENT = "core"

_V1 = """
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    title         TEXT NOT NULL DEFAULT '',
    repo          TEXT,
    created_at    TEXT NOT NULL,
    settings      TEXT NOT NULL DEFAULT '{}',
    active_branch TEXT,
    next_group_id INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE branches (
    id              TEXT PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    parent_id       TEXT REFERENCES branches(id) ON DELETE CASCADE,
    fork_message_id INTEGER,
    head_message_id INTEGER,
    created_at      TEXT NOT NULL,
    UNIQUE (session_id, name)
);

CREATE TABLE messages (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id       TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    branch_id        TEXT NOT NULL REFERENCES branches(id) ON DELETE CASCADE,
    group_id         INTEGER NOT NULL,
    role             TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content          TEXT NOT NULL DEFAULT '',
    tool_calls       TEXT NOT NULL DEFAULT '[]',
    tool_call_id     TEXT,
    tool_name        TEXT,
    parsing_strategy TEXT NOT NULL DEFAULT 'openai',
    status           TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'dropped')),
    created_at       TEXT NOT NULL,
    tokens           INTEGER NOT NULL DEFAULT 0,
    flags            TEXT NOT NULL DEFAULT '[]',
    partial          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX messages_by_branch ON messages (branch_id, id);
CREATE INDEX messages_by_group ON messages (session_id, group_id, id);

-- one row per Turn (group); its n is the rowid of the group's row in group_search
CREATE TABLE message_groups (
    n          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    branch_id  TEXT NOT NULL REFERENCES branches(id) ON DELETE CASCADE,
    group_id   INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (session_id, group_id)
);

-- the text of each group's active messages, for the hybrid strategy's BM25 ranking
CREATE VIRTUAL TABLE group_search USING fts5 (content, tokenize = 'porter unicode61');

CREATE TABLE pins (
    n            INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    target       TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('sticky', 'leased', 'ephemeral')),
    label        TEXT NOT NULL DEFAULT '',
    content      TEXT NOT NULL DEFAULT '',
    scope        TEXT NOT NULL DEFAULT 'turn' CHECK (scope IN ('turn', 'task')),
    ttl          INTEGER NOT NULL DEFAULT 0,
    created_turn INTEGER NOT NULL DEFAULT 0,
    source       TEXT NOT NULL DEFAULT 'user',
    created_at   TEXT NOT NULL,
    UNIQUE (session_id, target)
);

CREATE TABLE retrieval_sets (
    id         TEXT PRIMARY KEY,
    query      TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE plans (
    plan_id    TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    inputs     TEXT NOT NULL,
    result     TEXT NOT NULL
);
CREATE INDEX plans_by_session ON plans (session_id, created_at);

CREATE TABLE usage_reports (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_id    TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    estimated  INTEGER NOT NULL,
    reported   INTEGER,
    model      TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
CREATE INDEX usage_by_plan ON usage_reports (plan_id, id);

CREATE TABLE session_state (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    content    TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX state_by_session ON session_state (session_id, id);

CREATE TABLE scratchpad (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    content    TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE memos (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    content    TEXT NOT NULL,
    tags       TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL
);
CREATE VIRTUAL TABLE memo_search USING fts5 (content, tags, tokenize = 'porter unicode61');

CREATE TABLE activation (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    item_id    TEXT NOT NULL,
    score      REAL NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (session_id, item_id)
);
"""

# v2: plans keep their messages by reference (content-addressed, shared across plans) and a
# zlib-compressed result, so a plan per turn in a long session does not copy the whole history.
_V2 = """
CREATE TABLE plan_messages (
    key  TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
ALTER TABLE plans ADD COLUMN encoding TEXT NOT NULL DEFAULT 'json';
"""

def _v3_exact_word_search(conn: sqlite3.Connection) -> None:
    """v3: keyword search on exact words (unicode61, no Porter stemming), as seed 000's BM25 over
    raw message text. Stemming made "amounts" match every "amount" in tool output and buried the
    one turn that used the word."""
    from ctxbench.store import messages as message_store  # rebuilds each group's text as it is written

    conn.execute("DROP TABLE group_search")
    conn.execute("CREATE VIRTUAL TABLE group_search USING fts5 (content, tokenize = 'unicode61')")
    for row in conn.execute("SELECT session_id, group_id FROM message_groups ORDER BY n").fetchall():
        message_store.reindex_group(conn, row[0], int(row[1]))
    conn.execute("DROP TABLE memo_search")
    conn.execute("CREATE VIRTUAL TABLE memo_search USING fts5 (content, tags, tokenize = 'unicode61')")
    conn.execute(
        "INSERT INTO memo_search (rowid, content, tags) "
        "SELECT id, content, (SELECT group_concat(value, ' ') FROM json_each(memos.tags)) FROM memos"
    )


def _v4_deletable(conn: sqlite3.Connection) -> None:
    """v4: what a stored plan references can be found without unpacking every plan, so deleting a
    session (or a turn) also deletes the plan messages and retrieval sets nothing refers to any more.
    ``plan_messages`` rows say whose message they hold; ``plans`` say which RetrievalSet they used."""
    import json
    import zlib

    conn.execute("ALTER TABLE plan_messages ADD COLUMN session_id TEXT")
    conn.execute("ALTER TABLE plan_messages ADD COLUMN message_id INTEGER")
    conn.execute(
        "UPDATE plan_messages SET session_id = json_extract(data, '$.session_id'), message_id = json_extract(data, '$.id')"
    )
    conn.execute("CREATE INDEX plan_messages_by_message ON plan_messages (session_id, message_id)")
    conn.execute("ALTER TABLE plans ADD COLUMN retrieval_id TEXT")
    for row in conn.execute("SELECT plan_id, inputs, encoding FROM plans").fetchall():
        text = zlib.decompress(row[1]).decode("utf-8") if row[2] != "json" else str(row[1])
        retrieval_id = (json.loads(text).get("retrieval") or {}).get("id")
        conn.execute("UPDATE plans SET retrieval_id = ? WHERE plan_id = ?", (retrieval_id, row[0]))
    conn.execute("CREATE INDEX plans_by_retrieval ON plans (retrieval_id)")


def _v5_branch_scoped(conn: sqlite3.Connection) -> None:
    """v5: pins, leases, activation, the ``### STATE``, the scratchpad and the settings belong to a branch:
    a fork inherits them and they are independent afterwards. Rows of earlier versions go to the branch
    that was active. Plans record the branch and the turn they were made for."""
    active = "(SELECT active_branch FROM sessions WHERE sessions.id = {table}.session_id)"
    seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'pins'").fetchone()
    conn.execute("""
        CREATE TABLE pins_v5 (
            n            INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            branch_id    TEXT NOT NULL REFERENCES branches(id) ON DELETE CASCADE,
            target       TEXT NOT NULL,
            kind         TEXT NOT NULL CHECK (kind IN ('sticky', 'leased', 'ephemeral')),
            label        TEXT NOT NULL DEFAULT '',
            content      TEXT NOT NULL DEFAULT '',
            scope        TEXT NOT NULL DEFAULT 'turn' CHECK (scope IN ('turn', 'task')),
            ttl          INTEGER NOT NULL DEFAULT 0,
            created_turn INTEGER NOT NULL DEFAULT 0,
            source       TEXT NOT NULL DEFAULT 'user',
            created_at   TEXT NOT NULL,
            UNIQUE (branch_id, target)
        )""")
    conn.execute(f"""
        INSERT INTO pins_v5 (n, session_id, branch_id, target, kind, label, content, scope, ttl, created_turn, source,
                             created_at)
        SELECT n, session_id, {active.format(table="pins")}, target, kind, label, content, scope, ttl, created_turn,
               source, created_at FROM pins""")
    conn.execute("DROP TABLE pins")
    conn.execute("ALTER TABLE pins_v5 RENAME TO pins")
    if seq is not None:  # pin numbers are never reused, also across this rebuild
        conn.execute("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'pins'", (int(seq[0]),))
    conn.execute("""
        CREATE TABLE activation_v5 (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            branch_id  TEXT NOT NULL REFERENCES branches(id) ON DELETE CASCADE,
            item_id    TEXT NOT NULL,
            score      REAL NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (branch_id, item_id)
        )""")
    conn.execute(f"""
        INSERT INTO activation_v5 (session_id, branch_id, item_id, score, updated_at)
        SELECT session_id, {active.format(table="activation")}, item_id, score, updated_at FROM activation""")
    conn.execute("DROP TABLE activation")
    conn.execute("ALTER TABLE activation_v5 RENAME TO activation")
    conn.execute("""
        CREATE TABLE scratchpad_v5 (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            branch_id  TEXT NOT NULL REFERENCES branches(id) ON DELETE CASCADE,
            content    TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (branch_id)
        )""")
    conn.execute(f"""
        INSERT INTO scratchpad_v5 (session_id, branch_id, content, updated_at)
        SELECT session_id, {active.format(table="scratchpad")}, content, updated_at FROM scratchpad""")
    conn.execute("DROP TABLE scratchpad")
    conn.execute("ALTER TABLE scratchpad_v5 RENAME TO scratchpad")
    conn.execute("ALTER TABLE session_state ADD COLUMN branch_id TEXT")
    conn.execute(f"UPDATE session_state SET branch_id = {active.format(table='session_state')}")
    conn.execute("CREATE INDEX state_by_branch ON session_state (branch_id, id)")
    conn.execute("ALTER TABLE branches ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'")
    conn.execute("UPDATE branches SET settings = (SELECT settings FROM sessions WHERE sessions.id = branches.session_id)")
    conn.execute("ALTER TABLE plans ADD COLUMN branch_id TEXT")
    conn.execute("ALTER TABLE plans ADD COLUMN group_id INTEGER")
    conn.execute("CREATE INDEX plans_by_branch ON plans (branch_id, created_at)")


# v6: a message keeps the id it had in the transcript it was imported from (LoCoMo's ``D3:12``, a Claude Code
# uuid), so plans can name the source turns they include; empty for messages written here.
_V6 = """
ALTER TABLE messages ADD COLUMN external_id TEXT NOT NULL DEFAULT '';
"""



def _v7_plan_tables(conn: sqlite3.Connection) -> None:
    """v7: plans may be stored with their items as a table (``plans.encoding = 'refs+tables+zlib'``). No table
    changes: the version says an older ctxbench, which cannot read such a plan, should refuse this database with a
    clear line instead of failing on the plan list."""


# v8: a plan's excluded history keeps the rows of its atoms by reference (``plans.encoding = 'refs+history+zlib'``)
# and its inputs their history's message keys, each chunk of either stored once per session (``store.plan_history``)
MIGRATIONS: tuple[db.Migration, ...] = (_V1, _V2, _v3_exact_word_search, _v4_deletable, _v5_branch_scoped, _V6,
                                        _v7_plan_tables, plan_history.TABLE)


def components() -> tuple[tuple[str, tuple[db.Migration, ...]], ...]:
    """Every store component and its migrations, in the order a new database creates them."""
    from ctxbench.store import (capsules, code_search, compaction, derived_texts, history_snapshots, index_tables,
                                message_changes, message_search, proxy, proxy_billing, proxy_cache, proxy_chains,
                                proxy_policy, query_clusters, traces, usage_billing, vectors)

    return ((COMPONENT, MIGRATIONS), (index_tables.COMPONENT, tuple(index_tables.MIGRATIONS)),
            (code_search.COMPONENT, code_search.MIGRATIONS), (vectors.COMPONENT, vectors.MIGRATIONS),
            (traces.COMPONENT, traces.MIGRATIONS), (message_search.COMPONENT, message_search.MIGRATIONS),
            (proxy.COMPONENT, proxy.MIGRATIONS), (compaction.COMPONENT, compaction.MIGRATIONS),
            (capsules.COMPONENT, capsules.MIGRATIONS), (message_changes.COMPONENT, message_changes.MIGRATIONS),
            (derived_texts.COMPONENT, derived_texts.MIGRATIONS),
            (query_clusters.COMPONENT, query_clusters.MIGRATIONS),
            (proxy_chains.COMPONENT, proxy_chains.MIGRATIONS), (proxy_cache.COMPONENT, proxy_cache.MIGRATIONS),
            (proxy_billing.COMPONENT, proxy_billing.MIGRATIONS), (proxy_policy.COMPONENT, proxy_policy.MIGRATIONS),
            (usage_billing.COMPONENT, usage_billing.MIGRATIONS),
            (history_snapshots.COMPONENT, history_snapshots.MIGRATIONS))


def open_core(path: Path | str) -> sqlite3.Connection:
    """Open the database at ``path`` and bring the ``core`` schema up to date."""
    conn = db.connect(path)
    db.migrate(conn, COMPONENT, MIGRATIONS)
    return conn
