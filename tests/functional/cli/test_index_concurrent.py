"""Two `ctxbench index` runs on one database at once (real processes): no IntegrityError, no traceback;
one waits for the other and says so, and the store ends as one run would leave it."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from ctxbench.store.db import connect
from ctxbench.store.locks import exclusive


def _repo(root, files=300):
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for n in range(files):
        (pkg / f"mod{n}.py").write_text(
            f'"""Module {n}."""\n\nfrom pkg.mod{max(n - 1, 0)} import *\n\n\n'
            + "".join(f"def func_{n}_{k}(x: int) -> int:\n    \"\"\"Adds {k}.\"\"\"\n    return x + {k}\n\n\n"
                      for k in range(8))
            + f"class Thing{n}:\n    def run(self) -> int:\n        return func_{n}_0(1)\n")
    return root


def _env():
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _index(repo, db):
    return subprocess.Popen([sys.executable, "-m", "ctxbench", "index", str(repo), "--no-embed", "--json",
                             "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


@contextlib.contextmanager
def _index_lock_held(db):
    """This process holds the database's index lock for the block, as a running index run would."""
    conn = connect(db)
    try:
        with exclusive(conn, "index"):
            yield
    finally:
        conn.close()


def _counts(db):
    conn = connect(db)
    try:
        return tuple(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                     for t in ("code_repos", "code_files", "code_symbols", "code_cards", "code_edges"))
    finally:
        conn.close()


@pytest.mark.parametrize("attempt", range(3))
def test_two_first_time_index_runs_at_once(tmp_path, attempt):
    repo = _repo(tmp_path / "repo")
    db = tmp_path / "fresh.db"  # does not exist yet: both runs create and migrate it
    runs = [_index(repo, db), _index(repo, db)]
    outs = [p.communicate(timeout=300) for p in runs]
    for p, (out, err) in zip(runs, outs):
        assert p.returncode == 0, err
        assert "Traceback" not in err and "IntegrityError" not in err
    results = [json.loads(out) for out, _ in outs]
    assert all(r["files"] == 301 for r in results)
    assert sorted(r["files_parsed"] for r in results)[-1] == 301  # one of them parsed everything ...
    waited = [r for r in results if r.get("waited_for")]
    for r in waited:  # ... and one that waited found it done, and said so
        assert r["files_parsed"] == 0 and not r["changed"]
    for (_, err), r in zip(outs, results):
        assert ("waiting for it to finish" in err) == bool(r.get("waited_for"))
    single = tmp_path / "single.db"
    p = _index(repo, single)
    p.communicate(timeout=300)
    assert _counts(db) == _counts(single)


def test_a_run_that_finds_the_lock_held_says_so_waits_and_then_indexes(tmp_path):
    repo = _repo(tmp_path / "repo", files=20)
    db = tmp_path / "ctx.db"
    with _index_lock_held(db):
        proc = _index(repo, db)
        deadline = time.monotonic() + 120
        # the waiting run says so on stderr before it can do anything else
        line = ""
        while time.monotonic() < deadline and "waiting" not in line:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
        assert "another index run is using this database; waiting for it to finish" in line
        time.sleep(0.5)
        assert proc.poll() is None  # still waiting while the lock is held
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["waited_for"] == f"process {os.getpid()}" and result["files_parsed"] == 21
    assert result["seconds"]["wait"] >= 0.5


def test_plain_output_says_it_waited(tmp_path):
    repo = _repo(tmp_path / "repo", files=5)
    db = tmp_path / "ctx.db"
    with _index_lock_held(db):
        proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "index", str(repo), "--no-embed",
                                 "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env())
        assert "waiting" in proc.stderr.readline()
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0
    assert "waited" in out and f"for another index run (process {os.getpid()})" in out
