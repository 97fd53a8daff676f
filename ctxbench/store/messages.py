"""Messages and their groups (Turns): insert, read by branch lineage, drop, delete.

Each group has a row in ``message_groups`` whose ``n`` is the rowid of the group's text in the
FTS5 table ``group_search``; that text is rebuilt from the group's *active* messages whenever
they change, so dropped and deleted messages never match a keyword search.

:class:`Messages` is the repository the service uses; the module functions are the SQL.
"""
from __future__ import annotations

import json
import sqlite3
from typing import Callable, Iterable, Sequence

from ctxbench.records.messages import Message, ToolCall
from ctxbench.records.vocab import MESSAGE_STATUSES, ROLES, UNANSWERED_FLAG
from ctxbench.store import derived_texts, message_search, plans, sessions
from ctxbench.store.clock import now_iso
from ctxbench.records.errors import NotFound, UnknownGroup
from ctxbench.store.db import Connections
from ctxbench.records.sessions import NewMessage



def _tool_calls_json(calls: Sequence[ToolCall]) -> str:
    return json.dumps([{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls], ensure_ascii=False)


_EMPTY_LIST = "[]"


def row_to_message(row: sqlite3.Row) -> Message:
    return rows_to_messages((row,))[0]


def rows_to_messages(rows: Iterable[sqlite3.Row]) -> tuple[Message, ...]:
    """:func:`row_to_message` of many rows of one query (``SELECT *``), by column position: looking a column up by
    name costs a search of the row's names each time, which was a second of reading a 10,000-turn session."""
    out: list[Message] = []
    at: dict[str, int] | None = None
    for row in rows:
        if at is None:
            at = {name: i for i, name in enumerate(row.keys())}
            i_id, i_session, i_branch, i_group, i_role, i_content = (at[k] for k in (
                "id", "session_id", "branch_id", "group_id", "role", "content"))
            i_calls, i_call_id, i_tool, i_strategy, i_status, i_created, i_tokens, i_flags, i_partial = (at[k] for k in (
                "tool_calls", "tool_call_id", "tool_name", "parsing_strategy", "status", "created_at", "tokens",
                "flags", "partial"))
            i_external = at.get("external_id")
        raw_calls = row[i_calls]
        raw_flags = row[i_flags]
        out.append(Message(
            id=int(row[i_id]),
            session_id=row[i_session],
            branch_id=row[i_branch],
            group_id=int(row[i_group]),
            role=row[i_role],
            content=row[i_content],
            tool_calls=() if raw_calls == _EMPTY_LIST else tuple(
                ToolCall(c["id"], c["name"], c["arguments"]) for c in json.loads(raw_calls)),
            tool_call_id=row[i_call_id],
            tool_name=row[i_tool],
            parsing_strategy=row[i_strategy],
            status=row[i_status],
            created_at=row[i_created],
            tokens=int(row[i_tokens]),
            flags=() if raw_flags == _EMPTY_LIST else tuple(json.loads(raw_flags)),
            partial=bool(row[i_partial]),
            external_id=row[i_external] if i_external is not None else "",
        ))
    return tuple(out)


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
    touched: dict[int, bool] = {}  # group id -> made by this call (then all its messages are in ``stored``)
    for m in new:
        if m.role not in ROLES:
            raise ValueError(f"unknown role {m.role!r}; expected one of {', '.join(ROLES)}")
        cur = conn.execute(
            "INSERT INTO messages (session_id, branch_id, group_id, role, content, tool_calls, tool_call_id, "
            "tool_name, parsing_strategy, status, created_at, tokens, flags, partial, external_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?)",
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
                m.created_at or stamp,
                m.tokens,
                json.dumps(list(m.flags)),
                int(m.partial),
                m.external_id,
            ),
        )
        message_id = int(cur.lastrowid)
        if m.group_id not in touched:
            made = conn.execute(
                "INSERT OR IGNORE INTO message_groups (session_id, branch_id, group_id, created_at) VALUES (?, ?, ?, ?)",
                (session_id, branch_id, m.group_id, m.created_at or stamp),
            ).rowcount == 1
            sessions.note_group_used(conn, session_id, m.group_id)
            touched[m.group_id] = made
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
                created_at=m.created_at or stamp,
                tokens=m.tokens,
                flags=tuple(m.flags),
                partial=m.partial,
                external_id=m.external_id,
            )
        )
    if stored:
        conn.execute("UPDATE branches SET head_message_id = ? WHERE id = ?", (stored[-1].id, branch_id))
        message_search.index_messages(conn, stored)
    for group_id, made in touched.items():
        # a group made here holds only these messages: its search text is built from them, not read back (a
        # 30 MB message was read back and joined again, two more copies at the peak of an import)
        reindex_group(conn, session_id, group_id, [s for s in stored if s.group_id == group_id] if made else None)
    return stored


