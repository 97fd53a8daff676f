"""Transcripts without times: what the transcript carries (date stamps in the text, the order of its messages, an
aider run's start) gives each message its time; a transcript that carries none gets the import's time."""
from __future__ import annotations

import json

import pytest

from ctxbench.config import Config
from ctxbench.records.stamps import leading_stamp, parse_stamp
from ctxbench.service.workbench import Workbench


@pytest.mark.parametrize("text, iso", [
    ("[1:56 pm on 8 May, 2023] Caroline: hi", "2023-05-08T13:56:00"),
    ("[2023-05-08 09:05] deploy done", "2023-05-08T09:05:00"),
    ("[May 8, 2023] notes", "2023-05-08T00:00:00"),
    ("[12:03] only a clock", ""),
    ("[WIP] not a stamp", ""),
    ("no stamp at all [8 May 2023]", ""),
])
def test_a_leading_date_stamp_gives_the_time_it_names(text, iso):
    assert leading_stamp(text) == iso


def test_an_impossible_date_names_no_time():
    assert parse_stamp("31 February 2023") == ""


def _import(tmp_path, rows, fmt="openai", name="t.jsonl"):
    path = tmp_path / name
    path.write_text(rows if isinstance(rows, str) else "".join(json.dumps(r) + "\n" for r in rows))
    with Workbench(tmp_path / "w.db", Config()) as wb:
        sid = wb.import_file(path, fmt)
        return [m.created_at for m in wb.messages.history(sid)]


def test_an_openai_jsonl_without_times_takes_them_from_the_stamps_in_its_text_and_its_order(tmp_path):
    times = _import(tmp_path, [
        {"role": "user", "content": "[1:56 pm on 8 May, 2023] Caroline: I went to a support group yesterday."},
        {"role": "assistant", "content": "Melanie: That sounds meaningful."},  # no stamp: the one before it
        {"role": "user", "content": "[10:37 am on 27 June, 2023] Caroline: I am painting again."},
        {"role": "assistant", "content": "[10:38 am on 27 June, 2023] Melanie: Show me!"},
    ])
    assert times == ["2023-05-08T13:56:00", "2023-05-08T13:56:00", "2023-06-27T10:37:00", "2023-06-27T10:38:00"]


def test_times_the_transcript_states_are_kept_and_none_at_all_means_the_import_time(tmp_path):
    kept = _import(tmp_path, [{"role": "user", "content": "[8 May 2023] hi", "created_at": "2024-01-02T03:04:05"}])
    assert kept == ["2024-01-02T03:04:05"]
    plain = _import(tmp_path, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
                    name="plain.jsonl")
    assert plain[0] and plain[0] == plain[1] and not plain[0].startswith("2023")


def test_an_aider_history_gives_each_run_its_start_time(tmp_path):
    history = ("# aider chat started at 2024-05-01 10:00:00\n\n#### fix the bug\n\nDone.\n\n"
               "# aider chat started at 2024-05-03 09:30:00\n\n#### add a test\n\nAdded.\n")
    times = _import(tmp_path, history, fmt="aider", name=".aider.chat.history.md")
    assert times[0] == "2024-05-01T10:00:00" and times[-1] == "2024-05-03T09:30:00"
