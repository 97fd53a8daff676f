"""query_db's session scope is what its connection holds, not a check on the SQL text: however the
statement names things (a CTE or alias called ``messages``, subqueries, ``main.`` / ``temp.`` prefixes,
any table of any store component), no row of another session comes back."""
from __future__ import annotations

import json
import sqlite3

import pytest

from ctxbench.config import LLMConfig
from ctxbench.llm.tools import ToolBox
from ctxbench.records.messages import ToolCall
from ctxbench.store.schema import components

MARK = "OTHER-SESSION-MARK"


@pytest.fixture
def sessions(wb):
    mine = wb.new_session("mine")
    wb.messages.append(mine, "user", "my own question")
    wb.messages.append(mine, "assistant", "my own answer")
    other = wb.new_session(f"title {MARK}")
    wb.messages.append(other, "user", f"{MARK} in a user message")
    wb.messages.append(other, "assistant", f"{MARK} in a reply")
    wb.memory.set_state(other, f"### STATE\n{MARK}")
    wb.memory.set_scratchpad(other, MARK)
    return mine, other


def _query(wb, sid, sql):
    return ToolBox(wb, sid, LLMConfig()).run(ToolCall("q", "query_db", json.dumps({"sql": sql})))


def _store_tables(wb) -> list[str]:
    rows = wb.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    return sorted(r[0] for r in rows if not r[0].startswith("sqlite_"))


def test_every_component_has_tables_to_try(wb):
    tables = _store_tables(wb)
    assert {name for name, _ in components()} >= {"core", "index", "vectors", "proxy"}
    assert {"messages", "plans", "sessions", "code_cards", "card_vectors"} <= set(tables)


DRESSED_UP = [
    "WITH messages AS (SELECT * FROM main.messages) SELECT session_id, content FROM messages",
    "WITH messages AS (SELECT * FROM messages) SELECT * FROM messages",
    "WITH m AS (SELECT * FROM temp.messages) SELECT content FROM m",
    "SELECT content FROM (SELECT * FROM main.messages) AS messages",
    "SELECT x.content FROM main.messages AS x",
    "SELECT content FROM messages WHERE id IN (SELECT id FROM main.messages)",
    "SELECT content FROM temp.messages",
    "SELECT content FROM main.messages",
    "SELECT group_concat(content) AS c FROM messages",
    "SELECT content FROM messages UNION ALL SELECT content FROM main.messages",
    "SELECT * FROM sqlite_temp_master",
    "SELECT * FROM temp.sqlite_master",
    "SELECT * FROM main.sqlite_master",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
    "SELECT content FROM messages, r",
]


@pytest.mark.parametrize("sql", DRESSED_UP)
def test_dressed_up_sql_sees_only_this_session(wb, sessions, sql):
    mine, _ = sessions
    out = _query(wb, mine, sql)
    assert MARK not in out.content
    if out.ok:
        assert "my own" in out.content or "no rows" in out.content or "sql" in out.content.lower()


def test_a_cte_named_messages_over_main_returns_no_foreign_row(wb, sessions):
    mine, other = sessions
    out = _query(wb, mine, "WITH messages AS (SELECT * FROM main.messages) SELECT session_id, content FROM messages")
    assert other not in out.content and MARK not in out.content
    assert not out.ok and "holds one table, `messages`" in out.content  # says where to look instead
    plain = _query(wb, mine, "WITH messages AS (SELECT * FROM temp.messages) SELECT content FROM messages ORDER BY id")
    assert plain.ok
    assert [json.loads(line)["content"] for line in plain.content.splitlines()] == ["my own question",
                                                                                   "my own answer"]


def test_every_table_of_every_component_is_out_of_reach(wb, sessions):
    mine, other = sessions
    for table in _store_tables(wb):
        for name in (table, f"main.{table}", f"temp.{table}", f'"{table}"'):
            for sql in (f"SELECT * FROM {name}", f"WITH {table} AS (SELECT * FROM {name}) SELECT * FROM {table}",
                        f"SELECT * FROM messages WHERE EXISTS (SELECT 1 FROM {name})"):
                out = _query(wb, mine, sql)
                assert MARK not in out.content and other not in out.content, (sql, out.content)
                if table not in ("messages",):
                    assert not out.ok or "no rows" in out.content or "my own" in out.content, (sql, out.content)


def test_the_other_session_sees_only_its_own_rows(wb, sessions):
    mine, other = sessions
    out = _query(wb, other, "WITH messages AS (SELECT * FROM temp.messages) SELECT content FROM messages")
    assert MARK in out.content and "my own" not in out.content


def test_the_store_file_is_not_reachable_by_attach(wb, sessions, tmp_path):
    mine, _ = sessions
    out = _query(wb, mine, f"ATTACH DATABASE '{wb.db_path}' AS again")
    assert not out.ok and "attach" in out.content.lower()
    out = _query(wb, mine, "SELECT * FROM store.messages")
    assert not out.ok and MARK not in out.content


def test_the_copy_is_private_and_gone_after_the_call(wb, sessions):
    mine, _ = sessions
    assert _query(wb, mine, "SELECT count(*) AS n FROM messages").content == '{"n": 2}'
    # nothing was written to the store, no table or view was added
    assert not [r for r in wb.conn.execute("SELECT name FROM sqlite_temp_master")]
    with sqlite3.connect(wb.db_path) as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 4
