"""A database that cannot be opened or used is a one-line error (exit 2) for every command, never a traceback."""
from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.store.db import StoreError, connect

NOT_A_DB = b"this is a text file, not an SQLite database; " * 4


@pytest.fixture
def not_a_db(tmp_path):
    path = tmp_path / "notadb.db"
    path.write_bytes(NOT_A_DB)
    return path


def test_connect_wraps_a_file_that_is_not_a_database(not_a_db):
    with pytest.raises(StoreError, match=r"cannot open database .*notadb\.db: file is not a database"):
        connect(not_a_db)
    with pytest.raises(StoreError, match="file is not a database"):
        connect(not_a_db, readonly=True)
    assert not_a_db.read_bytes() == NOT_A_DB  # nothing written to it


def test_connect_wraps_a_folder_that_cannot_be_made(tmp_path):
    blocker = tmp_path / "plain_file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match=r"cannot open database .*plain_file/sub/x\.db"):
        connect(blocker / "sub" / "x.db")


@pytest.mark.parametrize("args", [["sessions"], ["sessions", "--json"], ["show", "abc"], ["replay", "s1"],
                                  ["chat", "hello"], ["retrieve", "query", "--no-semantic"]])
def test_every_command_gives_one_error_line_and_exit_2(tmp_path, monkeypatch, not_a_db, args):
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [*args, "--db", str(not_a_db)])
    assert result.exit_code == 2, (result.output, result.exception)
    assert not isinstance(result.exception, StoreError) and "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert lines == [f"error: cannot open database {not_a_db}: file is not a database"]


def test_a_db_path_under_a_file_is_one_error_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    blocker = tmp_path / "plain_file"
    blocker.write_text("x")
    result = CliRunner().invoke(main, ["sessions", "--db", str(blocker / "x.db")])
    assert result.exit_code == 2
    assert result.output.startswith("error: cannot open database ") and result.output.count("\n") == 1
