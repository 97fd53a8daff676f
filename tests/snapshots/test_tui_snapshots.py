"""Snapshot tests of the workbench (pytest-textual-snapshot).

Deterministic: fixed session ids, the fixed retriever (no index, no embedding model), the
offline model, no draft preview timers, no notifications, no cursor blink. Review
``snapshot_report.html`` before accepting changes with ``--snapshot-update``.
"""
from __future__ import annotations

import pytest
from textual.widgets import DataTable

from tui_helpers import cut_cards_config, fixed_ids, make_app, quiet_inputs, settle

WIDE = (110, 34)


async def ready(pilot) -> None:
    await settle(pilot)
    quiet_inputs(pilot.app)
    await pilot.pause()


@pytest.mark.parametrize("mode", ["off", "light", "heavy"])
def test_main_screen_in_each_mode(snap_compare, tmp_path, monkeypatch, mode):
    fixed_ids(monkeypatch)
    assert snap_compare(make_app(tmp_path, mode=mode), terminal_size=WIDE, run_before=ready)


def test_overlay_with_suggested_pins(snap_compare, tmp_path, monkeypatch):
    fixed_ids(monkeypatch)

    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("ctrl+o")
        await settle(pilot)
        overlay = pilot.app.screen
        # a pinned item shows its badge; the cursor on the first suggestion scrolls the delimiter into view
        target = next(n for n, r in enumerate(overlay.shown_rows) if r.target.startswith("atom:"))
        overlay.query_one(DataTable).move_cursor(row=target, animate=False)
        await pilot.press("ctrl+s")
        await settle(pilot)
        first = next(n for n, r in enumerate(overlay.shown_rows) if r.kind == "suggestion")
        overlay.query_one(DataTable).move_cursor(row=first, animate=False)
        await ready(pilot)

    # Light shows two of the four cards: the two it leaves out are the suggested pins
    assert snap_compare(make_app(tmp_path, budget=2000, config=cut_cards_config()), terminal_size=WIDE,
                        run_before=run_before)


def test_payload_view(snap_compare, tmp_path, monkeypatch):
    fixed_ids(monkeypatch)

    async def run_before(pilot) -> None:
        await settle(pilot)
        pilot.app.main_screen.run_slash("/context show")
        await ready(pilot)

    assert snap_compare(make_app(tmp_path), terminal_size=WIDE, run_before=run_before)


def test_light_theme(snap_compare, tmp_path, monkeypatch):
    fixed_ids(monkeypatch)
    assert snap_compare(make_app(tmp_path, theme="ctxbench-light"), terminal_size=WIDE, run_before=ready)


def test_main_screen_80x24(snap_compare, tmp_path, monkeypatch):
    fixed_ids(monkeypatch)
    assert snap_compare(make_app(tmp_path), terminal_size=(80, 24), run_before=ready)


def test_over_budget_80x24(snap_compare, tmp_path, monkeypatch):
    fixed_ids(monkeypatch)
    assert snap_compare(make_app(tmp_path, budget=40), terminal_size=(80, 24), run_before=ready)


def test_replay_screen(snap_compare, tmp_path, monkeypatch):
    fixed_ids(monkeypatch)

    async def run_before(pilot) -> None:
        await settle(pilot)
        pilot.app.main_screen.run_slash("/replay 3")
        await ready(pilot)

    assert snap_compare(make_app(tmp_path), terminal_size=WIDE, run_before=run_before)


def test_state_panel_and_usage_line_after_a_rebuild(snap_compare, tmp_path, monkeypatch):
    fixed_ids(monkeypatch)

    async def run_before(pilot) -> None:
        await settle(pilot)
        main = pilot.app.main_screen
        main.run_slash("/context rebuild")
        for _ in range(100):
            await settle(pilot)
            if main.chat.query(".rebuild .usage-line"):
                break
        await ready(pilot)

    assert snap_compare(make_app(tmp_path), terminal_size=WIDE, run_before=run_before)
