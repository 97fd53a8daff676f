"""``query_db``: read-only SQL over one session's messages, enforced by what the connection holds.

The model's SQL runs on a connection of its own to a private, anonymous database (SQLite deletes it
on close). Before the statement runs, this session's rows are copied from the store file (attached
read-only, then detached) into a TEMP table ``messages``; nothing else of the store is on the
connection, so no spelling of the SQL — a CTE or alias named ``messages``, a subquery, a ``main.`` or
``temp.`` prefix, another table's name — can reach another session's rows, plans or memos: they are
not there. On top of that an authorizer allows nothing but SELECT, reads of that table, functions
(except ``load_extension``), the table-valued functions ``json_each`` / ``json_tree`` (to look into
``tool_calls``) and recursive CTEs: every write, ATTACH, PRAGMA, transaction, DDL, other
table-valued function (``pragma_table_info`` ...) is refused by SQLite while it compiles the
statement, however the text is dressed up. A progress handler stops runaway queries; SQLite's length
limit keeps any one value small (``randomblob(1e9)`` fails instead of allocating a gigabyte); results
are capped in rows, in characters per value and in characters overall.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ctxbench.config import LLMConfig

_DEFAULTS = LLMConfig()

VIEW = "messages"
VIEW_COLUMNS = (
    "id", "branch_id", "group_id", "role", "content", "tool_calls", "tool_call_id", "tool_name",
    "parsing_strategy", "status", "created_at", "tokens", "partial",
)
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})
# table-valued functions the model may use; they are set up before the authorizer is installed
# (their first use writes the schema cache, which the authorizer sees as an UPDATE of sqlite_master)
TABLE_VALUED = ("json_each", "json_tree")
_SCHEMA_TABLE = "sqlite_master"
# room per column, on top of its value, in a record SQLite builds (header varint, 8-byte integers, final NUL)
RECORD_OVERHEAD_BYTES = 18


class QueryRefused(Exception):
    """SQLite refused the statement (a write, an ATTACH, a PRAGMA, another table ...)."""


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]
    truncated: bool

    value_chars: int = 0  # when > 0: values longer than this were cut to it as they were fetched

    def render(self, max_chars: int) -> str:
        """JSON lines, one object per row, with a trailing note when rows, values or characters were cut."""
        lines = [json.dumps(dict(zip(self.columns, row)), ensure_ascii=False, default=str) for row in self.rows]
        text = "\n".join(lines) if lines else "(no rows)"
        note = ""
        if len(text) > max_chars:
            text = text[:max_chars]
            note = f"\n[result cut at {max_chars} characters; select fewer columns, substr() or add LIMIT]"
        elif self.truncated:
            note = f"\n[only the first {len(self.rows)} rows are shown; add LIMIT/OFFSET for more]"
        elif self.value_chars:
            note = f"\n[values longer than {self.value_chars} characters were cut; use substr() to read the rest]"
        return text + note


class _Authorizer:
    def __init__(self) -> None:
        self.denied: list[str] = []

    def __call__(self, action: int, arg1: str | None, arg2: str | None, dbname: str | None, source: str | None) -> int:
        if action == sqlite3.SQLITE_SELECT or action == sqlite3.SQLITE_RECURSIVE:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            # the connection holds only this session's copy: reads of it (under any alias or CTE) are fine
            if (dbname == "temp" and arg1 == VIEW) or dbname is None:
                return sqlite3.SQLITE_OK
            if dbname == "main" and arg1 in TABLE_VALUED:  # the columns of json_each(...) / json_tree(...)
                return sqlite3.SQLITE_OK
            self.denied.append(f"reading {dbname}.{arg1} directly (only the `{VIEW}` table of this session is here)")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_UPDATE and arg1 == _SCHEMA_TABLE:
            # only the first use of a table-valued function (pragma_table_info, dbstat, ...) does this;
            # a statement that updates sqlite_master itself is refused by SQLite before it gets here
            self.denied.append(f"table-valued functions are not allowed (except {' and '.join(TABLE_VALUED)})")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() in _DENIED_FUNCTIONS:
                self.denied.append(f"function {arg2}")
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        self.denied.append(_ACTION_NAMES.get(action, f"action {action}"))
        return sqlite3.SQLITE_DENY


_ACTIONS = (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA",
    "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE",
    "DROP_VTABLE", "SAVEPOINT",
)
_ACTION_NAMES = {getattr(sqlite3, "SQLITE_" + name): name.lower().replace("_", " ") for name in _ACTIONS}


def _cap(value: object, max_chars: int) -> tuple[object, bool]:
    """A fetched value cut to ``max_chars`` characters (bytes for blobs); True when it was cut."""
    if isinstance(value, (str, bytes)) and len(value) > max_chars:
        return value[:max_chars], True
    return value, False


def run_query(
    db_path: Path | str,
    session_id: str,
    sql: str,
    *,
    max_rows: int,
    max_steps: int,
    max_chars: int = _DEFAULTS.query_db_max_chars,
    length_factor: int = _DEFAULTS.query_db_length_factor,
    progress_steps: int = _DEFAULTS.query_db_progress_steps,
) -> QueryResult:
    """Run one read-only statement against ``session_id``'s messages; raises QueryRefused or sqlite3.Error.

    No value inside the query may grow past ``max_chars * length_factor`` bytes (or the session's
    longest stored value, so every message can still be read); each fetched value is cut to
    ``max_chars`` as it arrives, so a call holds at most one row's full values at a time.
    """
    path = Path(db_path)
    if str(db_path) == ":memory:" or not path.exists():
        raise QueryRefused("query_db needs the session's database file")
    # "" is a private temporary database (on disk when it grows, deleted on close): the only data the
    # model's statement can see is the copy of this session's rows made here
    conn = sqlite3.connect("", uri=True, check_same_thread=False)
    try:
        conn.execute("ATTACH DATABASE ? AS store", (f"{path.resolve().as_uri()}?mode=ro",))
        conn.execute(
            f"CREATE TEMP TABLE {VIEW} AS SELECT {', '.join(VIEW_COLUMNS)} FROM store.messages "
            "WHERE session_id = ? ORDER BY id", (session_id,)
        )
        conn.commit()
        conn.execute("DETACH DATABASE store")
        conn.execute("PRAGMA query_only = ON")
        for name in TABLE_VALUED:
            conn.execute(f"SELECT * FROM {name}('[]')").fetchall()
        # the longest row (a sort or a subquery holds whole rows as one record, which the limit also bounds)
        row_bytes = " + ".join(f"ifnull(length(CAST({c} AS BLOB)), 0)" for c in VIEW_COLUMNS)
        longest = conn.execute(f"SELECT ifnull(max({row_bytes}), 0) FROM {VIEW}").fetchone()[0]
        max_length = max(max_chars * length_factor, int(longest) + RECORD_OVERHEAD_BYTES * len(VIEW_COLUMNS))
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_length)
        authorizer = _Authorizer()
        conn.set_authorizer(authorizer)
        budget = {"steps": 0}

        def progress() -> int:
            budget["steps"] += progress_steps
            return 1 if budget["steps"] > max_steps else 0

        conn.set_progress_handler(progress, progress_steps)
        rows: list[tuple[object, ...]] = []
        values_cut = False
        try:
            cursor = conn.execute(sql)
            for _ in range(max_rows + 1):
                row = cursor.fetchone()
                if row is None:
                    break
                capped = [_cap(v, max_chars) for v in row]
                values_cut = values_cut or any(cut for _v, cut in capped)
                rows.append(tuple(v for v, _cut in capped))
        except (sqlite3.ProgrammingError, sqlite3.Warning) as exc:  # e.g. several statements at once
            raise QueryRefused(f"query_db runs exactly one SELECT statement ({exc})") from exc
        except sqlite3.DatabaseError as exc:
            if authorizer.denied:
                raise QueryRefused(
                    "query_db is read-only over the `messages` table of this session; refused: "
                    + ", ".join(dict.fromkeys(authorizer.denied))
                ) from exc
            if budget["steps"] > max_steps:
                raise QueryRefused(f"query stopped after {max_steps} steps; narrow it down or add LIMIT") from exc
            if "no such table" in str(exc):
                raise QueryRefused(f"{exc}: query_db holds one table, `{VIEW}` (this session's messages)") from exc
            if isinstance(exc, sqlite3.DataError) or "too big" in str(exc):
                raise QueryRefused(
                    f"a value in the query grew past {max_length} bytes; select less (substr(), LIMIT)"
                ) from exc
            raise
        columns = tuple(d[0] for d in cursor.description or ())
        truncated = len(rows) > max_rows
        return QueryResult(columns, tuple(rows[:max_rows]), truncated, max_chars if values_cut else 0)
    finally:
        conn.close()
