"""OpenAI JSONL import: validation with line numbers, Turn grouping, all-or-nothing storage."""
from __future__ import annotations

import json

import pytest

from ctxbench.config import Config
from ctxbench.service.workbench import Workbench
from ctxbench.store import messages as message_store
from ctxbench.tokens import count_message, get_tokenizer
from ctxbench.transcripts.openai import parse_lines
from ctxbench.records.transcripts import TranscriptError
from plan_requests import plan_of

GOOD = [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "Never touch the migrations folder."},
    {"role": "assistant", "content": "Understood."},
    {"role": "user", "content": [{"type": "text", "text": "list the"}, {"type": "text", "text": "files"}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    {"role": "assistant", "content": "Two files.", "flags": ["solution"]},
    {"role": "user", "content": "and now with gemini", "parsing_strategy": "gemini"},
    {"role": "assistant", "content": "", "parsing_strategy": "gemini", "tool_calls": [
        {"id": "g1", "function": {"name": "read_file", "arguments": {"path": "a.py"}}}]},
    {"role": "tool", "tool_call_id": "g1", "name": "read_file", "content": "print(1)", "parsing_strategy": "gemini"},
]


def _write(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def wb(tmp_path):
    bench = Workbench(tmp_path / "store.db", Config())
    yield bench
    bench.close()


def _counts(wb):
    return tuple(wb.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                 for t in ("sessions", "branches", "messages", "message_groups", "group_search"))


def test_parse_groups_turns_and_keeps_provider_tags():
    t = parse_lines([json.dumps(r) for r in GOOD])
    assert [m.group for m in t.messages] == [0, 1, 1, 2, 2, 2, 2, 3, 3, 3]
    assert t.messages[3].content == "list the\nfiles"
    assert t.messages[4].tool_calls[0].name == "ls" and t.messages[4].content == ""
    assert t.messages[5].tool_name == "ls"  # taken from the call it answers
    assert t.messages[8].tool_calls[0].arguments == '{"path": "a.py"}'
    assert [m.parsing_strategy for m in t.messages][-3:] == ["gemini"] * 3
    assert t.messages[6].flags == ("solution",)


def test_system_message_is_its_own_group_and_leading_assistant_gets_one():
    rows = [{"role": "assistant", "content": "hi"}, {"role": "system", "content": "s"},
            {"role": "assistant", "content": "after system"}, {"role": "user", "content": "u"}]
    assert [m.group for m in parse_lines([json.dumps(r) for r in rows]).messages] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "bad JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({"content": "x"}, "missing role"),
        ({"role": "wizard", "content": "x"}, "unknown role 'wizard'"),
        ({"role": "user", "content": 5}, "content must be a string"),
        ({"role": "user", "content": None}, "no content"),
        ({"role": "assistant", "content": "", "tool_calls": {"id": "x"}}, "tool_calls must be a list"),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "x", "function": {"name": ""}}]},
         "function.name"),
        ({"role": "tool", "content": "out"}, "no tool_call_id"),
        ({"role": "tool", "tool_call_id": "ghost", "content": "out"}, "'ghost'"),
        ({"role": "user", "content": "x", "tool_calls": []}, "only assistant messages"),
        ({"role": "user", "content": "x", "flags": "important"}, "flags must be a list"),
    ],
)
def test_malformed_line_names_line_number_and_problem(bad_line, message):
    rows = [json.dumps(GOOD[1]), "", json.dumps(GOOD[2]), bad_line if isinstance(bad_line, str) else json.dumps(bad_line)]
    with pytest.raises(TranscriptError) as info:
        parse_lines(rows)
    assert info.value.line == 4
    assert str(info.value).startswith("line 4: ")
    assert message in str(info.value)


def test_empty_transcript_is_an_error():
    with pytest.raises(TranscriptError, match="no messages"):
        parse_lines(["", "  "])


