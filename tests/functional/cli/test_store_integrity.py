"""A store with one bad page in the middle is refused by the commands that write (`import`, `branch fork`) before
they write: one line, the file left as it was."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.service.workbench import Workbench

ENV = {"CTXBENCH_CONFIG": os.devnull}


def _transcript(path, turns: int, tag: str):
    rows = []
    for n in range(turns):
        rows.append({"role": "user", "content": f"{tag} question {n} " + "lorem ipsum dolor " * 30})
        rows.append({"role": "assistant", "content": f"{tag} answer {n} " + "sit amet consectetur " * 30})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def damaged_store(tmp_path):
    """A real store (one imported session of 300 turns), closed, with one page in its middle overwritten; the
    session's id."""
    db = tmp_path / "ctx.db"
    result = CliRunner().invoke(main, ["import", str(_transcript(tmp_path / "a.jsonl", 300, "first")), "--db",
                                       str(db)], env=ENV)
    assert result.exit_code == 0, result.output
    session_id = result.output.strip().splitlines()[-1]
    conn = sqlite3.connect(db)
    page_size, pages = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_size", "page_count"))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert not os.path.exists(f"{db}-wal") or os.path.getsize(f"{db}-wal") == 0
    middle = pages // 2
    with open(db, "r+b") as f:  # a page of the messages table's b-tree, scribbled over
        f.seek(middle * page_size)
        f.write(bytes([0x0D, 0xFF, 0xFF, 0x00, 0x63]) + os.urandom(64))
    check = sqlite3.connect(db)
    assert check.execute("PRAGMA quick_check").fetchone()[0] != "ok"  # the damage is real
    check.close()
    return db, session_id


def _refused_with_one_line(result, db):
    assert result.exit_code in (1, 2), (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: database {db} is damaged"), result.output
    assert "nothing was written" in lines[0]


def test_import_refuses_a_store_with_a_bad_page_and_leaves_the_file_as_it_was(tmp_path, damaged_store):
    db, _ = damaged_store
    before = _digest(db)
    result = CliRunner().invoke(main, ["import", str(_transcript(tmp_path / "b.jsonl", 50, "second")), "--db",
                                       str(db)], env=ENV)
    _refused_with_one_line(result, db)
    assert _digest(db) == before


def test_branch_fork_refuses_a_store_with_a_bad_page_and_leaves_the_file_as_it_was(damaged_store):
    db, session_id = damaged_store
    before = _digest(db)
    result = CliRunner().invoke(main, ["branch", "fork", session_id, "other", "--db", str(db)], env=ENV)
    _refused_with_one_line(result, db)
    assert _digest(db) == before


def test_a_whole_store_passes_the_check(tmp_path):
    with Workbench(tmp_path / "ctx.db", Config()) as wb:
        wb.new_session("s")
        wb.check_store()
