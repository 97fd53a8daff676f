"""Workbench behaviour found by using it in tmux as a demanding user would (each test failed before its fix)."""
from __future__ import annotations

from ctxbench.tui.screens.overlay import ContextOverlay
from tui_helpers import cut_cards_config, running, settle


async def open_overlay(pilot) -> ContextOverlay:
    await pilot.press("ctrl+o")
    await settle(pilot)
    assert isinstance(pilot.app.screen, ContextOverlay)
    return pilot.app.screen


async def test_overlay_cursor_never_rests_on_a_leading_delimiter(tmp_path):
    # Filtering to the suggestions puts the `suggested pins` delimiter first; page up / up used to park
    # the cursor on it, where Enter and the accept / reject keys silently did nothing.
    async with running(tmp_path, config=cut_cards_config(), size=(120, 40)) as pilot:
        overlay = await open_overlay(pilot)
        await pilot.press(*"suggested")
        assert overlay.shown_rows[0].kind == "divider"
        for key in ("pageup", "up"):
            await pilot.press(key)
            assert overlay.selected_row is not None and overlay.selected_row.kind == "suggestion", key
            assert overlay.check_action("accept", ()) is True


async def test_overlay_footer_at_80x24_shows_the_keys_for_the_selected_row(tmp_path):
    # At 80x24 the footer listed every action, greyed or not, and cut off at `^d`: the accept and
    # reject keys of a suggestion were off screen. Only the actions that apply to the row are listed now.
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    async with running(tmp_path, config=cut_cards_config(), size=(80, 24)) as pilot:
        overlay = await open_overlay(pilot)
        index = next(n for n, r in enumerate(overlay.shown_rows) if r.kind == "suggestion")
        from textual.widgets import DataTable

        overlay.query_one(DataTable).move_cursor(row=index, animate=False)
        await pilot.pause()
        await pilot.pause()
        footer = overlay.query_one(Footer)
        right = footer.region.right
        shown = {key.action for key in footer.query(FooterKey)
                 if key.region.width and key.region.right <= right}
        assert {"screen.accept", "screen.reject"} <= shown or {"accept", "reject"} <= shown, shown


async def test_overlay_at_80x24_keeps_the_delimiter_and_the_tail_of_names_readable(tmp_path):
    # At 80x24 the label column was 14 cells: every card read `card ledgerli…` and the delimiter
    # `suggested p`, so the suggestions could not be told apart.
    from textual.widgets import DataTable

    async with running(tmp_path, config=cut_cards_config(), size=(80, 24)) as pilot:
        app = pilot.app
        overlay = await open_overlay(pilot)
        table = overlay.query_one(DataTable)
        width = overlay._widths["label"]
        labels = {}
        for n, row in enumerate(overlay.shown_rows):
            cell = table.get_row_at(n)[3]
            lines = cell.wrap(app.console, width, overflow="ellipsis", no_wrap=True)
            labels[row.key] = lines[0].plain
        count = sum(1 for r in overlay.shown_rows if r.kind == "suggestion")
        assert labels["div:suggested"].strip() == f"suggested pins ({count})"
        sugg = [text for key, text in labels.items() if key.startswith("sug:")]
        assert sugg and len(set(sugg)) == len(sugg), sugg  # each suggestion tells itself apart
        assert any(text.endswith("Money.round") for text in sugg), sugg


async def test_message_list_keeps_one_line_per_turn(tmp_path):
    # /message list wrapped each long turn onto a second line mid-word ("…working inside the user's" /
    # "repository at /ho"), so the GID column stopped lining up; each turn is one line, ended with "…".
    from textual.widgets import Static

    from ctxbench.tui.screens.viewer import ViewerScreen

    async with running(tmp_path, size=(80, 24)) as pilot:
        app = pilot.app
        prompt = app.main_screen.prompt
        prompt.focus()
        prompt.value = "/message list"
        await pilot.press("enter")
        await settle(pilot)
        viewer = app.screen
        assert isinstance(viewer, ViewerScreen)
        content = viewer.query_one("#viewer-content", Static)
        turns = viewer.body.splitlines()
        assert any(len(line) > content.size.width for line in turns)  # the case that used to wrap
        assert content.size.height == len(turns)
        rendered = [content.render_line(y).text.rstrip() for y in range(len(turns))]
        assert all(line.lstrip().split()[0].isdigit() for line in rendered), rendered


