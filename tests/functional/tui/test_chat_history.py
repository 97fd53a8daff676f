"""The chat pane opens a session with its newest turns only; earlier ones load when the chat is scrolled to its top
or the button above the turns is pressed, each batch in order and without moving what the user was reading."""
from __future__ import annotations

from textual.widgets import Button

from ctxbench.tui.widgets.bubbles import TurnBlock, UserBubble
from ctxbench.tui.widgets.chat import ChatPane
from tui_helpers import quiet_config, running, settle


def shown(main) -> list[int]:
    return [b.group_id for b in main.query(TurnBlock)]


async def test_a_session_opens_on_its_newest_turns_and_earlier_ones_load_at_the_top(tmp_path):
    async with running(tmp_path, size=(60, 14), config=quiet_config(chat_groups=2)) as pilot:
        main = pilot.app.main_screen
        chat = main.query_one(ChatPane)
        everything = chat._groups()
        assert len(everything) == 6
        assert shown(main) == everything[-2:]  # the newest two, in order
        button = chat.query_one("#earlier", Button)
        assert f"({len(everything) - 2} hidden)" in str(button.label)
        assert chat.max_scroll_y > 0  # taller than the pane: it opens scrolled to the newest turn
        assert chat.scroll_y == chat.max_scroll_y

        reading = main.query(TurnBlock).first()  # the oldest turn shown: the user scrolls up to it
        chat.scroll_home(animate=False)
        await pilot.pause()
        await settle(pilot)
        assert shown(main) == everything[-4:]  # two more, above, in order
        top = chat.region.y
        assert reading.region.y >= top and reading.region.y < chat.region.bottom  # still in view
        assert chat.scroll_y > 0  # the view stayed on it (the new turns are above)

        chat.query_one("#earlier", Button).press()  # the button does the same (a pane its turns do not fill)
        await pilot.pause()
        await settle(pilot)
        assert shown(main) == everything  # the last two: every turn shown, the button gone
        assert not chat.query("#earlier")
        assert len(main.query(UserBubble)) == 5


async def test_every_turn_shown_leaves_no_button(tmp_path):
    async with running(tmp_path, size=(80, 24), config=quiet_config(chat_groups=50)) as pilot:
        main = pilot.app.main_screen
        chat = main.query_one(ChatPane)
        assert shown(main) == chat._groups()
        assert not chat.query("#earlier")
