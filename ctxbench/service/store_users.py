"""The work a session runs on its store in other threads (warm-ups: indexing its repository, embedding cards and
history; plans, whose retrieval reads the index's own connection), and closing the session under it.

The front end closes the session when the user quits, maybe while such work runs. Closing the store's connections
under a thread that is inside a statement on one of them crashes the process in the sqlite3 module (it is not an
error that can be caught), so :meth:`StoreUsers.close` marks the session closed and waits for the work running to
end: a warm-up stops at its next progress report (:meth:`StoreUsers.checked`), raising :class:`SessionClosing`, which
rolls its open transaction back; a plan (a fraction of a second) is let finish. None starts once closed.

The same progress reports are where a warm-up gives way to the UI: while the front end answers a key
(:meth:`StoreUsers.hold`), the warm-up waits there instead of competing with the UI thread for the interpreter.
"""
from __future__ import annotations

import functools
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

CLOSE_WAIT_S = 10.0  # closing waits this long at most for the work running to end
HOLD_POLL_S = 0.01  # a warm-up holding for the UI looks again this often
UI_HOLD_S = 0.25  # a key holds the warm-ups this long (more keys, longer), for the screen to answer it


class SessionClosing(Exception):
    """The session is closing: the work stops here."""


class StoreUsers:
    """The work on the store running now in other threads; closing waits for it."""

    def __init__(self) -> None:
        self.closed = False
        self._running = 0
        self._changed = threading.Condition(threading.Lock())
        self._held_until = 0.0  # time.monotonic() until which warm-ups hold at their progress reports

    def hold(self, seconds: float) -> None:
        """The front end is answering the user (a key): warm-ups hold at their next progress report for ``seconds``
        from now, leaving the interpreter to the UI thread (a warm-up's Python work took the GIL from the refresh
        that shows a key's effect: 110-150 ms p95 during the semantic warm-up, against a 100 ms target)."""
        self._held_until = max(self._held_until, time.monotonic() + seconds)

    @property
    def holding(self) -> bool:
        """Warm-ups hold at their progress reports now (:meth:`hold`)."""
        return time.monotonic() < self._held_until and not self.closed

    @contextmanager
    def running(self) -> Iterator[None]:
        """Work runs for the length of the block; raises :class:`SessionClosing` when closed already."""
        with self._changed:
            if self.closed:
                raise SessionClosing("the session is closed")
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def checked(self, report: Callable[..., None]) -> Callable[..., None]:
        """``report`` (a warm-up's progress), raising :class:`SessionClosing` first once closing has begun, and
        holding there while the UI asked for it (:meth:`hold`)."""
        def check(*args) -> None:
            while self.holding:
                time.sleep(HOLD_POLL_S)
            if self.closed:
                raise SessionClosing("the session closed during the warm-up")
            report(*args)

        return check

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """No work starts from now on; wait (``wait_s`` at most) for the work running to end."""
        with self._changed:
            self.closed = True
            self._changed.wait_for(lambda: self._running == 0, wait_s)


def uses_store(method: Callable[..., T]) -> Callable[..., T]:
    """A session's method that works on the store from another thread: it runs in ``self.store_users.running()``."""
    @functools.wraps(method)
    def run(self, *args, **kwargs) -> T:
        with self.store_users.running():
            return method(self, *args, **kwargs)

    return run


def quietly(warm: Callable[[], object]) -> Callable[[], None]:
    """``warm`` for a thread of its own: a warm-up stopped by the session closing ends it without a traceback."""
    def run() -> None:
        try:
            warm()
        except SessionClosing:
            pass

    return run