async def test_theme_without_a_name_says_which_theme_is_on(tmp_path):
    # `/theme` listed 27 names and never said which one was in use.
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        said: list[str] = []
        app.main_screen.notify = lambda message, **kw: said.append(str(message))
        prompt = app.main_screen.prompt
        prompt.focus()
        prompt.value = "/theme"
        await pilot.press("enter")
        await settle(pilot)
        assert said and f"current: {app.theme}" in said[-1], said


async def test_prompt_placeholder_fits_at_80x24(tmp_path):
    # At 80 columns the hint read "…/help lists them, ctrl+p opens the" and stopped mid-sentence.
    async with running(tmp_path, size=(80, 24)) as pilot:
        app = pilot.app
        prompt = app.main_screen.prompt
        assert "/help" in prompt.placeholder and "ctrl+p" in prompt.placeholder
        assert len(prompt.placeholder) < prompt.content_region.width, (prompt.placeholder, prompt.content_region)
        await pilot.resize_terminal(140, 36)
        await pilot.pause()
        assert len(prompt.placeholder) < prompt.content_region.width
        assert "opens the palette" in prompt.placeholder  # the long hint when there is room


async def test_over_budget_attachment_line_is_whole_at_80x24(tmp_path):
    # At 80 columns the over-budget attachment line ended in "ctrl+o" — the hint lost its "details".
    from ctxbench.tui.widgets.bubbles import AttachmentLine

    async with running(tmp_path, size=(80, 24)) as pilot:
        app = pilot.app
        prompt = app.main_screen.prompt
        prompt.focus()
        prompt.value = "/budget 40"
        await pilot.press("enter")
        await settle(pilot)
        line = list(app.main_screen.query(AttachmentLine))[-1]
        shown = " ".join(line.render_line(y).text.strip() for y in range(line.size.height))
        assert "over budget" in shown and shown.endswith("ctrl+o details"), shown


async def test_the_footer_is_made_again_only_when_the_keys_it_shows_change(tmp_path):
    """Reopening the overlay on a row with the same actions keeps the footer's keys as they are (no recompose); a row
    with other actions shows its own."""
    from textual.widgets import DataTable, Footer
    from textual.widgets._footer import FooterKey

    async with running(tmp_path, config=cut_cards_config(), size=(120, 40)) as pilot:
        overlay = await open_overlay(pilot)
        before = list(overlay.query_one(Footer).query(FooterKey))
        await pilot.press("escape")
        await settle(pilot)
        again = await open_overlay(pilot)
        assert again is overlay
        assert list(overlay.query_one(Footer).query(FooterKey)) == before  # the very widgets
        index = next(n for n, r in enumerate(overlay.shown_rows) if r.kind == "suggestion")
        overlay.query_one(DataTable).move_cursor(row=index, animate=False)
        await settle(pilot)
        shown = {key.action for key in overlay.query_one(Footer).query(FooterKey)}
        assert {"accept", "reject"} <= {a.removeprefix("screen.") for a in shown}
        assert "pin_sticky" not in {a.removeprefix("screen.") for a in shown}


async def test_the_main_screen_under_the_overlay_is_not_painted_through_it_and_shows_its_changes_on_return(tmp_path):
    """The overlay is opaque: a change on the main screen under it is not painted through it (Textual painted it, and
    every second one repainted the whole overlay); once the overlay closes the main screen shows the change."""
    async with running(tmp_path, size=(120, 40)) as pilot:
        app, main = pilot.app, pilot.app.main_screen
        overlay = await open_overlay(pilot)
        assert overlay.styles.background.a == 1
        forwarded: list[object] = []
        refresh = overlay.refresh
        overlay.refresh = lambda *regions, **kw: forwarded.append(regions) or refresh(*regions, **kw)
        main.status.detail = "changed under the overlay"
        await pilot.pause()
        await pilot.pause()
        assert forwarded == [] and not main.is_current
        overlay.refresh = refresh
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is main
        shown = "\n".join(strip.text for strip in main._compositor.render_strips())
        assert "changed under the overlay" in shown
