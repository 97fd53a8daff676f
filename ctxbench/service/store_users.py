"""The work a session runs on its store in other threads (warm-ups: indexing its repository, embedding cards and
history; plans, whose retrieval reads the index's own connection), and closing the session under it.

The front end closes the session when the user quits, maybe while such work runs. Closing the store's connections
under a thread that is inside a statement on one of them crashes the process in the sqlite3 module (it is not an
error that can be caught), so :meth:`StoreUsers.close` marks the session closed and waits for the work running to
end: a warm-up stops at its next progress report (:meth:`StoreUsers.checked`), raising :class:`SessionClosing`, which
rolls its open transaction back; a plan (a fraction of a second) is let finish. None starts once closed.
"""
from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

CLOSE_WAIT_S = 10.0  # closing waits this long at most for the work running to end


class SessionClosing(Exception):
    """The session is closing: the work stops here."""


class StoreUsers:
    """The work on the store running now in other threads; closing waits for it."""

    def __init__(self) -> None:
        self.closed = False
        self._running = 0
        self._changed = threading.Condition(threading.Lock())

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
        """``report`` (a warm-up's progress), raising :class:`SessionClosing` first once closing has begun."""
        def check(*args) -> None:
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
    """A session's method that works on the store from another thread: it runs in ``self._store_users.running()``."""
    @functools.wraps(method)
    def run(self, *args, **kwargs) -> T:
        with self._store_users.running():
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
