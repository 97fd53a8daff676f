"""Parsing a run's files in several processes: the same results in the same order as one process, a failing child's
share parsed by the indexing process, one process while other threads run, and the same stored rows."""
from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import threading
import time

import pytest

from ctxbench.codegraph import parse_pool
from ctxbench.codegraph.index import build_index
from ctxbench.codegraph.phase_clock import PHASE_CARDS, PHASE_SECRETS
from ctxbench.config import Config
from ctxbench.store.db import connect

from test_index_sameness import DIGESTS, _repo, stored_rows

PARENT = os.getpid()


def _items(n: int) -> list[tuple[str, bytes, str]]:
    return [(f"f{i}.py", b"x" * (10 + (i * 37) % 200), "") for i in range(n)]


def _parse_with_pid(item, clock):
    time.sleep(0.003)  # a parse spends its secret scan's and its cards' seconds inside its own
    clock.add(PHASE_SECRETS, 0.001)
    clock.add(PHASE_CARDS, 0.001)
    return (item[0], os.getpid())


def test_several_processes_give_every_file_in_order_and_more_than_one_process_parses():
    items = _items(40)
    done: list[int] = []
    out, secrets, cards, wall = parse_pool.parse_files(items, _parse_with_pid, 3, done.append)
    assert [name for name, _ in out] == [name for name, *_ in items]
    pids = {pid for _, pid in out}
    assert PARENT in pids and len(pids) == 3
    assert done[-1] == len(items) and done == sorted(done)
    assert 0 < secrets + cards <= wall  # shares of the wall seconds: no second counted twice


def test_a_failing_child_leaves_its_share_to_the_indexing_process():
    def parse(item, clock):
        if os.getpid() != PARENT:
            raise RuntimeError("a child fails")
        return (item[0], os.getpid())

    items = _items(12)
    out, *_ = parse_pool.parse_files(items, parse, 2, lambda done: None)
    assert out == [(name, PARENT) for name, *_ in items]


def test_an_error_in_the_indexing_process_share_is_raised_and_no_child_is_left():
    def parse(item, clock):
        if os.getpid() == PARENT:
            raise ValueError("bad file")
        time.sleep(0.01)
        return item[0]

    import multiprocessing

    with pytest.raises(ValueError):
        parse_pool.parse_files(_items(8), parse, 2, lambda done: None)
    assert multiprocessing.active_children() == []


def _threads_of_this_test(monkeypatch):
    """Count only the threads a test starts: one an earlier test of the same worker left running is not its."""
    before = threading.active_count()
    monkeypatch.setattr(parse_pool, "other_threads_running", lambda: threading.active_count() > before)


@pytest.fixture()
def idle_machine(monkeypatch):
    monkeypatch.setattr(parse_pool, "usable_cores", lambda: 2)
    monkeypatch.setattr(parse_pool, "load_average", lambda: 1.0)  # this process alone
    _threads_of_this_test(monkeypatch)


def test_a_large_run_forks_only_while_no_other_thread_runs(idle_machine):
    config = dataclasses.replace(Config().index, parse_processes=2, parallel_parse_min_bytes=100)
    items = _items(10)
    assert parse_pool.processes_for(items, config) == 2
    assert parse_pool.processes_for(items, dataclasses.replace(config, parallel_parse_min_bytes=10**9)) == 1
    assert parse_pool.processes_for(items, dataclasses.replace(config, parse_processes=1)) == 1
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert parse_pool.processes_for(items, config) == 1
    finally:
        stop.set()
        other.join()


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shares_cover_every_file_once_in_order(n):
    items = [("big", b"x" * 5000, "")] + _items(6)
    ranges = parse_pool.shares(items, n)
    assert len(ranges) == n
    assert ranges[0][0] == 0 and ranges[-1][1] == len(items)
    assert all(a < b for a, b in ranges) and all(r[1] == s[0] for r, s in zip(ranges, ranges[1:]))


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_a_cold_index_parsed_in_several_processes_stores_the_same_rows(name, tmp_path, monkeypatch):
    monkeypatch.setattr(parse_pool, "usable_cores", lambda: 4)
    monkeypatch.setattr(parse_pool, "load_average", lambda: 0.0)  # an idle machine
    _threads_of_this_test(monkeypatch)
    config = dataclasses.replace(Config().index, parse_processes=3, parallel_parse_min_bytes=0)
    seen: list[int] = []
    original = parse_pool.parse_files

    def spy(items, parse, processes, progress, **kwargs):
        seen.append(processes)
        return original(items, parse, processes, progress, **kwargs)

    parse_pool.parse_files = spy
    conn = connect(tmp_path / "index.db")
    try:
        t0 = time.perf_counter()
        result = build_index(_repo(name, tmp_path), conn, config)
        wall = time.perf_counter() - t0
        rows = stored_rows(conn)
    finally:
        parse_pool.parse_files = original
        conn.close()
    assert seen == [3]
    assert result.seconds <= wall
    assert hashlib.sha256("\n".join(rows).encode()).hexdigest() == DIGESTS[name]


def test_the_indexing_process_takes_a_little_more_than_an_even_share_for_the_children_s_sending():
    items = [(f"f{i}.py", b"x" * 100, "") for i in range(200)]
    (a0, b0), (a1, b1) = parse_pool.shares(items, 2)
    assert b0 - a0 == math.ceil(200 * (1 + parse_pool.CHILD_SEND_SHARE) / (2 + parse_pool.CHILD_SEND_SHARE))
    assert b1 - a1 == 200 - (b0 - a0)


def test_a_machine_busy_with_other_work_parses_in_one_process(monkeypatch):
    config = dataclasses.replace(Config().index, parse_processes=0, parallel_parse_min_bytes=100)
    items = _items(10)
    monkeypatch.setattr(parse_pool, "usable_cores", lambda: 2)
    _threads_of_this_test(monkeypatch)
    for load, processes in ((0.2, 2), (1.0, 2), (1.4, 2), (1.6, 1), (2.0, 1), (4.0, 1)):
        monkeypatch.setattr(parse_pool, "load_average", lambda: load)
        assert parse_pool.processes_for(items, config) == processes, load
    monkeypatch.setattr(parse_pool, "usable_cores", lambda: 8)
    monkeypatch.setattr(parse_pool, "load_average", lambda: 5.0)
    assert parse_pool.processes_for(items, config) == 4  # three cores free: three children at most, and four in all
    asked = dataclasses.replace(config, parse_processes=3)
    assert parse_pool.processes_for(items, asked) == 3  # asked for: whatever the load


def test_what_every_child_needs_is_loaded_once_before_the_fork():
    loaded: list[int] = []

    def parse(item, clock):
        return (item[0], tuple(loaded))

    out, *_ = parse_pool.parse_files(_items(9), parse, 3, lambda done: None, before_fork=lambda: loaded.append(PARENT))
    assert loaded == [PARENT] and {seen for _, seen in out} == {(PARENT,)}


def test_a_child_whose_indexing_process_is_gone_ends_quietly(capfd):
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    receive.close()  # what a killed indexing process leaves: no reader
    child = ctx.Process(target=parse_pool._child, args=(_items(3), _parse_with_pid, send))
    child.start()
    send.close()
    child.join()
    assert child.exitcode == 0
    assert "Traceback" not in capfd.readouterr().err
