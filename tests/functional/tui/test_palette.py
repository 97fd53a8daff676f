"""The command palette and the slash commands are one table: every command is in the palette, every palette
entry is a command line the input would run."""
from __future__ import annotations

from textual.command import CommandPalette

from ctxbench.tui.commands import SLASH_COMMANDS, parse
from ctxbench.tui.palette import CYCLE_MODE, PALETTE_ENTRIES, needs_finishing, run_line
from ctxbench.tui.slash_base import HANDLERS
from tui_helpers import make_app, settle


def test_every_slash_command_is_in_the_palette_and_every_entry_is_a_command():
    lines = [command for _title, _help, command in PALETTE_ENTRIES if command != CYCLE_MODE]
    reached = {parse(line.strip()).command.name for line in lines}
    assert reached == {c.name for c in SLASH_COMMANDS}
    for c in SLASH_COMMANDS:  # the ones named in the issue among them
        assert c.line in lines or any(parse(line.strip()).command == c for line in lines)
    for name in ("compact", "task", "switch", "theme", "pin", "context drop", "context restore"):
        assert any(parse(line.strip()).command.name == name for line in lines), name
    assert [line for line in lines if needs_finishing(line)] == [
        c.line for c in SLASH_COMMANDS if c.needs_args and c.line in lines]


async def test_walking_the_palette_runs_each_command_or_puts_it_in_the_input(tmp_path, monkeypatch):
    ran: list[tuple[str, tuple[str, ...]]] = []
    for name in list(HANDLERS):
        monkeypatch.setitem(HANDLERS, name, lambda controller, args, name=name: ran.append((name, args)))
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        for _title, _help, line in PALETTE_ENTRIES:
            ran.clear()
            main.prompt.value = ""
            run_line(main, line)
            if line == CYCLE_MODE:
                continue
            if needs_finishing(line):
                assert main.prompt.value == line and ran == []  # the user types the argument, then Enter
            else:
                parsed = parse(line)
                assert ran == [(parsed.command.name, parsed.args)]


async def test_a_command_that_needs_a_target_is_finished_in_the_input(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        for ch in "/pin TARGET":
            await pilot.press("space" if ch == " " else ch)
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert app.main_screen.prompt.value == "/pin "
        assert app.focused is app.main_screen.prompt


def test_the_screens_opened_on_top_load_when_first_opened_not_before_the_first_paint():
    """The app's import (all of it runs before the first frame) leaves out the overlay, replay, what-if, compaction
    and viewer screens and the engine they reach: each loads when it is first opened."""
    import subprocess
    import sys

    code = ("import sys, ctxbench.tui.app\n"
            "late = ('ctxbench.tui.screens.overlay', 'ctxbench.tui.screens.replay', 'ctxbench.tui.screens.whatif',\n"
            "        'ctxbench.tui.screens.compact', 'ctxbench.tui.screens.viewer', 'ctxbench.service.timeline',\n"
            "        'ctxbench.planner', 'ctxbench.service.session')\n"
            "print(','.join(m for m in late if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
