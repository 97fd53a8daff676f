"""Messages and their groups (Turns): insert, read by branch lineage, drop, delete.

Each group has a row in ``message_groups`` whose ``n`` is the rowid of the group's text in the
FTS5 table ``group_search``; that text is rebuilt from the group's *active* messages whenever
they change, so dropped and deleted messages never match a keyword search.
Callers wrap writes in :func:`ctxbench.store.db.transaction`.
"""
from __future__ import annotations

import json
import sqlite3
from typing import Iterable, Sequence

from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.vocab import ROLES
from ctxbench.store import sessions
from ctxbench.store.clock import now_iso
from ctxbench.records.errors import UnknownGroup
from ctxbench.records.sessions import NewMessage

STATUSES = ("active", "dropped")


def _tool_calls_json(calls: Sequence[ToolCall]) -> str:
    return json.dumps([{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls], ensure_ascii=False)


_EMPTY_LIST = "[]"


def _row_to_message(row: sqlite3.Row) -> Message:
    raw_calls = row["tool_calls"]
    calls = (
        ()
        if raw_calls == _EMPTY_LIST
        else tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in json.loads(raw_calls))
    )
    raw_flags = row["flags"]
    return Message(
        id=int(row["id"]),
        session_id=row["session_id"],
        branch_id=row["branch_id"],
        group_id=int(row["group_id"]),
        role=row["role"],
        content=row["content"],
        tool_calls=calls,
        tool_call_id=row["tool_call_id"],
        tool_name=row["tool_name"],
        parsing_strategy=row["parsing_strategy"],
        status=row["status"],
        created_at=row["created_at"],
        tokens=int(row["tokens"]),
        flags=() if raw_flags == _EMPTY_LIST else tuple(json.loads(raw_flags)),
        partial=bool(row["partial"]),
    )


def insert_messages(
    conn: sqlite3.Connection,
    session_id: str,
    branch_id: str,
    new: Iterable[NewMessage],
    *,
    created_at: str | None = None,
) -> list[Message]:
    """Store messages on ``branch_id``; their groups are created and re-indexed once each."""
    stamp = created_at or now_iso()
    stored: list[Message] = []
    touched: dict[int, None] = {}
    for m in new:
        if m.role not in ROLES:
            raise ValueError(f"unknown role {m.role!r}; expected one of {', '.join(ROLES)}")
        cur = conn.execute(
            "INSERT INTO messages (session_id, branch_id, group_id, role, content, tool_calls, tool_call_id, "
            "tool_name, parsing_strategy, status, created_at, tokens, flags, partial) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?)",
            (
                session_id,
                branch_id,
                m.group_id,
                m.role,
                m.content,
                _tool_calls_json(m.tool_calls),
                m.tool_call_id,
                m.tool_name,
                m.parsing_strategy,
                stamp,
                m.tokens,
                json.dumps(list(m.flags)),
                int(m.partial),
            ),
        )
        message_id = int(cur.lastrowid)
        if m.group_id not in touched:
            conn.execute(
                "INSERT OR IGNORE INTO message_groups (session_id, branch_id, group_id, created_at) VALUES (?, ?, ?, ?)",
                (session_id, branch_id, m.group_id, stamp),
            )
            sessions.note_group_used(conn, session_id, m.group_id)
            touched[m.group_id] = None
        stored.append(
            Message(
                id=message_id,
                session_id=session_id,
                branch_id=branch_id,
                group_id=m.group_id,
                role=m.role,
                content=m.content,
                tool_calls=tuple(m.tool_calls),
                tool_call_id=m.tool_call_id,
                tool_name=m.tool_name,
                parsing_strategy=m.parsing_strategy,
                status="active",
                created_at=stamp,
                tokens=m.tokens,
                flags=tuple(m.flags),
                partial=m.partial,
            )
        )
    if stored:
        conn.execute("UPDATE branches SET head_message_id = ? WHERE id = ?", (stored[-1].id, branch_id))
    for group_id in touched:
        reindex_group(conn, session_id, group_id)
    return stored


def get_message(conn: sqlite3.Connection, message_id: int) -> Message | None:
    row = conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
    return _row_to_message(row) if row else None


