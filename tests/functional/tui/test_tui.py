"""Functional tests of the workbench: App.run_test + Pilot against a real session store and planner."""
from __future__ import annotations

import dataclasses

import pytest
from textual import events
from textual.widgets import DataTable, Input

from ctxbench.tui.screens.overlay import ContextOverlay
from ctxbench.tui.screens.viewer import ViewerScreen
from ctxbench.tui.widgets.bubbles import AssistantBubble, AttachmentLine, TurnBlock, UserBubble
from ctxbench.tui.widgets.mode_indicator import ModeIndicator
from ctxbench.tui.widgets.prompt import PromptInput
from tui_helpers import cut_cards_config, make_app, quiet_config, running, settle, type_and_enter


def cards(plan, included=True):
    return [i for i in plan.items if i.kind == "symbol_card" and i.included == included]


async def test_opens_the_session_with_a_plan_and_an_attachment_line(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        assert main.session is not None and main.view is not None
        blocks = list(main.query(TurnBlock))
        assert [b.group_id for b in blocks] == sorted(b.group_id for b in blocks)
        assert len(main.query(UserBubble)) == 5
        assert len(main.query(AssistantBubble)) >= 4
        state = main.meter.state
        assert state.budget == 8000 and 0 < state.used <= 8000
        assert sum(tokens for _, tokens in state.sections) == pytest.approx(state.used, abs=5)
        lines = list(main.query(AttachmentLine))
        assert len(lines) == 1  # the latest turn, planned under the current mode
        text = str(lines[0].render())
        assert text.startswith("+") and "Light" in text and "4 cards" in text and "ctrl+o details" in text
        assert lines[0].parent is blocks[-1]
        tool_titles = [c.title for c in main.query("Collapsible.tool-result")]
        assert any("truncated to 300 in context (inactive tier)" in t for t in tool_titles)
        assert all(c.collapsed for c in main.query("Collapsible"))


async def test_ctrl_t_cycles_the_mode_from_the_input_and_replans(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        indicator = main.query_one(ModeIndicator)
        assert isinstance(app.focused, PromptInput)
        assert str(indicator.render()) == "CTX: Light"
        light = main.view.plan
        assert light.mode == "light" and len(cards(light)) == 4

        await pilot.press("ctrl+t")
        assert str(indicator.render()) == "CTX: Heavy"  # at once, before the plan arrives
        await settle(pilot)
        heavy = main.view.plan
        assert heavy.mode == "heavy" and len(cards(heavy)) == 4
        assert isinstance(app.focused, PromptInput)

        await pilot.press("ctrl+t")
        assert str(indicator.render()) == "CTX: Off"
        await settle(pilot)
        off = main.view.plan
        assert off.mode == "off"
        assert cards(off) == []
        assert {i.reason for i in cards(off, included=False)} == {"mode_off"}
        assert dict(off.sections)["retrieval"] == 0 and dict(off.sections)["scaffold"] == 0
        assert dict(main.meter.state.sections)["retrieval"] == 0
        assert "Off" in str(main.query_one(AttachmentLine).render())

        await pilot.press("ctrl+t")
        await settle(pilot)
        assert main.view.plan.mode == "light" and len(cards(main.view.plan)) == 4
        wb = main.session.wb
        assert wb.settings(main.session.session_id).mode == "light"


async def test_the_session_remembers_its_mode(tmp_path):
    async with running(tmp_path) as pilot:
        app = pilot.app
        await pilot.press("ctrl+t")  # light -> heavy
        await settle(pilot)
        session_id = app.main_screen.session.session_id
    again = make_app(tmp_path, session_id=session_id)
    async with again.run_test() as pilot:
        await settle(pilot)
        assert str(again.main_screen.query_one(ModeIndicator).render()) == "CTX: Heavy"
        assert again.main_screen.view.plan.mode == "heavy"


async def test_budget_keys_and_over_budget_meter(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        await pilot.press("ctrl+up")
        await settle(pilot)
        assert main.view.plan.budget == 9000 and main.meter.state.budget == 9000
        await pilot.press("ctrl+down", "ctrl+down")
        await settle(pilot)
        assert main.view.plan.budget == 7000
        await type_and_enter(pilot, "/budget 40")
        plan = main.view.plan
        assert plan.budget == 40 and plan.over_budget
        assert main.meter.has_class("-over")
        rendered = str(main.meter.render())
        assert "OVER" in rendered and "OVER BUDGET by" in rendered


async def test_overlay_lists_included_excluded_and_suggested(tmp_path):
    async with running(tmp_path, budget=700, size=(120, 40)) as pilot:
        app = pilot.app
        await pilot.press("ctrl+o")
        await settle(pilot)
        overlay = app.screen
        assert isinstance(overlay, ContextOverlay)
        kinds = [r.kind for r in overlay.shown_rows]
        plan = app.main_screen.view.plan
        assert kinds.count("included") == len(plan.included)
        assert kinds.count("excluded") == len(plan.excluded) > 0
        # included first, then the excluded ones, then the delimiter and the suggestions
        last_included = max(n for n, k in enumerate(kinds) if k == "included")
        first_excluded = kinds.index("excluded")
        delimiter = next(n for n, r in enumerate(overlay.shown_rows) if r.key == "div:suggested")
        assert last_included < first_excluded < delimiter
        suggestions = [r for r in overlay.shown_rows if r.kind == "suggestion"]
        assert suggestions and all(n > delimiter for n, r in enumerate(overlay.shown_rows) if r.kind == "suggestion")
        assert overlay.query_one(DataTable).row_count == len(overlay.shown_rows)


def select(overlay: ContextOverlay, predicate) -> None:
    index = next(n for n, r in enumerate(overlay.shown_rows) if predicate(r))
    overlay.query_one(DataTable).move_cursor(row=index, animate=False)


async def open_overlay(pilot) -> ContextOverlay:
    await pilot.press("ctrl+o")
    await settle(pilot)
    assert isinstance(pilot.app.screen, ContextOverlay)
    return pilot.app.screen


async def test_overlay_pin_lease_unpin_and_drop_replan_at_once(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        sid = main.session.session_id
        overlay = await open_overlay(pilot)
        first_plan = overlay.view.plan.plan_id

        select(overlay, lambda r: r.kind == "included" and r.target.startswith(("group:", "atom:")))
        target = overlay.selected_row.target
        await pilot.press("ctrl+s")
        await settle(pilot)
        pins = main.session.wb.pins.list(sid)
        assert [(p.target, p.kind) for p in pins] == [(target, "sticky")]
        assert overlay.view.plan.plan_id != first_plan  # the overlay shows the new plan
        assert any(i.pin == "sticky" and i.included for i in overlay.view.plan.items)

        select(overlay, lambda r: r.target == "card:ledgerlite.money.Money.round" and r.kind != "suggestion")
        await pilot.press("ctrl+e")
        await settle(pilot)
        lease = next(p for p in main.session.wb.pins.list(sid) if p.target == "card:ledgerlite.money.Money.round")
        assert (lease.kind, lease.scope, lease.ttl) == ("leased", "turn", app.config_.planner.pins.default_lease_ttl)
        assert "Money.round" in lease.content  # the card text is kept with the pin

        select(overlay, lambda r: r.target == "card:ledgerlite.reports.render_balance" and r.kind != "suggestion")
        await pilot.press("ctrl+k")
        await settle(pilot)
        task = next(p for p in main.session.wb.pins.list(sid) if p.target == "card:ledgerlite.reports.render_balance")
        assert (task.kind, task.scope) == ("leased", "task")

        select(overlay, lambda r: r.pin == "leased" and "render_balance" in r.haystack)
        await pilot.press("ctrl+u")
        await settle(pilot)
        assert "card:ledgerlite.reports.render_balance" not in {p.target for p in main.session.wb.pins.list(sid)}

        group_rows = [r for r in overlay.shown_rows if r.kind == "included" and r.target.startswith(("group:", "atom:"))
                      and not r.pin]
        victim = group_rows[0].target
        select(overlay, lambda r: r.target == victim)
        await pilot.press("ctrl+d")
        await settle(pilot)
        dropped = [i for i in overlay.view.plan.excluded if i.reason == "dropped_by_user"]
        assert dropped and all(not i.included for i in dropped)
        gid = int(victim.split(":")[1])
        assert main.chat.block(gid).has_class("-dropped")


async def test_an_action_key_lands_when_the_overlay_is_closed_at_once(tmp_path):
    """The mark shows before the action's work starts; closing the overlay (or quitting it) straight after the key,
    before any repaint, still runs the action."""
    async with running(tmp_path, size=(120, 40)) as pilot:
        main = pilot.app.main_screen
        sid = main.session.session_id
        overlay = await open_overlay(pilot)
        select(overlay, lambda r: r.target == "card:ledgerlite.money.Money.round" and r.kind != "suggestion")
        pilot.app.post_message(events.Key("ctrl+s", None))  # as the terminal sends them: no pause between
        pilot.app.post_message(events.Key("escape", None))
        await settle(pilot)
        assert pilot.app.screen is main
        assert [(p.target, p.kind) for p in main.session.wb.pins.list(sid)] == [
            ("card:ledgerlite.money.Money.round", "sticky")]


async def test_overlay_accept_and_reject_suggestions(tmp_path):
    async with running(tmp_path, config=cut_cards_config(), size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        overlay = await open_overlay(pilot)
        suggested = [r.target for r in overlay.shown_rows if r.kind == "suggestion"]
        assert len(suggested) >= 2

        select(overlay, lambda r: r.kind == "suggestion" and r.target == suggested[0])
        await pilot.press("ctrl+y")
        await settle(pilot)
        pins = main.session.wb.pins.list(main.session.session_id)
        assert [(p.target, p.kind, p.source) for p in pins] == [(suggested[0], "sticky", "user")]
        now = [r.target for r in overlay.shown_rows if r.kind == "suggestion"]
        assert suggested[0] not in now

        select(overlay, lambda r: r.kind == "suggestion" and r.target == suggested[1])
        await pilot.press("ctrl+n")
        await settle(pilot)
        assert suggested[1] not in [r.target for r in overlay.shown_rows if r.kind == "suggestion"]
        assert suggested[1] not in {p.target for p in main.session.wb.pins.list(main.session.session_id)}

        # accept/reject are disabled away from a suggestion
        select(overlay, lambda r: r.kind == "included" and r.target.startswith("atom:"))
        assert not overlay.check_action("accept", ()) and overlay.check_action("pin_sticky", ()) is True
        select(overlay, lambda r: r.target == "system")
        assert not overlay.check_action("pin_sticky", ()) and not overlay.check_action("drop", ())


async def test_overlay_filter_and_preview(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        overlay = await open_overlay(pilot)
        assert isinstance(app.focused, Input)
        await pilot.press(*"money")
        rows = [r for r in overlay.shown_rows if r.kind != "divider"]
        assert rows and all("money" in r.haystack for r in rows)
        select(overlay, lambda r: r.kind == "included" and r.target.startswith("card:"))
        await pilot.press("enter")
        await settle(pilot)
        viewer = app.screen
        assert isinstance(viewer, ViewerScreen)
        # what the plan sends for the card, as text: no line numbers counted from 1 (its excerpt numbers its own)
        assert "def round" in viewer.body and viewer.language == "text"
        assert viewer.body.startswith("sent in this plan (Light: the thin card")
        await pilot.press("escape")
        assert app.screen is overlay
        await pilot.press("escape")
        assert app.screen is app.main_screen


async def test_the_overlay_opens_again_as_new_on_the_current_plan(tmp_path):
    """The overlay is kept between openings (composing it again was most of its opening time): opened again it shows
    the current plan, no filter, the cursor on the first row, and no mark of an action the last plan settled."""
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        overlay = await open_overlay(pilot)
        await pilot.press(*"money")
        select(overlay, lambda r: r.kind == "included" and r.target.startswith("card:"))
        await pilot.press("escape")
        assert app.screen is main
        await pilot.press("ctrl+t")  # a new plan while the overlay is closed
        await settle(pilot)
        again = await open_overlay(pilot)
        assert again is overlay and again.view is main.view  # the same screen, on the plan now shown
        assert again.query_one("#overlay-filter", Input).value == "" and isinstance(app.focused, Input)
        assert len(again.shown_rows) == len(again.rows)  # nothing filtered out
        first = next(n for n, r in enumerate(again.shown_rows) if r.kind != "divider")
        assert again.query_one(DataTable).cursor_row == first
        assert again.pending == {}
        title = str(again.query_one("#overlay-title").render())
        assert main.view.plan.plan_id in title


async def test_slash_commands(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id

        await type_and_enter(pilot, "/mode heavy")
        assert main.view.plan.mode == "heavy" and str(main.query_one(ModeIndicator).render()) == "CTX: Heavy"
        await type_and_enter(pilot, "/budget 4000")
        assert main.view.plan.budget == 4000
        await type_and_enter(pilot, "/strategy hybrid")
        assert main.view.plan.strategy == "hybrid" and wb.settings(sid).strategy == "hybrid"
        await type_and_enter(pilot, "/context window 1")
        assert wb.settings(sid).window_groups == 1
        assert any(i.reason == "outside_window" for i in main.view.plan.excluded)
        await type_and_enter(pilot, "/context window 0")

        await type_and_enter(pilot, "/context show")
        viewer = app.screen
        assert isinstance(viewer, ViewerScreen)
        payload = main.view.plan.messages()
        assert viewer.body.count("── ") == len(payload)
        assert payload[-1]["content"] in viewer.body
        await pilot.press("escape")

        await type_and_enter(pilot, "/message list")
        assert isinstance(app.screen, ViewerScreen) and len(app.screen.body.splitlines()) == len(wb.messages.group_ids(sid))
        await pilot.press("escape")
        await type_and_enter(pilot, "/message show 3")
        assert isinstance(app.screen, ViewerScreen) and "Show me the journal code." in app.screen.body
        await pilot.press("escape")

        await type_and_enter(pilot, "/context drop 2")
        assert any(i.reason == "dropped_by_user" for i in main.view.plan.excluded)
        await type_and_enter(pilot, "/pin 4")
        assert ("group:4", "sticky") in {(p.target, p.kind) for p in wb.pins.list(sid)}
        await type_and_enter(pilot, "/pin lease card:ledgerlite.ledger.Ledger.post task")
        assert ("card:ledgerlite.ledger.Ledger.post", "leased") in {(p.target, p.kind) for p in wb.pins.list(sid)}
        pin_id = next(p.id for p in wb.pins.list(sid) if p.target == "group:4")
        await type_and_enter(pilot, f"/pin remove {pin_id}")
        assert "group:4" not in {p.target for p in wb.pins.list(sid)}

        groups = wb.messages.group_ids(sid)
        await type_and_enter(pilot, f"/message remove {groups[1]}")
        assert groups[1] not in wb.messages.group_ids(sid) and main.chat.block(groups[1]) is None
        before = wb.messages.group_ids(sid)
        await type_and_enter(pilot, "/undo")
        assert wb.messages.group_ids(sid) == before[:-1]

        await type_and_enter(pilot, "/theme ctxbench-light")
        assert app.theme == "ctxbench-light"


async def test_a_bad_command_says_so_and_lists_close_ones(tmp_path):
    async with running(tmp_path) as pilot:
        app = pilot.app
        main = app.main_screen
        before = main.view.plan.plan_id
        await type_and_enter(pilot, "/contxt show")
        assert "unknown command /contxt" in main.slash.last_error
        assert "/context show" in main.slash.last_error
        await type_and_enter(pilot, "/mode turbo")
        assert "unknown mode 'turbo'" in main.slash.last_error
        assert main.view.plan.plan_id == before


async def test_sending_a_message_stores_it_plans_and_streams_the_reply(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        groups_before = wb.messages.group_ids(sid)
        await type_and_enter(pilot, "How is Money rounded?")
        history = wb.messages.history(sid)
        new_group = history[-1].group_id
        assert new_group not in groups_before
        roles = [m.role for m in history if m.group_id == new_group]
        assert roles[0] == "user" and roles[-1] == "assistant"
        reply = next(m for m in reversed(history) if m.role == "assistant")
        assert reply.content and not reply.partial
        block = main.chat.block(new_group)
        assert block is not None and block.query(AssistantBubble)
        line = block.attachment()
        assert line is not None and "4 cards" in str(line.render())
        plans = wb.plans.list(sid)
        assert plans  # the turn's plan is stored


async def test_resize_to_80x24(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        main = app.main_screen
        assert main.size == (80, 24)
        meter_lines = str(main.meter.render()).splitlines()
        assert all(len(line) <= main.meter.content_size.width for line in meter_lines)
        assert main.query_one(ModeIndicator).region.width > 0 and main.prompt.region.width >= 40
        overlay = await open_overlay(pilot)
        table = overlay.query_one(DataTable)
        assert table.virtual_size.width <= table.size.width + 1


async def test_command_palette_runs_the_same_actions(tmp_path):
    async with running(tmp_path, size=(100, 30)) as pilot:
        app = pilot.app
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Context Mode: Heavy")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert app.main_screen.view.plan.mode == "heavy"


async def test_bindings_are_rebound_from_the_config(tmp_path):
    base = quiet_config()
    config = dataclasses.replace(base, ui=dataclasses.replace(base.ui, keymap=(("ctxbench.mode_cycle", "f6"),
                                                                                ("no.such.binding", "f7"))))
    async with running(tmp_path, config=config) as pilot:
        app = pilot.app
        assert app.keymap_errors == ["ui.keymap: unknown binding id 'no.such.binding'"]
        await pilot.press("ctrl+t")
        await settle(pilot)
        assert app.main_screen.view.plan.mode == "light"
        await pilot.press("f6")
        await settle(pilot)
        assert app.main_screen.view.plan.mode == "heavy"


async def test_compact_preview_apply_undo_and_tasks(tmp_path):
    from ctxbench.tui.screens.compact import CompactScreen

    import dataclasses

    config = quiet_config()
    config = dataclasses.replace(config, compaction=dataclasses.replace(config.compaction, keep_recent_turns=1))
    async with running(tmp_path, config=config, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        before = main.view.plan.used_tokens

        await type_and_enter(pilot, "/compact 50")
        screen = app.screen
        assert isinstance(screen, CompactScreen)
        await settle(pilot)
        assert wb.summaries.active(sid) == ()  # the preview changed nothing
        await pilot.press("a")
        await settle(pilot)
        assert app.screen is main
        [summary] = wb.summaries.active(sid)
        plan = main.view.plan
        assert any(i.kind == "summary" and i.included for i in plan.items)
        assert any(i.reason == "summarised" for i in plan.excluded) and plan.used_tokens < before

        await type_and_enter(pilot, "/compact undo")
        assert wb.summaries.active(sid) == () and main.view.plan.used_tokens == before

        await type_and_enter(pilot, "/compact")
        await settle(pilot)
        await pilot.press("escape")  # cancelled: nothing stored
        await settle(pilot)
        assert app.screen is main and wb.summaries.active(sid) == ()

        await type_and_enter(pilot, "/task start fix-rounding")
        assert main.task_name == "fix-rounding" and wb.tasks.current(sid).name == "fix-rounding"
        await type_and_enter(pilot, "/task end")
        assert main.task_name == "" and wb.tasks.current(sid) is None


async def test_a_plan_arriving_while_the_overlay_is_still_being_made_shows_in_it(tmp_path):
    """The first ctrl+o makes the overlay; a plan that arrives before its widgets are there (the warm-up replans all
    the time) is kept and shown once they are, instead of failing on a widget not made yet."""
    async with running(tmp_path, size=(120, 40)) as pilot:
        main = pilot.app.main_screen
        view = main.view
        main.screens.open_overlay()
        main.screens.show_view(view)  # the same tick: the overlay is pushed, not yet composed
        await settle(pilot)
        overlay = pilot.app.screen
        assert isinstance(overlay, ContextOverlay)
        assert overlay.view is view
        assert overlay.shown_rows and overlay.query_one(DataTable).row_count == len(overlay.shown_rows)


async def test_the_overlay_is_made_before_its_first_opening_and_opens_on_the_current_plan(tmp_path):
    """Once the first plan is on the screen the overlay is composed (not shown), so the first ctrl+o only shows it:
    on the plan current then (a budget change after it was made), with its rows and the cursor on the first."""
    async with running(tmp_path, size=(120, 40)) as pilot:
        main = pilot.app.main_screen
        made = main.screens._kept_overlay
        assert isinstance(made, ContextOverlay) and made.is_mounted and not made.is_current
        assert made.query_one(DataTable) is not None  # its widgets are there before any ctrl+o
        await pilot.press("ctrl+up")  # a new plan after the overlay was made
        await settle(pilot)
        overlay = await open_overlay(pilot)
        assert overlay is made
        assert overlay.view is main.view and overlay.view.plan.budget == main.view.plan.budget
        assert overlay.query_one(DataTable).row_count == len(overlay.shown_rows) > 0
        assert overlay.selected_row is not None and overlay.selected_row.kind != "divider"


async def test_an_action_mark_never_changes_the_overlay_titles_height(tmp_path):
    """The title is as high as it is with "replanning…", which a mark adds: at any width, marking a row leaves its
    height (no layout pass of the screen for a key's mark) and the whole title is shown."""
    async with running(tmp_path, size=(80, 40)) as pilot:
        overlay = await open_overlay(pilot)
        title = overlay.query_one("#overlay-title")
        select(overlay, lambda r: r.target == "card:ledgerlite.money.Money.round" and r.kind != "suggestion")
        row = overlay.selected_row
        for width in range(80, 140, 3):
            await pilot.resize_terminal(width, 40)
            await pilot.pause()
            before = title.size.height
            overlay.pending[row.target] = "sticky"  # what a mark shows, without asking for a plan
            overlay._title()
            await pilot.pause()
            assert title.size.height == before, width
            assert str(title.render()).rstrip().endswith("replanning…")
            overlay.pending.clear()
            overlay._title()