def get_message(conn: sqlite3.Connection, message_id: int) -> Message | None:
    row = conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
    return row_to_message(row) if row else None


def update_message(
    conn: sqlite3.Connection, message_id: int, *, content: str, tokens: int, partial: bool,
    tool_calls: Sequence[ToolCall] | None = None,
) -> Message:
    """Rewrite a message's text (a streamed reply growing or being finished) and, given, its tool calls."""
    row = conn.execute("SELECT session_id, group_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    if row is None:
        raise LookupError(f"unknown message {message_id}")
    conn.execute(
        "UPDATE messages SET content = ?, tokens = ?, partial = ? WHERE id = ?",
        (content, tokens, int(partial), message_id),
    )
    if tool_calls is not None:
        conn.execute("UPDATE messages SET tool_calls = ? WHERE id = ?", (_tool_calls_json(tool_calls), message_id))
    reindex_group(conn, row["session_id"], int(row["group_id"]))
    message = get_message(conn, message_id)
    assert message is not None
    message_search.index_messages(conn, [message])
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
    return rows_to_messages(conn.execute(sql, [session_id, *params]))


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
    return rows_to_messages(conn.execute(
        "SELECT * FROM messages WHERE session_id = ? AND group_id = ? ORDER BY id", (session_id, group_id)
    ))


def _group_row(conn: sqlite3.Connection, session_id: str, group_id: int) -> sqlite3.Row:
    row = conn.execute(
        "SELECT * FROM message_groups WHERE session_id = ? AND group_id = ?", (session_id, group_id)
    ).fetchone()
    if row is None:
        raise UnknownGroup(f"session {session_id} has no turn {group_id}")
    return row


def group_branch(conn: sqlite3.Connection, session_id: str, group_id: int) -> str:
    return str(_group_row(conn, session_id, group_id)["branch_id"])


def set_group_status(conn: sqlite3.Connection, session_id: str, group_id: int, status: str) -> int:
    """Mark every message of a group active or dropped; returns how many messages changed."""
    if status not in MESSAGE_STATUSES:
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

    Their copies in ``plan_messages`` go too unless a stored plan refers to them (a plan keeps what it was sent), and
    how their texts were masked (``derived_texts``).
    """
    row = _group_row(conn, session_id, group_id)
    conn.execute("DELETE FROM group_search WHERE rowid = ?", (row["n"],))
    gone = group_messages(conn, session_id, group_id)
    ids = [m.id for m in gone]
    derived_texts.forget_messages(conn, session_id, gone)
    cur = conn.execute("DELETE FROM messages WHERE session_id = ? AND group_id = ?", (session_id, group_id))
    message_search.forget(conn, ids)
    plans.collect_messages(conn, session_id, ids)
    conn.execute("DELETE FROM message_groups WHERE n = ?", (row["n"],))
    branch_id = row["branch_id"]
    head = conn.execute("SELECT MAX(id) FROM messages WHERE branch_id = ?", (branch_id,)).fetchone()[0]
    conn.execute("UPDATE branches SET head_message_id = ? WHERE id = ?", (head, branch_id))
    return int(cur.rowcount)


def searchable_text(message: Message) -> str:
    """What a message contributes to its group's keyword index: text, tool names and arguments."""
    return message_search.message_text(message)


def reindex_group(conn: sqlite3.Connection, session_id: str, group_id: int,
                  messages: Sequence[Message] | None = None) -> None:
    """Rebuild the group's FTS row from its active messages (none left: no row); ``messages``: the group's
    messages when the caller holds every one of them (then they are not read back)."""
    row = conn.execute(
        "SELECT n FROM message_groups WHERE session_id = ? AND group_id = ?", (session_id, group_id)
    ).fetchone()
    if row is None:
        return
    n = int(row["n"])
    conn.execute("DELETE FROM group_search WHERE rowid = ?", (n,))
    found = group_messages(conn, session_id, group_id) if messages is None else messages
    active = [m for m in found if m.status == "active"]
    text = "\n".join(t for t in (searchable_text(m) for m in active) if t)
    if text:
        conn.execute("INSERT INTO group_search (rowid, content) VALUES (?, ?)", (n, text))



# -- the repository -----------------------------------------------------------------------------------

# prompt tokens of one message: (role, content, tool calls, tool_call_id) -> tokens
CountTokens = Callable[[str, str, Sequence[ToolCall], "str | None"], int]


class Messages:
    """A session's messages and Turns (groups) on its active branch: append, read, drop, delete.

    ``count`` gives the tokens of a message (the service's tokenizer); stored messages carry them.
    """

    def __init__(self, database: Connections, count: CountTokens) -> None:
        self._db = database
        self._count = count

    # -- reading ---------------------------------------------------------------------------------
    def history(self, session_id: str) -> tuple[Message, ...]:
        """The active branch's active messages, oldest first."""
        with self._db.connection() as conn:
            return branch_messages(conn, session_id, sessions.active_branch(conn, session_id))

    def all(self, session_id: str) -> tuple[Message, ...]:
        """The active branch's messages including dropped ones, oldest first."""
        with self._db.connection() as conn:
            return branch_messages(conn, session_id, sessions.active_branch(conn, session_id), include_dropped=True)

    def of_branch(self, session_id: str, branch_id: str, *, include_dropped: bool = False) -> tuple[Message, ...]:
        """The messages a given branch sees (not necessarily the active one), oldest first."""
        with self._db.connection() as conn:
            return branch_messages(conn, session_id, branch_id, include_dropped=include_dropped)

    def group(self, session_id: str, group_id: int) -> tuple[Message, ...]:
        """Every message of one group (any status); UnknownGroup when there is none."""
        with self._db.connection() as conn:
            sessions.require_session(conn, session_id)
            found = group_messages(conn, session_id, group_id)
        if not found:
            raise UnknownGroup(f"session {session_id} has no turn {group_id}")
        return found

    def group_ids(self, session_id: str) -> tuple[int, ...]:
        """Groups visible on the active branch (any status), oldest first."""
        with self._db.connection() as conn:
            return tuple(branch_group_ids(conn, session_id, sessions.active_branch(conn, session_id)))

    # -- writing ---------------------------------------------------------------------------------
    def append(
        self,
        session_id: str,
        role: str,
        content: str,
        *,
        group_id: int | None = None,
        tool_calls: Sequence[ToolCall] = (),
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        parsing_strategy: str = "openai",
        partial: bool = False,
        flags: Sequence[str] = (),
    ) -> Message:
        """Store one message on the active branch and return it (committed, or part of the caller's
        transaction). Without ``group_id`` a user or system message starts a new group and any other
        message joins the branch's latest group."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        if role == "tool" and not tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        if tool_calls and role != "assistant":
            raise ValueError("only assistant messages carry tool calls")
        if group_id is not None and group_id < 1:
            raise ValueError(f"group ids start at 1, got {group_id}")
        tokens = self._count(role, content, tool_calls, tool_call_id)
        with self._db.transaction() as conn:
            branch_id = sessions.active_branch(conn, session_id)
            if group_id is None:
                groups = branch_group_ids(conn, session_id, branch_id)
                if role in ("user", "system") or not groups:
                    group_id = sessions.allocate_group(conn, session_id)
                else:
                    group_id = groups[-1]
            (stored,) = insert_messages(conn, session_id, branch_id, [NewMessage(
                group_id=group_id, role=role, content=content, tool_calls=tuple(tool_calls),
                tool_call_id=tool_call_id, tool_name=tool_name, parsing_strategy=parsing_strategy, tokens=tokens,
                flags=tuple(flags), partial=partial)])
        return stored

    def insert(self, session_id: str, new: Sequence[NewMessage]) -> list[Message]:
        """Store prepared messages (an import) on the session's active branch."""
        with self._db.transaction() as conn:
            return insert_messages(conn, session_id, sessions.active_branch(conn, session_id), new)

    def update(self, session_id: str, message_id: int, content: str, *, partial: bool = False,
               tool_calls: Sequence[ToolCall] | None = None) -> Message:
        """Rewrite a stored message's text, e.g. a streamed reply as it grows or when it ends (then with the tool
        calls it made, when given)."""
        if tool_calls:
            tool_calls = tuple(tool_calls)
        with self._db.transaction() as conn:
            current = get_message(conn, message_id)
            if current is None or current.session_id != session_id:
                raise NotFound(f"session {session_id} has no message {message_id}")
            if tool_calls and current.role != "assistant":
                raise ValueError("only assistant messages carry tool calls")
            calls = current.tool_calls if tool_calls is None else tool_calls
            tokens = self._count(current.role, content, calls, current.tool_call_id)
            return update_message(conn, message_id, content=content, tokens=tokens, partial=partial,
                                  tool_calls=tool_calls)

    def settle_last_turn(self, session_id: str) -> Message | None:
        """After a turn that ended with its process (``kill -9``, a closed terminal): the last turn of the active
        branch, if its user message got no reply at all, is flagged ``unanswered`` and dropped (kept, left out of
        plans, so the next turn never sends two user messages in a row), and that message is returned; a reply
        saved mid-stream stays as it is (partial) and is returned. None when the last turn is whole."""
        with self._db.transaction() as conn:
            branch_id = sessions.active_branch(conn, session_id)
            groups = branch_group_ids(conn, session_id, branch_id)
            if not groups:
                return None
            turn = group_messages(conn, session_id, groups[-1])
            replies = [m for m in turn if m.role == "assistant"]
            if replies:
                return replies[-1] if replies[-1].partial else None
            asked = [m for m in turn if m.role == "user" and m.status == "active"]
            if not asked:
                return None
            user = asked[0]
            set_flags(conn, user.id, tuple(dict.fromkeys((*user.flags, UNANSWERED_FLAG))))
            set_group_status(conn, session_id, user.group_id, "dropped")
            return get_message(conn, user.id)

    def set_flags(self, session_id: str, message_id: int, flags: Sequence[str]) -> None:
        with self._db.transaction() as conn:
            current = get_message(conn, message_id)
            if current is None or current.session_id != session_id:
                raise NotFound(f"session {session_id} has no message {message_id}")
            set_flags(conn, message_id, flags)

    def drop(self, session_id: str, group_id: int) -> None:
        """Mark a group dropped: kept in the store, left out of plans and keyword search."""
        self._set_status(session_id, group_id, "dropped")

    def restore(self, session_id: str, group_id: int) -> None:
        """Undo a drop."""
        self._set_status(session_id, group_id, "active")

    def _set_status(self, session_id: str, group_id: int, status: str) -> None:
        with self._db.transaction() as conn:
            sessions.require_session(conn, session_id)
            set_group_status(conn, session_id, group_id, status)

    def remove(self, session_id: str, group_id: int) -> None:
        """Permanently delete a group's messages."""
        with self._db.transaction() as conn:
            sessions.require_session(conn, session_id)
            delete_group(conn, session_id, group_id)

    def undoable(self, session_id: str) -> int | None:
        """The group :meth:`undo` would delete: the last one written on the active branch (None when the branch
        has none of its own: undo never reaches across a fork into the parent's turns)."""
        with self._db.connection() as conn:
            branch_id = sessions.active_branch(conn, session_id)
            for group_id in reversed(branch_group_ids(conn, session_id, branch_id)):
                return group_id if group_branch(conn, session_id, group_id) == branch_id else None
            return None

    def undo(self, session_id: str) -> int | None:
        """Delete the last group written on the active branch; returns its id (None: nothing to undo)."""
        with self._db.transaction() as conn:
            group_id = self.undoable(session_id)
            if group_id is not None:
                delete_group(conn, session_id, group_id)
            return group_id
