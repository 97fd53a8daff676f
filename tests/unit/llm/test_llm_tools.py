"""The model's tools, run against a real store."""
from __future__ import annotations

import hashlib
import json

import pytest

from ctxbench.config import Config, LLMConfig
from ctxbench.store.querydb import QueryRefused, run_query
from ctxbench.llm.tools import TOOL_NAMES, TOOL_SCHEMAS, ToolBox, normalise_pin_target
from ctxbench.records.messages import ToolCall
from ctxbench.service.workbench import Workbench


@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "ctx.db", Config()) as workbench:
        yield workbench


@pytest.fixture
def sessions(wb):
    mine = wb.new_session("mine")
    wb.messages.append(mine, "user", "the refactor plan is to split ledger.py")
    wb.messages.append(mine, "assistant", "ok, splitting ledger.py into two modules")
    other = wb.new_session("other")
    wb.messages.append(other, "user", "SECRET from another session")
    return mine, other


def _box(wb, session_id, **llm) -> ToolBox:
    return ToolBox(wb, session_id, LLMConfig(**llm))


def _call(box: ToolBox, name: str, **args):
    return box.run(ToolCall("c1", name, json.dumps(args)))


def _db_digest(wb) -> str:
    rows = wb.conn.execute("SELECT * FROM messages ORDER BY id").fetchall()
    return hashlib.sha256(json.dumps([list(r) for r in rows]).encode()).hexdigest()


def test_schemas_are_function_tools_with_unique_names():
    assert len(set(TOOL_NAMES)) == len(TOOL_SCHEMAS) == 6
    for schema in TOOL_SCHEMAS:
        assert schema["type"] == "function"
        assert schema["function"]["parameters"]["type"] == "object"


def test_query_db_reads_only_this_sessions_messages(wb, sessions):
    mine, _ = sessions
    out = _call(_box(wb, mine), "query_db",
                sql="SELECT role, content FROM messages WHERE status != 'dropped' AND content LIKE '%refactor plan%' "
                    "ORDER BY id DESC LIMIT 5")
    assert out.ok
    assert [json.loads(line) for line in out.content.splitlines()] == [
        {"role": "user", "content": "the refactor plan is to split ledger.py"}]
    count = _call(_box(wb, mine), "query_db", sql="SELECT count(*) AS n FROM messages")
    assert json.loads(count.content) == {"n": 2}


