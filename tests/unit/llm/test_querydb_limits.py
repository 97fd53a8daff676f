"""query_db cannot allocate huge values, cuts long values as they are fetched, and may look into tool_calls
with json_each / json_tree while other table-valued functions are refused with a reason that says so."""
from __future__ import annotations

import json

import pytest

from ctxbench.config import Config, LLMConfig
from ctxbench.store.querydb import run_query
from ctxbench.llm.tools import ToolBox
from ctxbench.records.messages import ToolCall
from ctxbench.service.workbench import Workbench

LIMITS = LLMConfig(query_db_max_chars=1000, query_db_length_factor=4)  # values up to 4000 bytes


@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "ctx.db", Config()) as workbench:
        yield workbench


@pytest.fixture
def session(wb):
    sid = wb.new_session("s")
    wb.messages.append(sid, "user", "find the parser")
    wb.messages.append(sid, "assistant", "", tool_calls=(ToolCall("c1", "grep", '{"q": "parser"}'),
                                                        ToolCall("c2", "read_file", '{"path": "a.py"}')))
    wb.messages.append(sid, "tool", "parser.py:1", tool_call_id="c1", tool_name="grep")
    wb.messages.append(sid, "tool", "L" * 10_000, tool_call_id="c2", tool_name="read_file")  # a long stored output
    return sid


def _query(wb, sid, sql, config=LIMITS):
    return ToolBox(wb, sid, config).run(ToolCall("q", "query_db", json.dumps({"sql": sql})))


@pytest.mark.parametrize("sql", ["SELECT randomblob(1000000000) AS b", "SELECT length(zeroblob(500000)) AS n",
                                 "SELECT group_concat(content || content || content) AS g FROM messages"])
def test_no_value_may_grow_past_the_length_limit(wb, session, sql):
    out = _query(wb, session, sql)
    assert not out.ok
    assert "grew past" in out.content
    assert int(out.content.split("grew past ")[1].split()[0]) < 20_000  # the session's longest row sets the floor


def test_a_long_stored_message_can_still_be_read_and_is_cut_per_value(wb, session):
    out = _query(wb, session, "SELECT content FROM messages WHERE tool_name = 'read_file'")
    assert out.ok and out.content.startswith('{"content": "LLLL')
    assert "[result cut at 1000 characters" in out.content
    short = _query(wb, session, "SELECT length(content) AS n, substr(content, 1, 5) AS head FROM messages "
                                "WHERE tool_name = 'read_file'")
    assert json.loads(short.content) == {"n": 10_000, "head": "LLLLL"}
    rest = _query(wb, session, "SELECT substr(content, 9601) AS tail FROM messages WHERE tool_name = 'read_file'")
    assert json.loads(rest.content) == {"tail": "L" * 400}
    whole = _query(wb, session, "SELECT * FROM messages ORDER BY length(content) DESC, id")  # sorts whole rows
    assert whole.ok and whole.content.startswith('{"id": 4,')


def test_values_are_cut_as_they_are_fetched(wb, session):
    result = run_query(wb.db_path, session, "SELECT content FROM messages ORDER BY id", max_rows=10,
                       max_steps=100_000, max_chars=50, length_factor=4, progress_steps=100)
    assert result.value_chars == 50
    assert [len(row[0]) for row in result.rows] == [15, 0, 11, 50]
    assert "values longer than 50 characters were cut" in result.render(10_000)


def test_json_each_and_json_tree_look_into_tool_calls(wb, session):
    out = _query(wb, session, "SELECT m.id, json_extract(j.value, '$.name') AS name "
                              "FROM messages m, json_each(m.tool_calls) j ORDER BY j.key")
    assert out.ok, out.content
    assert [json.loads(line)["name"] for line in out.content.splitlines()] == ["grep", "read_file"]
    tree = _query(wb, session, "SELECT count(*) AS n FROM messages m, json_tree(m.tool_calls) t WHERE t.key = 'id'")
    assert tree.ok and json.loads(tree.content) == {"n": 2}
    literal = _query(wb, session, "SELECT value FROM json_each('[1, 2]')")
    assert [json.loads(line) for line in literal.content.splitlines()] == [{"value": 1}, {"value": 2}]


@pytest.mark.parametrize("sql", ["SELECT * FROM pragma_table_info('plans')", "SELECT name FROM pragma_table_list",
                                 "SELECT * FROM dbstat"])
def test_other_table_valued_functions_are_refused_with_a_true_reason(wb, session, sql):
    out = _query(wb, session, sql)
    assert not out.ok
    assert "table-valued functions are not allowed (except json_each and json_tree)" in out.content
    assert "refused: update" not in out.content
