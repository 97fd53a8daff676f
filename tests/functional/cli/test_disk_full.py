"""A full disk ends `import` and `chat` with one line and exit 1, never a traceback, and the store stays whole.

The disk is filled the way SQLite meets it: every connection the store opens gets ``PRAGMA max_page_count`` at the
database's size, so the first write that needs a new page fails with SQLITE_FULL ("database or disk is full"),
as on a disk with no room left.
"""
from __future__ import annotations

import json
import os
import sqlite3

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.service.workbench import Workbench
from ctxbench.store import db as db_module
from llm_server import LLMServer, text

ENV = {"CTXBENCH_CONFIG": os.devnull, "CTXBENCH_TEST_KEY": "k"}


def _transcript(path, turns: int):
    rows = []
    for n in range(turns):
        rows.append({"role": "user", "content": f"question {n} " + "lorem ipsum dolor " * 40})
        rows.append({"role": "assistant", "content": f"answer {n} " + "sit amet consectetur " * 40})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def full_disk(monkeypatch):
    """From now on the store's connections cannot grow the database file."""
    real_connect = db_module.connect

    def connect(path, **kw):
        conn = real_connect(path, **kw)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    def fill():
        monkeypatch.setattr(db_module, "connect", connect)

    return fill


def _whole(db) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def _one_error_line(result) -> str:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.output
    return errors[0]


def test_import_on_a_full_disk_is_one_line_exit_1_and_the_store_stays_whole(tmp_path, full_disk):
    db = tmp_path / "ctx.db"
    small = _transcript(tmp_path / "small.jsonl", 2)
    assert CliRunner().invoke(main, ["import", str(small), "--db", str(db)], env=ENV).exit_code == 0
    full_disk()
    big = _transcript(tmp_path / "big.jsonl", 400)
    result = CliRunner().invoke(main, ["import", str(big), "--db", str(db)], env=ENV)
    assert result.exit_code == 1, (result.output, result.exception)
    line = _one_error_line(result)
    assert "the disk is full" in line and str(db) in line
    _whole(db)
    with Workbench(db, Config()) as wb:
        assert len(wb.sessions.list()) == 1  # the big import left nothing half-stored


def test_chat_on_a_full_disk_is_one_line_exit_1_and_the_store_stays_whole(tmp_path, full_disk):
    db = tmp_path / "ctx.db"
    with LLMServer([text("first answer"), text("a long answer " * 400)]) as server:
        args = ["--db", str(db), "--base-url", server.base_url, "--model", "m", "--api-key-env", "CTXBENCH_TEST_KEY"]
        assert CliRunner().invoke(main, ["chat", "hello", *args], env=ENV).exit_code == 0
        with Workbench(db, Config()) as wb:
            (session,) = wb.sessions.list()
        full_disk()
        result = CliRunner().invoke(main, ["chat", "tell me more " * 300, "--session", session.id, *args], env=ENV)
    assert result.exit_code == 1, (result.output, result.exception)
    assert "the disk is full" in _one_error_line(result)
    _whole(db)