def update_message(
    conn: sqlite3.Connection, message_id: int, *, content: str, tokens: int, partial: bool
) -> Message:
    """Rewrite a message's text (a streamed reply growing or being finished)."""
    row = conn.execute("SELECT session_id, group_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    if row is None:
        raise LookupError(f"unknown message {message_id}")
    conn.execute(
        "UPDATE messages SET content = ?, tokens = ?, partial = ? WHERE id = ?",
        (content, tokens, int(partial), message_id),
    )
    reindex_group(conn, row["session_id"], int(row["group_id"]))
    message = get_message(conn, message_id)
    assert message is not None
    return message


def set_flags(conn: sqlite3.Connection, message_id: int, flags: Sequence[str]) -> None:
    conn.execute("UPDATE messages SET flags = ? WHERE id = ?", (json.dumps(list(flags)), message_id))


def _lineage_clause(conn: sqlite3.Connection, branch_id: str) -> tuple[str, list[object]]:
    parts: list[str] = []
    params: list[object] = []
    for bid, limit in sessions.lineage(conn, branch_id):
        if limit is None:
            parts.append("(branch_id = ?)")
            params.append(bid)
        else:
            parts.append("(branch_id = ? AND id <= ?)")
            params.extend((bid, limit))
    return "(" + " OR ".join(parts) + ")", params


def branch_messages(
    conn: sqlite3.Connection, session_id: str, branch_id: str, *, include_dropped: bool = False
) -> tuple[Message, ...]:
    """The messages a branch sees (its ancestors' up to each fork point, then its own), oldest first."""
    clause, params = _lineage_clause(conn, branch_id)
    sql = f"SELECT * FROM messages WHERE session_id = ? AND {clause}"
    if not include_dropped:
        sql += " AND status = 'active'"
    sql += " ORDER BY id"
    return tuple(_row_to_message(r) for r in conn.execute(sql, [session_id, *params]))


def branch_group_ids(conn: sqlite3.Connection, session_id: str, branch_id: str) -> list[int]:
    """Group ids visible on a branch (any status), in chronological order."""
    clause, params = _lineage_clause(conn, branch_id)
    rows = conn.execute(
        f"SELECT group_id, MIN(id) AS first FROM messages WHERE session_id = ? AND {clause} "
        "GROUP BY group_id ORDER BY first",
        [session_id, *params],
    )
    return [int(r["group_id"]) for r in rows]


def group_messages(conn: sqlite3.Connection, session_id: str, group_id: int) -> tuple[Message, ...]:
    rows = conn.execute(
        "SELECT * FROM messages WHERE session_id = ? AND group_id = ? ORDER BY id", (session_id, group_id)
    )
    return tuple(_row_to_message(r) for r in rows)


def _group_row(conn: sqlite3.Connection, session_id: str, group_id: int) -> sqlite3.Row:
    row = conn.execute(
        "SELECT * FROM message_groups WHERE session_id = ? AND group_id = ?", (session_id, group_id)
    ).fetchone()
    if row is None:
        raise UnknownGroup(f"session {session_id} has no group {group_id}")
    return row


def group_branch(conn: sqlite3.Connection, session_id: str, group_id: int) -> str:
    return str(_group_row(conn, session_id, group_id)["branch_id"])


def set_group_status(conn: sqlite3.Connection, session_id: str, group_id: int, status: str) -> int:
    """Mark every message of a group active or dropped; returns how many messages changed."""
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}")
    _group_row(conn, session_id, group_id)
    cur = conn.execute(
        "UPDATE messages SET status = ? WHERE session_id = ? AND group_id = ? AND status != ?",
        (status, session_id, group_id, status),
    )
    reindex_group(conn, session_id, group_id)
    return int(cur.rowcount)


def delete_group(conn: sqlite3.Connection, session_id: str, group_id: int) -> int:
    """Permanently delete a group's messages, its row and its search text; returns messages deleted.

    Their copies in ``plan_messages`` go too unless a stored plan refers to them (a plan keeps what it was sent).
    """
    from ctxbench.store import plans

    row = _group_row(conn, session_id, group_id)
    conn.execute("DELETE FROM group_search WHERE rowid = ?", (row["n"],))
    ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = ? AND group_id = ?",
                                      (session_id, group_id))]
    cur = conn.execute("DELETE FROM messages WHERE session_id = ? AND group_id = ?", (session_id, group_id))
    plans.collect_messages(conn, session_id, ids)
    conn.execute("DELETE FROM message_groups WHERE n = ?", (row["n"],))
    branch_id = row["branch_id"]
    head = conn.execute("SELECT MAX(id) FROM messages WHERE branch_id = ?", (branch_id,)).fetchone()[0]
    conn.execute("UPDATE branches SET head_message_id = ? WHERE id = ?", (head, branch_id))
    return int(cur.rowcount)


def searchable_text(message: Message) -> str:
    """What a message contributes to its group's keyword index: text, tool names and arguments."""
    parts = [message.content]
    for call in message.tool_calls:
        parts.append(call.name)
        parts.append(call.arguments)
    if message.tool_name:
        parts.append(message.tool_name)
    return "\n".join(p for p in parts if p)


def reindex_group(conn: sqlite3.Connection, session_id: str, group_id: int) -> None:
    """Rebuild the group's FTS row from its active messages (none left: no row)."""
    row = conn.execute(
        "SELECT n FROM message_groups WHERE session_id = ? AND group_id = ?", (session_id, group_id)
    ).fetchone()
    if row is None:
        return
    n = int(row["n"])
    conn.execute("DELETE FROM group_search WHERE rowid = ?", (n,))
    active = [m for m in group_messages(conn, session_id, group_id) if m.status == "active"]
    text = "\n".join(t for t in (searchable_text(m) for m in active) if t)
    if text:
        conn.execute("INSERT INTO group_search (rowid, content) VALUES (?, ?)", (n, text))

