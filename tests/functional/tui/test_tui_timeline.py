"""Branches, the plan diff, what-if and export in the workbench, driven as a user would."""
from __future__ import annotations

import json

from ctxbench.tui.screens.viewer import ViewerScreen
from ctxbench.tui.screens.whatif import WhatIfScreen
from ctxbench.tui.widgets.bubbles import AttachmentLine

from tui_helpers import make_app, settle, type_and_enter


async def test_fork_switch_and_the_status_line_name_the_branch(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        assert "⎇ main" in main.status.detail
        await type_and_enter(pilot, "/fork try-b")
        await settle(pilot)
        assert "⎇ try-b" in main.status.detail
        wb, sid = main.session.wb, main.session.session_id
        assert wb.branches.active(sid).name == "try-b"
        await type_and_enter(pilot, "/pin text only on try-b")
        await settle(pilot)
        await type_and_enter(pilot, "/branch")
        await settle(pilot)
        assert isinstance(app.screen, ViewerScreen) and "try-b" in app.screen.body and "* try-b" in app.screen.body
        await pilot.press("escape")
        await type_and_enter(pilot, "/switch main")
        await settle(pilot)
        assert "⎇ main" in main.status.detail
        assert not [p for p in wb.pins.list(sid) if p.target.startswith("text:")]  # the pin stayed on try-b
        await type_and_enter(pilot, "/switch nowhere")
        await settle(pilot)
        assert "⎇ main" in main.status.detail


async def test_each_turn_shows_its_diff_with_the_previous_turn_and_opens_it(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        await type_and_enter(pilot, "How is Money rounded?")
        await settle(pilot)
        await type_and_enter(pilot, "And where is the journal appended?")
        await settle(pilot)
        sid = main.session.session_id
        gid = main.session.wb.messages.history(sid)[-1].group_id
        line = main.chat.block(gid).query_one(AttachmentLine)
        assert "Δ since the previous turn" in str(line.render())
        assert main.view.diff is not None and main.view.group_id == gid
        await app.run_action(f"screen.open_diff({gid})")  # what the line's "diff" link runs
        await pilot.pause()
        assert isinstance(app.screen, ViewerScreen) and main.view.diff.summary in app.screen.subtitle_text
        assert "entered" in app.screen.body or "left" in app.screen.body or "changed" in app.screen.body
        await pilot.press("escape")
        await type_and_enter(pilot, "/diff")
        await pilot.pause()
        assert isinstance(app.screen, ViewerScreen) and app.screen.title_text.startswith("What changed")


async def test_whatif_replans_live_stores_nothing_and_keeps_a_setting_only_on_enter(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        stored = wb.conn.execute("SELECT COUNT(*) FROM plans").fetchone()[0]
        start = main.settings
        await type_and_enter(pilot, "/whatif")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, WhatIfScreen)
        await pilot.press("down", "down")  # budget / 4
        await settle(pilot)
        assert screen.settings.budget == start.budget // 4 and screen.plan.budget == screen.settings.budget
        assert screen.points and screen.points[-1].budget == main.config.llm.context_limit
        assert "vs now:" in str(screen.query_one("#whatif-diff").render())
        await pilot.press("escape")
        await settle(pilot)
        assert main.settings == start and wb.settings(sid) == start
        await type_and_enter(pilot, "/whatif")
        await settle(pilot)
        await pilot.press("right", "m")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert main.settings.budget == start.budget + main.config.ui.budget_step
        assert main.settings.mode == "heavy" and wb.settings(sid).mode == "heavy"
        assert wb.conn.execute("SELECT COUNT(*) FROM plans").fetchone()[0] == stored  # what-if plans are not stored


async def test_the_payload_view_copies_and_saves_the_exact_messages(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert isinstance(app.screen, ViewerScreen)
        await pilot.press("c")
        assert json.loads(app.clipboard) == main.view.plan.messages()
        await pilot.press("s")
        saved = tmp_path / f"{main.view.plan.plan_id}.messages.json"
        assert json.loads(saved.read_text()) == main.view.plan.messages()
        await pilot.press("escape")
        await type_and_enter(pilot, "/export session.out.jsonl")
        await settle(pilot)
        lines = (tmp_path / "session.out.jsonl").read_text().splitlines()
        assert len(lines) == len(main.session.wb.messages.history(main.session.session_id))


async def test_the_whatif_chart_marks_the_budgets_the_call_does_not_fit(tmp_path):
    """A budget below what every call must send (system prompt, tool definitions, the turn) is marked on its row."""
    import dataclasses

    from tui_helpers import quiet_config

    base = quiet_config()
    long_prompt = "Follow the house rules of the ledgerlite repository. " * 200  # ~1,800 tokens: over 1k and 2k
    config = dataclasses.replace(base, planner=dataclasses.replace(base.planner, system_prompt=long_prompt))
    app = make_app(tmp_path, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await type_and_enter(pilot, "/whatif")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, WhatIfScreen)
        lines = str(screen.query_one("#whatif-curve").render()).splitlines()[1:]
        over = [p for p in screen.points if p.over_budget]
        assert over and len(over) < len(screen.points)  # the chart has both kinds of row
        for point, line in zip(screen.points, lines):
            assert ("OVER BUDGET" in line) == point.over_budget, line
