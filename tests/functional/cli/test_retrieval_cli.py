"""``ctxbench retrieve``: indexes on first use, prints the RetrievalSet (JSON shape checked)."""
from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.cli.repo_support import StderrProgress

from retrieval_fixture import write_repo


def run(args):
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result


def test_retrieve_json_indexes_first_and_has_the_contract_shape(tmp_path):
    repo = write_repo(tmp_path / "repo")
    db = tmp_path / "cli.db"
    result = run(["retrieve", "download a web page over http", "--repo", str(repo), "--db", str(db), "-k", "3",
                  "--json", "--no-semantic"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) >= {"retrieval_set_id", "semantic_available", "hits"}
    assert data["retrieval_set_id"].startswith("rs_")
    assert data["semantic_available"] is False
    assert data["notes"] == ["semantic search off (--no-semantic)"]
    assert 1 <= len(data["hits"]) <= 3
    for hit in data["hits"]:
        assert set(hit) == {"symbol", "path", "line", "score", "why"}
        assert isinstance(hit["line"], int) and isinstance(hit["score"], float)
    assert data["hits"][0]["symbol"] == "net.http.fetch_url"
    assert data["hits"][0]["path"] == "net/http.py"
    assert "keyword rank 1" in data["hits"][0]["why"]
    assert "parse" not in result.stderr  # stderr is no terminal here: no progress counters
    again = run(["retrieve", "download a web page over http", "--repo", str(repo), "--db", str(db), "-k", "3",
                 "--json", "--no-semantic"])
    assert json.loads(again.stdout)["retrieval_set_id"] == data["retrieval_set_id"]


def test_retrieve_plain_output_lists_ranked_hits(tmp_path):
    repo = write_repo(tmp_path / "repo")
    result = run(["retrieve", "LRUCache", "--repo", str(repo), "--db", str(tmp_path / "c.db"), "--no-semantic"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "note: semantic search off (--no-semantic)"
    assert lines[1].startswith("  1. store.cache.LRUCache  store/cache.py:")
    assert lines[-1].startswith("retrieval set rs_")


def test_stderr_progress_prints_nothing_when_stderr_is_not_a_terminal():
    out = io.StringIO()
    progress = StderrProgress(out)
    progress("parse", 0, 3)
    progress("parse", 3, 3)
    progress("embed", 0, 2)
    progress("store", 1, 1)
    progress.close()
    assert out.getvalue() == ""  # piped or redirected: no counters


def test_stderr_progress_on_a_terminal_updates_in_place():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    progress = StderrProgress(out, min_interval=0.0)
    progress("parse", 1, 2)
    progress("parse", 2, 2)
    progress("embed", 5, 10)
    progress.close()
    assert out.getvalue() == "\rparse: 1/2\rparse: 2/2\n\rembed: 5/10\n"


def test_opened_retriever_indexes_answers_and_closes_its_connection(tmp_path, capsys):
    import sqlite3

    from ctxbench.cli.repo_support import opened_retriever
    from ctxbench.config import Config

    repo = write_repo(tmp_path / "repo")
    with opened_retriever(repo, tmp_path / "c.db", Config(), semantic=False) as (retriever, index):
        assert "store.cache.LRUCache" in index.cards
        assert retriever.retrieve("LRUCache", 3).hits[0].symbol == "store.cache.LRUCache"
    err = capsys.readouterr().err  # stderr is no terminal here: the first index is announced, no counters
    assert "is not indexed yet: indexing its" in err and "parse: " not in err
    with pytest.raises(sqlite3.ProgrammingError):
        retriever.conn.execute("SELECT 1")
    with opened_retriever(repo, tmp_path / "c.db", Config(), semantic=False, quiet=True) as (again, _):
        assert again.retrieve("LRUCache", 3).hits[0].symbol == "store.cache.LRUCache"
    assert capsys.readouterr().err == ""
