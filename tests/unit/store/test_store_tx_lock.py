"""Each connection has its own transaction lock: a long transaction on one connection never makes
another connection's transaction wait in Python (SQLite's own locking still applies per file)."""
from __future__ import annotations

import threading

from ctxbench.store import db

WAIT_S = 20  # a bound on waiting for the other thread, not a speed target


def test_a_transaction_on_another_connection_does_not_wait_for_this_one(tmp_path):
    first = db.connect(tmp_path / "index.db", check_same_thread=False)
    second = db.connect(tmp_path / "messages.db", check_same_thread=False)
    second.execute("CREATE TABLE m (x)")
    inside = threading.Event()
    other_done = threading.Event()
    seen: list[bool] = []

    def long_transaction() -> None:
        with db.transaction(first):
            inside.set()
            seen.append(other_done.wait(WAIT_S))  # the other connection commits meanwhile

    def append() -> None:
        inside.wait(WAIT_S)
        with db.transaction(second):
            second.execute("INSERT INTO m VALUES (1)")
        other_done.set()

    threads = [threading.Thread(target=long_transaction), threading.Thread(target=append)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(2 * WAIT_S)
    assert seen == [True]
    assert second.execute("SELECT count(*) FROM m").fetchone()[0] == 1


def test_threads_sharing_a_connection_take_turns_and_nesting_joins(tmp_path):
    conn = db.connect(tmp_path / "x.db", check_same_thread=False)
    conn.execute("CREATE TABLE t (x)")
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def holder() -> None:
        with db.transaction(conn):
            conn.execute("INSERT INTO t VALUES (1)")
            inside.set()
            release.wait(WAIT_S)
            order.append("holder commits")

    def waiter() -> None:
        inside.wait(WAIT_S)
        release.set()
        with db.transaction(conn):  # must not join the holder's open transaction
            order.append("waiter starts")
            conn.execute("INSERT INTO t VALUES (2)")

    threads = [threading.Thread(target=holder), threading.Thread(target=waiter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(2 * WAIT_S)
    assert order == ["holder commits", "waiter starts"]
    with db.transaction(conn):
        with db.transaction(conn):  # nested on one thread: joins the outer one
            conn.execute("INSERT INTO t VALUES (3)")
        assert conn.in_transaction
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 3
