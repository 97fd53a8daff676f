"""Store component ``history_snapshots``: a long session's history as planned, kept so a fresh process starts from it.

Reading a 10,000-turn session's ~50,000 messages, masking them and laying out its turns took seconds before its
first plan. The workbench keeps (``service.history_snapshot``) what that produced — the masked messages, the
turns' views, the keys of the messages already stored with plans — as one blob per session, with the message
change stamp (``store.message_changes``) it is current to and a fingerprint of everything else it depends on.
A fresh process starts from the blob and reads only the messages changed after that stamp.

The blob holds message texts (masked): a message deleted, or its text or tool calls rewritten, deletes its
session's snapshot at once (triggers), so a turn deleted to purge a secret leaves no copy here. Dropping or
restoring a message keeps it (its change stamp brings the message up to date). A snapshot goes with its
session (foreign key).
"""
from __future__ import annotations

import sqlite3

from ctxbench.store.clock import now_iso

COMPONENT = "history_snapshots"

_V1 = """
CREATE TABLE history_snapshots (
    session_id  TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    data        BLOB NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE TRIGGER history_snapshots_message_deleted AFTER DELETE ON messages BEGIN
    DELETE FROM history_snapshots WHERE session_id = OLD.session_id;
END;
CREATE TRIGGER history_snapshots_message_rewritten AFTER UPDATE OF content, tool_calls ON messages BEGIN
    DELETE FROM history_snapshots WHERE session_id = OLD.session_id;
END;
"""

MIGRATIONS = (_V1,)


def load(conn: sqlite3.Connection, session_id: str, fingerprint: str) -> tuple[int, bytes] | None:
    """(change stamp, blob) of the session's snapshot made under ``fingerprint``; None when there is none."""
    row = conn.execute("SELECT seq, data FROM history_snapshots WHERE session_id = ? AND fingerprint = ?",
                       (session_id, fingerprint)).fetchone()
    return (int(row[0]), bytes(row[1])) if row is not None else None


def stored_seq(conn: sqlite3.Connection, session_id: str) -> int | None:
    """The change stamp of the session's snapshot (any fingerprint); None when there is none."""
    row = conn.execute("SELECT seq FROM history_snapshots WHERE session_id = ?", (session_id,)).fetchone()
    return int(row[0]) if row is not None else None


def save(conn: sqlite3.Connection, session_id: str, fingerprint: str, seq: int, data: bytes) -> None:
    """Keep ``data`` as the session's snapshot, current to change stamp ``seq`` (replacing the one kept). Nothing is
    kept for a session that no longer exists."""
    conn.execute(
        "INSERT INTO history_snapshots (session_id, fingerprint, seq, data, created_at) "
        "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?) "
        "ON CONFLICT (session_id) DO UPDATE SET fingerprint = excluded.fingerprint, seq = excluded.seq, "
        "data = excluded.data, created_at = excluded.created_at",
        (session_id, fingerprint, seq, data, now_iso(), session_id))


def forget(conn: sqlite3.Connection, session_id: str) -> None:
    """Forget the session's snapshot (its next first plan reads the history again)."""
    conn.execute("DELETE FROM history_snapshots WHERE session_id = ?", (session_id,))
