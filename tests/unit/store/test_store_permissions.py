"""The store is the user's alone: its folder 0700, the database, its WAL and shared-memory files and the lock
files beside it 0600, on a fresh store (whatever the umask lets through) and on one made before by a looser
version (tightened when it is opened, where the files belong to the user)."""
from __future__ import annotations

import os
import stat

import pytest

from ctxbench.config import Config
from ctxbench.service.workbench import Workbench
from ctxbench.store import locks
from ctxbench.store.db import connect


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_a_fresh_store_is_0700_and_its_files_0600_after_a_write(tmp_path, umask_022):
    folder = tmp_path / "data" / "ctxbench"
    db = folder / "ctxbench.db"
    with Workbench(db, Config()) as wb:
        sid = wb.new_session("secret stuff")
        wb.messages.append(sid, "user", "my password is hunter2")
        with wb.database.connection() as conn:
            lock = locks.lock_for(conn, "session-" + sid)
            assert lock.try_acquire()
            lock.release()
        wal, shm = db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")
        assert wal.exists() and shm.exists()  # written while open: WAL mode
        files = [db, wal, shm, lock.path]
        assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
    assert _mode(folder) == 0o700
    assert _mode(folder.parent) == 0o700  # every folder the store made


def test_a_store_made_readable_by_everyone_is_tightened_when_opened(tmp_path, umask_022):
    db = tmp_path / "old.db"
    connect(db).close()
    lock = tmp_path / "old.db.index.lock"
    lock.write_text("")
    for f in (db, lock):
        os.chmod(f, 0o644)
    with Workbench(db, Config()) as wb:
        wb.new_session("s")
        with wb.database.connection() as conn:
            held = locks.lock_for(conn, "index")
            assert held.try_acquire()
            held.release()
        wal = db.with_name(db.name + "-wal")
        assert _mode(db) == 0o600 and _mode(wal) == 0o600 and _mode(lock) == 0o600


def test_the_default_stores_own_folder_made_readable_by_everyone_is_tightened_but_a_chosen_folder_is_not(
        tmp_path, monkeypatch, umask_022):
    """An older version made ``<user data dir>/ctxbench`` 0755; opening its store takes the bits back. A folder
    the user chose with --db may hold other things: it is left as it is."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("CTXBENCH_DB", raising=False)
    from ctxbench.config import default_db_path

    own = default_db_path()
    chosen = tmp_path / "projects" / "ctx.db"
    for db in (own, chosen):
        db.parent.mkdir(parents=True)
        os.chmod(db.parent, 0o755)
        connect(db).close()
    assert own.parent == tmp_path / "xdg" / "ctxbench"
    assert _mode(own.parent) == 0o700
    assert _mode(chosen.parent) == 0o755
