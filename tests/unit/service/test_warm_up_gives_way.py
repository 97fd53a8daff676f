"""While the front end answers a key, a warm-up (indexing, embedding) holds at its next progress report instead of
competing with the UI thread for the interpreter; it goes on once the hold is over, and closing ends a hold at once."""
from __future__ import annotations

import threading
import time

import pytest

from ctxbench.service.store_users import UI_HOLD_S, SessionClosing, StoreUsers
from tui_helpers import running


def test_a_warm_up_holds_at_its_progress_report_while_held_and_goes_on_after():
    users = StoreUsers()
    reported: list[float] = []
    report = users.checked(lambda done, total: reported.append(time.monotonic()))
    held_at = time.monotonic()
    users.hold(0.2)
    assert users.holding
    report(1, 2)
    assert reported[0] - held_at >= 0.19  # waited for the hold to end
    assert not users.holding
    report(2, 2)
    assert reported[1] - reported[0] < 0.1  # no hold: at once


def test_a_later_key_extends_the_hold_and_closing_ends_it_at_once():
    users = StoreUsers()
    report = users.checked(lambda done, total: None)
    users.hold(0.05)
    users.hold(30)  # more keys, longer
    threading.Timer(0.1, users.close).start()
    started = time.monotonic()
    with pytest.raises(SessionClosing):
        report(1, 2)
    assert time.monotonic() - started < 5


async def test_every_key_in_the_workbench_holds_the_warm_up(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        users = pilot.app.main_screen.session.store_users
        asked: list[float] = []
        users.hold = asked.append  # what the front end asks of the warm-ups
        await pilot.press("x", "ctrl+t")
        assert asked == [UI_HOLD_S, UI_HOLD_S]