@pytest.mark.parametrize("sql", [
    "INSERT INTO messages (role, content) VALUES ('user', 'x')",
    "UPDATE messages SET content = 'x'",
    "DELETE FROM messages",
    "/* harmless */ DELETE FROM main.messages",
    "WITH gone AS (SELECT 1) DELETE FROM main.messages",
    "REPLACE INTO main.messages (id, content) VALUES (1, 'x')",
    "UPDATE main.messages SET content = 'x' WHERE id IN (SELECT id FROM messages)",
    "ATTACH DATABASE 'copy.db' AS other",
    "VACUUM INTO 'copy.db'",
    "PRAGMA writable_schema = 1",
    "PRAGMA journal_mode = DELETE",
    "CREATE TABLE t (x)",
    "CREATE TEMP TABLE t AS SELECT * FROM messages",
    "DROP VIEW messages",
    "DROP TABLE main.messages",
    "BEGIN IMMEDIATE",
    "SELECT 1; DELETE FROM main.messages",
    "SELECT load_extension('evil')",
    "SELECT * FROM main.messages",
    "SELECT * FROM plans",
    "SELECT name FROM sqlite_master",
])
def test_query_db_refuses_writes_and_escapes(wb, sessions, sql, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mine, _ = sessions
    before = _db_digest(wb)
    out = _call(_box(wb, mine), "query_db", sql=sql)
    assert not out.ok and out.content.startswith("error:")
    assert _db_digest(wb) == before
    assert not (tmp_path / "copy.db").exists()
    assert "SECRET" not in out.content


def test_query_db_is_refused_by_sqlite_not_by_the_text(wb, sessions):
    """The same words inside a string literal are harmless and run."""
    mine, _ = sessions
    out = _call(_box(wb, mine), "query_db", sql="SELECT 'DELETE FROM messages; ATTACH x' AS s")
    assert out.ok and json.loads(out.content) == {"s": "DELETE FROM messages; ATTACH x"}


def test_query_db_caps_rows_and_stops_runaway_queries(wb, sessions):
    mine, _ = sessions
    capped = _call(_box(wb, mine, query_db_max_rows=1), "query_db", sql="SELECT id FROM messages")
    assert capped.ok and capped.content.splitlines()[0] == '{"id": 1}' and "only the first 1 rows" in capped.content
    runaway = _call(_box(wb, mine, query_db_max_steps=10_000), "query_db",
                    sql="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
    assert not runaway.ok and "stopped after" in runaway.content


def test_run_query_needs_a_database_file(tmp_path):
    with pytest.raises(QueryRefused):
        run_query(tmp_path / "missing.db", "s", "SELECT 1", max_rows=1, max_steps=1000)


def test_scratchpad_read_update_append(wb, sessions):
    mine, _ = sessions
    box = _box(wb, mine)
    assert _call(box, "manage_scratchpad", action="read").content == "(the scratchpad is empty)"
    assert _call(box, "manage_scratchpad", action="update", content="1. split ledger").ok
    assert _call(box, "manage_scratchpad", action="append", content="2. add tests").ok
    assert wb.memory.scratchpad(mine) == "1. split ledger\n2. add tests"
    assert _call(box, "manage_scratchpad", action="read").content == "1. split ledger\n2. add tests"
    bad = _call(box, "manage_scratchpad", action="erase")
    assert not bad.ok and "read, update, append" in bad.content
    assert not _call(box, "manage_scratchpad", action="append").ok  # no content


def test_memos_save_and_retrieve_by_words_or_tags(wb, sessions):
    mine, _ = sessions
    box = _box(wb, mine)
    saved = _call(box, "save_memo", content="Money is Decimal, never float", tags=["gotcha", "money"])
    assert saved.ok and "gotcha" in saved.content
    _call(box, "save_memo", content="Importers stream rows lazily", tags=["arch-decision"])
    by_tag = _call(box, "retrieve_memos", tags=["arch-decision"])
    assert "Importers stream rows lazily" in by_tag.content and "Decimal" not in by_tag.content
    by_words = _call(box, "retrieve_memos", query="decimal float")
    assert "Money is Decimal" in by_words.content
    assert _call(box, "retrieve_memos", query="nothing matches this").content == "(no memos found)"
    assert not _call(box, "save_memo", content="  ").ok


def test_suggest_pins_returns_suggestions_and_never_pins(wb, sessions):
    mine, _ = sessions
    out = _call(_box(wb, mine), "suggest_pins", items=["ledgerlite.ledger.Ledger", "ledgerlite/io.py", "12"],
                reason="foundational types")
    assert out.ok
    assert [s.target for s in out.suggestions] == ["card:ledgerlite.ledger.Ledger", "path:ledgerlite/io.py", "group:12"]
    assert {s.source for s in out.suggestions} == {"model"}
    assert wb.pins.list(mine) == ()


def test_bad_calls_are_reported_to_the_model(wb, sessions):
    mine, _ = sessions
    box = _box(wb, mine)
    assert box.run(ToolCall("c", "rm_rf", "{}")).content.startswith("error: unknown tool")
    assert "not valid JSON" in box.run(ToolCall("c", "query_db", "{oops")).content
    assert box.run(ToolCall("c", "query_db", "[1]")).content == "error: arguments must be a JSON object"
    no_index = box.run(ToolCall("c", "request_code_context", '{"symbol": "a.b"}'))
    assert not no_index.ok and "no code index" in no_index.content


def test_request_code_context_expands_from_the_code_context(wb, sessions):
    mine, _ = sessions

    class Code:
        def expand(self, symbol):
            return "def total(self):\n    return sum(...)" if symbol == "ledger.Ledger.total" else None

    box = ToolBox(wb, mine, LLMConfig(), code=Code())
    assert _call(box, "request_code_context", symbol="ledger.Ledger.total").content.startswith("def total")
    missing = _call(box, "request_code_context", symbol="nope")
    assert not missing.ok and "unknown symbol" in missing.content


@pytest.mark.parametrize("raw, target", [
    ("group:3", "group:3"), ("`pkg.mod.f`", "card:pkg.mod.f"), ("src/app.py", "path:src/app.py"), ("7", "group:7"),
])
def test_pin_targets_are_normalised(raw, target):
    assert normalise_pin_target(raw) == target
