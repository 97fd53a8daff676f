"""Parsing a large run's files in more than one process: the indexing process and forked children, each a
contiguous share of the files (by size), the children's results sent back pickled and put in the files' order.

Only ``fork`` pays on a small machine: a child made by ``spawn`` or ``forkserver`` imports ctxbench and
detect-secrets first (0.5-0.7 s, as long as parsing a few hundred files), a forked one starts with what the
indexing process has already imported. Forking is safe only while no other thread runs in the process (a lock
held by another thread at the fork stays held in the child), so a process running other threads (the workbench
indexes in a worker thread) parses alone, as does a run below ``IndexConfig.parallel_parse_min_bytes``. A child
that fails in any way leaves its share to the indexing process, which parses it as it would have: what is
stored never depends on how many processes parsed it.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
import time
from typing import Any, Callable, Sequence

from ctxbench.codegraph.phase_clock import PHASE_CARDS, PHASE_SECRETS, PhaseClock
from ctxbench.config import IndexConfig
from ctxbench.records.code import ParsedFile

MAX_AUTO_PROCESSES = 4  # parse_processes = 0: one per usable core, at most this many (the results come back serially)
# a child also pickles what it parsed (about 7% of its parsing time on textual's source): the indexing process takes
# that much more of the bytes, so it is done when the first child's results arrive
CHILD_SEND_SHARE = 0.07

# parse(item, clock) -> the parsed file; item is (source file record, bytes, sha)
ParseOne = Callable[[Any, PhaseClock], ParsedFile]
Progress = Callable[[int], None]  # files parsed so far


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def load_average() -> float:
    """The machine's 1-minute load average (runnable processes, this one included once it has run a while)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - not a POSIX system
        return 0.0


def processes_for(items: Sequence[Any], config: IndexConfig) -> int:
    """How many processes parse ``items`` (their second field holds each file's bytes): 1 unless the run is large
    enough, fork is available and the process runs no other thread; then ``parse_processes`` when set, else one
    per core but no more than one more than the cores the load average leaves free (rounded), so a machine busy
    with other work parses in one process (a forked parser sharing a core with this one makes the run slower, not
    faster: ~20% on textual's source)."""
    if config.parse_processes:  # asked for: that many, whatever the load
        wanted = min(config.parse_processes, len(items))
    else:
        spare = max(0, round(usable_cores() - load_average()))
        wanted = min(usable_cores(), MAX_AUTO_PROCESSES, len(items), 1 + spare)
    if wanted <= 1 or sum(len(item[1]) for item in items) < config.parallel_parse_min_bytes:
        return 1
    if "fork" not in multiprocessing.get_all_start_methods() or other_threads_running():
        return 1
    return wanted


def other_threads_running() -> bool:
    """Whether a thread besides this one runs in the process (forking it then could copy a lock another holds)."""
    return threading.active_count() > 1


def shares(items: Sequence[Any], n: int) -> list[tuple[int, int]]:
    """``n`` contiguous (start, end) ranges of ``items``, none empty (n <= len(items)): the first (the indexing
    process's) about ``1 + CHILD_SEND_SHARE`` times the bytes of each of the others."""
    sizes = [len(item[1]) + 1 for item in items]
    weights = [1.0 + CHILD_SEND_SHARE] + [1.0] * (n - 1)
    total = sum(sizes)
    cuts = [total * sum(weights[:k]) / sum(weights) for k in range(1, n)]
    bounds = [0]
    acc = 0
    for i, size in enumerate(sizes):
        acc += size
        if len(bounds) < n and acc >= cuts[len(bounds) - 1] and i + 1 < len(items):
            bounds.append(i + 1)
    while len(bounds) < n:  # fewer cut points than asked (a few very large files): split the last range
        bounds.append(max(bounds[-1] + 1, len(items) - (n - len(bounds))))
    bounds.append(len(items))
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _parse_share(items: Sequence[Any], parse: ParseOne, progress: Progress | None = None
                 ) -> tuple[list[ParsedFile], float, float, float]:
    """The share's parsed files, and the seconds of its secret scan, its cards and all its parsing; ``progress``
    told the count after each file."""
    clock = PhaseClock()
    t0 = time.perf_counter()
    out: list[ParsedFile] = []
    for i, item in enumerate(items, 1):
        out.append(parse(item, clock))
        if progress is not None:
            progress(i)
    return out, clock.get(PHASE_SECRETS), clock.get(PHASE_CARDS), time.perf_counter() - t0


def _child(items: Sequence[Any], parse: ParseOne, conn: Any) -> None:
    try:
        payload = pickle.dumps(("ok", _parse_share(items, parse)), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as exc:  # the indexing process parses this share itself (and meets the error there)
        payload = pickle.dumps(("failed", repr(exc)))
    try:
        conn.send_bytes(payload)
    except OSError:  # the indexing process is gone (killed): nobody to send to, and nothing to say about it
        pass
    finally:
        conn.close()


def parse_files(items: Sequence[Any], parse: ParseOne, processes: int, progress: Progress,
                before_fork: Callable[[], None] | None = None) -> tuple[list[ParsedFile], float, float, float]:
    """Parse ``items`` in order with ``processes`` processes (this one included); returns the parsed files (in the
    items' order) and, for the whole run, the shares of its wall seconds spent in the secret scan and in the cards
    (the seconds each process spent in them, as a share of all the seconds the processes spent parsing) and its
    wall seconds. ``before_fork`` runs first when there are children (what they would each load, loaded once)."""
    t0 = time.perf_counter()
    if processes <= 1:
        return _parse_share(items, parse, progress)
    ranges = shares(items, processes)
    if before_fork is not None:
        before_fork()
    ctx = multiprocessing.get_context("fork")
    children = []
    for a, b in ranges[1:]:
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(items[a:b], parse, send), daemon=True)
        proc.start()
        send.close()
        children.append((proc, receive, (a, b)))
    a, b = ranges[0]
    try:
        out, secrets, cards, work = _parse_share(items[a:b], parse, progress)
    except BaseException:
        for proc, receive, _ in children:
            receive.close()
            proc.terminate()
            proc.join()
        raise
    for proc, receive, (a, b) in children:
        try:
            status, result = pickle.loads(receive.recv_bytes())
        except (EOFError, OSError, pickle.UnpicklingError):
            status, result = "failed", None
        finally:
            receive.close()
            proc.join()
        if status != "ok":
            result = _parse_share(items[a:b], parse)
        parsed, s, c, w = result
        out.extend(parsed)
        secrets, cards, work = secrets + s, cards + c, work + w
        progress(b)
    wall = time.perf_counter() - t0
    scale = wall / work if work > 0 else 0.0
    return out, secrets * scale, cards * scale, wall
