"""Workbench behaviour found by using it in tmux as a demanding user would (each test failed before its fix)."""
from __future__ import annotations

from ctxbench.tui.screens.overlay import ContextOverlay
from tui_helpers import make_app, settle


async def open_overlay(pilot) -> ContextOverlay:
    await pilot.press("ctrl+o")
    await settle(pilot)
    assert isinstance(pilot.app.screen, ContextOverlay)
    return pilot.app.screen


async def test_overlay_cursor_never_rests_on_a_leading_delimiter(tmp_path):
    # Filtering to the suggestions puts the `suggested pins` delimiter first; page up / up used to park
    # the cursor on it, where Enter and the accept / reject keys silently did nothing.
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        overlay = await open_overlay(pilot)
        await pilot.press(*"suggested")
        assert overlay.shown_rows[0].kind == "divider"
        for key in ("pageup", "up"):
            await pilot.press(key)
            assert overlay.selected_row is not None and overlay.selected_row.kind == "suggestion", key
            assert overlay.check_action("accept", ()) is True