def test_invalid_utf8_is_reported_with_its_line(tmp_path, wb):
    path = tmp_path / "bin.jsonl"
    path.write_bytes(json.dumps(GOOD[1]).encode() + b"\n" + b'{"role": "user", "content": "\xff"}\n')
    with pytest.raises(TranscriptError, match="line 2: not valid UTF-8"):
        wb.import_file(path)


def test_import_round_trip(tmp_path, wb):
    sid = wb.import_file(_write(tmp_path / "chat.jsonl", GOOD))
    history = wb.messages.history(sid)
    assert [(m.role, m.content) for m in history] == [
        (r["role"], m.content) for r, m in zip(GOOD, history)
    ]
    assert [m.group_id for m in history] == [1, 2, 2, 3, 3, 3, 3, 4, 4, 4]
    assert history[4].tool_calls[0].id == "call_1"
    assert history[5].tool_call_id == "call_1"
    tok = get_tokenizer()
    assert all(m.tokens == count_message(tok, m.to_openai()) for m in history)
    info = wb.sessions.info(sid)
    assert (info.title, info.message_count, info.group_count) == ("chat", 10, 4)
    # the next user message opens group 5
    assert wb.messages.append(sid, "user", "next question").group_id == 5


def test_malformed_import_leaves_database_unchanged(tmp_path, wb):
    wb.import_file(_write(tmp_path / "ok.jsonl", GOOD))
    before = _counts(wb)
    bad = _write(tmp_path / "bad.jsonl", GOOD[:5] + ['{"role": "assistant", "content": 3}'])
    with pytest.raises(TranscriptError, match="line 6"):
        wb.import_file(bad)
    assert _counts(wb) == before


def test_crash_mid_import_leaves_nothing_behind(tmp_path, wb, monkeypatch):
    real = message_store.reindex_group
    calls = []

    def explode(conn, session_id, group_id, *rest):
        calls.append(group_id)
        if len(calls) == 3:
            raise RuntimeError("disk on fire")
        real(conn, session_id, group_id, *rest)

    monkeypatch.setattr(message_store, "reindex_group", explode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        wb.import_file(_write(tmp_path / "chat.jsonl", GOOD))
    assert len(calls) == 3  # messages and two groups were written before the crash
    assert _counts(wb) == (0, 0, 0, 0, 0)
    monkeypatch.setattr(message_store, "reindex_group", real)
    # the connection is still usable afterwards
    sid = wb.import_file(_write(tmp_path / "chat.jsonl", GOOD))
    assert len(wb.messages.history(sid)) == len(GOOD)


def test_an_external_id_travels_from_the_transcript_to_the_plan_items(wb, tmp_path):
    rows = [
        {"role": "user", "content": "I adopted a turtle named Shelly.", "id": "D1:1", "created_at": "2023-05-08T13:56:00"},
        {"role": "assistant", "content": "What a lovely name!", "id": "D1:2"},
        {"role": "user", "content": "no id on this one"},
        {"role": "assistant", "content": "numbers work too", "id": 7},
    ]
    sid = wb.import_file(_write(tmp_path / "ids.jsonl", rows))
    stored = wb.messages.history(sid)
    assert [m.external_id for m in stored] == ["D1:1", "D1:2", "", "7"]
    assert stored[0].created_at == "2023-05-08T13:56:00"  # the source's own time is kept
    plan = plan_of(wb, sid, "what is the turtle called?", budget=4000, strategy="window", store=True)
    by_message = {item.message_ids[0]: item for item in plan.items if item.kind == "history_atom"}
    assert by_message[stored[0].id].external_ids == ("D1:1",)
    assert by_message[stored[2].id].external_ids == ()
    assert by_message[stored[0].id].to_json()["external_ids"] == ["D1:1"]
    assert "external_ids" not in by_message[stored[2].id].to_json()
    assert wb.plans.get(plan.plan_id) == plan  # stored and read back with the ids


def test_a_bad_external_id_names_its_line(tmp_path):
    with pytest.raises(TranscriptError) as err:
        parse_lines([json.dumps({"role": "user", "content": "hi", "id": ["D1:1"]})])
    assert err.value.line == 1 and "id must be a string or a number" in str(err.value)
