"""Store component ``message_changes``: which messages changed since a reader last looked.

Triggers on ``messages`` stamp every inserted, updated or deleted message with the next value of one
counter (``change_seq``), in ``message_changes`` (one row per message id, the latest stamp). A reader that
keeps a session's messages in memory (``service.history_cache``) asks :func:`changes_since` for what
changed after the stamp it has: the counter alone when nothing did, else only the changed rows — a
10,000-turn session is read once, then kept up to date a few rows at a time. Any writer, any connection
or process, is seen: the triggers run inside SQLite.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ctxbench.records.messages import Message

COMPONENT = "message_changes"
_CHUNK = 500  # ids per IN (...) query

_V1 = """
CREATE TABLE change_seq (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL);
INSERT INTO change_seq (id, seq) VALUES (1, 1);
CREATE TABLE message_changes (
    message_id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL
);
CREATE INDEX message_changes_by_session ON message_changes (session_id, seq);
CREATE TRIGGER message_changes_insert AFTER INSERT ON messages BEGIN
    UPDATE change_seq SET seq = seq + 1 WHERE id = 1;
    INSERT INTO message_changes (message_id, session_id, seq) VALUES (NEW.id, NEW.session_id,
        (SELECT seq FROM change_seq WHERE id = 1))
        ON CONFLICT (message_id) DO UPDATE SET session_id = excluded.session_id, seq = excluded.seq;
END;
CREATE TRIGGER message_changes_update AFTER UPDATE ON messages BEGIN
    UPDATE change_seq SET seq = seq + 1 WHERE id = 1;
    INSERT INTO message_changes (message_id, session_id, seq) VALUES (NEW.id, NEW.session_id,
        (SELECT seq FROM change_seq WHERE id = 1))
        ON CONFLICT (message_id) DO UPDATE SET session_id = excluded.session_id, seq = excluded.seq;
END;
CREATE TRIGGER message_changes_delete AFTER DELETE ON messages BEGIN
    UPDATE change_seq SET seq = seq + 1 WHERE id = 1;
    INSERT INTO message_changes (message_id, session_id, seq) VALUES (OLD.id, OLD.session_id,
        (SELECT seq FROM change_seq WHERE id = 1))
        ON CONFLICT (message_id) DO UPDATE SET session_id = excluded.session_id, seq = excluded.seq;
END;
"""

MIGRATIONS = (_V1,)


@dataclass(frozen=True)
class Changes:
    seq: int  # the stamp to ask from next time
    full: bool  # True: ``messages`` is every message of the session (a first read), not only the changed ones
    messages: tuple[Message, ...]  # changed (or all) messages of the session, by id
    deleted: tuple[int, ...]  # ids of messages that no longer exist


def current_seq(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT seq FROM change_seq WHERE id = 1").fetchone()
    return int(row[0]) if row else 0


def changes_since(conn: sqlite3.Connection, session_id: str, seq: int) -> Changes:
    """The messages of ``session_id`` (any branch, any status) changed after stamp ``seq``; ``seq`` 0 reads them all."""
    from ctxbench.store.messages import rows_to_messages

    now = current_seq(conn)  # read first: a change committed meanwhile is read now and again next time
    if seq <= 0:
        rows = conn.execute("SELECT * FROM messages WHERE session_id = ? ORDER BY id", (session_id,))
        return Changes(now, True, rows_to_messages(rows), ())
    if now == seq:
        return Changes(now, False, (), ())
    ids = [int(r[0]) for r in conn.execute(
        "SELECT message_id FROM message_changes WHERE session_id = ? AND seq > ? ORDER BY message_id", (session_id, seq))]
    found: list[Message] = []
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        found += rows_to_messages(conn.execute(
            f"SELECT * FROM messages WHERE session_id = ? AND id IN ({marks}) ORDER BY id", (session_id, *chunk)))
    present = {m.id for m in found}
    return Changes(now, False, tuple(found), tuple(i for i in ids if i not in present))


def messages_after(conn: sqlite3.Connection, session_id: str, after_id: int, limit: int) -> tuple[Message, ...]:
    """The session's messages (any branch, any status) with an id above ``after_id``, oldest first, ``limit`` at
    most: a long session read a part at a time (replay plans its first turns before the rest is read)."""
    from ctxbench.store.messages import rows_to_messages

    rows = conn.execute("SELECT * FROM messages WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?",
                        (session_id, after_id, limit))
    return rows_to_messages(rows)
