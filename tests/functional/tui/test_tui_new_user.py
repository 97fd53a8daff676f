"""Tried in the workbench as a new user would: each case fails before its fix.

Functional tests with Pilot over the recorded six-turn session of ``tui_helpers`` and the offline model.
"""
from __future__ import annotations

from ctxbench.records.vocab import UNANSWERED_FLAG
from ctxbench.tui.widgets.bubbles import TurnBlock
from tui_helpers import make_app, settle, type_and_enter


def capture_notes(main) -> list[tuple[str, str]]:
    said: list[tuple[str, str]] = []
    main.notify = lambda message, **kw: said.append((str(message), kw.get("severity") or "information"))
    return said


async def test_a_budget_below_the_mandatory_items_is_announced_and_the_message_is_not_sent(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        said = capture_notes(main)
        await type_and_enter(pilot, "/budget 10")
        await settle(pilot)
        plan = main.view.plan
        assert plan.over_budget and plan.budget == 10
        warnings = [text for text, severity in said if severity == "warning"]
        assert any("mandatory items need" in w and "A message is not sent until the budget is at least" in w
                   for w in warnings), said
        calls = len(wb.traces.calls(session_id=sid))
        groups = wb.messages.group_ids(sid)

        await type_and_enter(pilot, "Will this be sent?")
        await settle(pilot)
        assert [c.status for c in wb.traces.calls(session_id=sid)][calls:] == ["failed"]  # refused, not sent
        assert not any(c.status == "ok" for c in wb.traces.calls(session_id=sid)[calls:])
        (new,) = [g for g in wb.messages.group_ids(sid) if g not in groups]
        (user,) = wb.messages.group(sid, new)  # the message alone: no reply was asked for
        assert UNANSWERED_FLAG in user.flags and user.status == "dropped"
        block = main.chat.block(new)
        assert "✗ not sent: mandatory items need" in str(block.query_one(".error-note").render())
        assert main.prompt.value == "Will this be sent?"  # the text is the user's again

        await type_and_enter(pilot, "/budget 8000")
        main.prompt.value = ""
        await type_and_enter(pilot, "Now it fits")
        await settle(pilot)
        assert wb.traces.calls(session_id=sid)[-1].status == "ok"


async def test_the_usage_line_shows_the_cost_of_a_turn_when_the_model_has_a_price(tmp_path):
    import dataclasses

    from ctxbench.config import LLMConfig, ModelPrice
    from ctxbench.records.turns import cost_text
    from ctxbench.tui.widgets.bubbles import UsageLine
    from llm_server import LLMServer, text
    from tui_helpers import quiet_config

    base = quiet_config()
    with LLMServer([text("A priced answer."), text("An unpriced answer.")]) as server:
        def config_for(model: str):
            llm = dataclasses.replace(LLMConfig(), provider="openai", base_url=server.base_url, model=model,
                                      max_retries=0, timeout_s=10.0,
                                      prices=(ModelPrice("house-model", 3.0, 15.0),))
            return dataclasses.replace(base, llm=llm)

        for model, priced in (("house-model", True), ("some-local-model", False)):
            (tmp_path / model).mkdir()
            app = make_app(tmp_path / model, config=config_for(model))
            async with app.run_test(size=(120, 40)) as pilot:
                await settle(pilot)
                main = app.main_screen
                await type_and_enter(pilot, "What does it cost?")
                await settle(pilot)
                (check,) = main.feed.usage_checks
                line = str(main.chat.block(main.session.wb.messages.history(main.session.session_id)[-1].group_id)
                           .query_one(UsageLine).render())
                if priced:
                    cost = (check.reported * 3.0 + check.completion * 15.0) / 1_000_000
                    assert check.cost_usd == cost and f" · {cost_text(cost)} · " in line
                else:
                    assert check.cost_usd is None and "$" not in line


def _screen_line(widget) -> str:
    """What the widget's first row shows on the screen (cut where the terminal ends)."""
    return "".join(segment.text for segment in widget.render_line(0))


async def test_the_status_line_keeps_progress_visible_at_80_columns_with_a_long_title(tmp_path):
    from ctxbench.records.views import Progress

    from ctxbench.service.options import LaunchOptions
    from ctxbench.tui.app import CtxbenchApp
    from tui_helpers import FixedRetriever, quiet_config, write_session

    title = "A session imported from a transcript whose file name is very long indeed"
    options = LaunchOptions(db_path=tmp_path / "t.db", import_file=write_session(tmp_path / "s.jsonl"), title=title,
                            index_repo=False, retriever=FixedRetriever())
    app = CtxbenchApp(options, quiet_config())
    app._disable_notifications = True
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        main = app.main_screen
        status = main.status
        status.set_slot(Progress("index", "21 files · 188 symbols · keyword ready", "ready"))
        status.set_slot(Progress("embedder", "embedding cards", "busy", 0.45))
        await pilot.pause()
        shown = _screen_line(status)
        assert len(shown) <= 80
        assert "● 21 files · 188 symbols · keyword ready" in shown and "◌ embedding cards 45%" in shown
        assert shown.startswith(" A session i") and "…" in shown  # the title gave way, marked as cut
        status.set_slot(Progress("embedder", "", "idle"))
        await pilot.pause()
        shown = _screen_line(status)
        assert "● 21 files · 188 symbols · keyword ready" in shown and "fused" in shown  # room for details again


async def test_errors_name_the_real_problem(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        main = app.main_screen
        said: list[tuple[str, str, str]] = []
        main.notify = lambda message, **kw: said.append((str(message), kw.get("title", ""), kw.get("severity", "")))
        missing = tmp_path / "no-such-folder" / "x.jsonl"
        for command, expected in (("/pin remove p99", "no pin p99"),
                                  ("/context drop 99", "has no turn 99"),
                                  ("/message show 99", "has no turn 99"),
                                  (f"/export {missing}", f"cannot use {missing}: No such file or directory")):
            said.clear()
            await type_and_enter(pilot, command)
            await settle(pilot)
            errors = [(text, title) for text, title, severity in said if severity == "error"]
            assert len(errors) == 1 and expected in errors[0][0], (command, said)
            assert "planning failed" not in errors[0][1] and "Error" not in errors[0][0], (command, said)
            assert main.view is not None and not main.meter.pending  # the plan is still there


async def test_the_overlay_cuts_kind_and_reason_with_an_ellipsis_at_80_columns(tmp_path):
    from textual.widgets import DataTable

    from ctxbench.tui.screens.overlay import ContextOverlay

    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+o")
        await settle(pilot)
        overlay = app.screen
        assert isinstance(overlay, ContextOverlay)
        widths = overlay._widths
        table = overlay.query_one(DataTable)
        lines = ["".join(s.text for s in table.render_line(y)) for y in range(1, table.size.height)]
        long_reasons = {r.item.reason for r in overlay.shown_rows if r.item is not None
                        and len(r.item.reason) > widths["reason"]}
        assert long_reasons  # e.g. keyword_match in an 11-cell column
        for reason in long_reasons:
            shown = reason[: widths["reason"] - 1] + "…"
            assert any(shown in line for line in lines), (reason, lines)
        for line in lines:  # nothing cut without saying so: every reason on screen is whole or ends in "…"
            for reason in long_reasons:
                if reason[: widths["reason"] - 1] in line:
                    assert reason[: widths["reason"] - 1] + "…" in line


async def test_message_list_says_in_or_out_of_the_window_of_the_current_plan(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        main = app.main_screen
        for command in ("/strategy window", "/context window 2", "/context drop 3"):
            await type_and_enter(pilot, command)
        await type_and_enter(pilot, "/message list")
        viewer = app.screen
        assert main.view.plan.plan_id in viewer.subtitle_text and "in / part / out" in viewer.subtitle_text
        status = {int(line.split()[0]): line.split()[1] for line in viewer.body.splitlines()}
        # the system message is always sent; the window holds the last two turns and the current one
        assert status == {1: "in", 2: "out", 3: "dropped", 4: "in", 5: "in", 6: "in"}
        await pilot.press("escape")
        await type_and_enter(pilot, "/strategy fused")  # single messages: a turn can be partly in
        await type_and_enter(pilot, "/budget 700")
        await type_and_enter(pilot, "/message list")
        body = app.screen.body
        lines = {int(line.split()[0]): line.split()[1] for line in body.splitlines()}
        plan = main.view.plan
        sent = {mid for item in plan.included for mid in item.message_ids}
        wb, sid = main.session.wb, main.session.session_id
        for gid, word in lines.items():
            ids = {m.id for m in wb.messages.group(sid, gid)}
            want = "dropped" if gid == 3 else "in" if ids <= sent else "part" if ids & sent else "out"
            assert word == want, (gid, word, want, body)


async def test_dropping_one_row_of_a_turn_says_the_whole_turn_leaves(tmp_path):
    from textual.widgets import DataTable

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        said = capture_notes(main)
        wb, sid = main.session.wb, main.session.session_id
        gid = next(m.group_id for m in wb.messages.all(sid) if m.role == "tool")  # the turn with a tool call
        await pilot.press("ctrl+o")
        await settle(pilot)
        overlay = app.screen
        parts = [r for r in overlay.shown_rows if r.item is not None
                 and r.item.id.startswith(("atom:", "group:")) and r.item.id.split(":")[1] == str(gid)]
        assert len(parts) >= 3  # the user's message, the tool call with its result, the reply
        overlay.query_one(DataTable).move_cursor(row=overlay.shown_rows.index(parts[1]))
        await pilot.press("ctrl+d")
        await settle(pilot)
        assert all(m.status == "dropped" for m in wb.messages.group(sid, gid))
        assert any(f"dropped turn {gid} whole: all {len(parts)} of its items leave the context" in text
                   for text, _ in said), said


def _repo_app(tmp_path, **options):
    """The workbench on a copy of the demo repository, indexed for real (keyword and graph, no model)."""
    import shutil
    from pathlib import Path

    from ctxbench.service.options import LaunchOptions
    from ctxbench.tui.app import CtxbenchApp
    from tui_helpers import quiet_config, write_session

    repo = tmp_path / "repo"
    shutil.copytree(Path(__file__).resolve().parents[3] / "fixtures" / "demo_repo" / "ledgerlite",
                    repo / "ledgerlite")
    opts = LaunchOptions(db_path=tmp_path / "t.db", repo=repo, import_file=write_session(tmp_path / "s.jsonl"),
                         title="ledgerlite", warm_embedder=False, **options)
    app = CtxbenchApp(opts, quiet_config())
    app._disable_notifications = True
    return app


async def _open_overlay_on_a_card(pilot):
    from textual.widgets import DataTable

    await pilot.press("ctrl+o")
    await settle(pilot)
    overlay = pilot.app.screen
    row = next(r for r in overlay.shown_rows if r.item is not None and r.item.kind == "symbol_card" and r.item.included)
    overlay.query_one(DataTable).move_cursor(row=overlay.shown_rows.index(row))
    await pilot.pause()
    return overlay, row.item


async def test_the_preview_shows_what_each_mode_sends_with_the_files_line_numbers(tmp_path):
    from ctxbench.tui.screens.viewer import ViewerScreen

    app = _repo_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        index = main.session.attached.index
        for mode, shape in (("light", "(Light: the thin card"), ("heavy", "(Heavy: the card's head and an excerpt")):
            await type_and_enter(pilot, f"/mode {mode}")
            overlay, item = await _open_overlay_on_a_card(pilot)
            await pilot.press("enter")
            await settle(pilot)
            viewer = app.screen
            assert isinstance(viewer, ViewerScreen) and viewer.language == "text"  # no numbering from 1 added
            body = viewer.body
            assert body.startswith(f"sent in this plan {shape}"), body[:120]
            assert item.messages[0]["content"] in body  # exactly what the plan sends
            card = index.cards[item.id[5:]]
            source = body.split(" as in the file:\n\n", 1)[1].splitlines()
            assert source[0].split()[0] == str(card.line)  # numbered from the symbol's own line
            assert [int(line.split()[0]) for line in source] == list(range(card.line, card.line + len(source)))
            await pilot.press("escape")
            await settle(pilot)
            await pilot.press("escape")
            await settle(pilot)
            assert app.screen is main, app.screen_stack


async def test_a_leased_card_keeps_its_text_and_a_pin_without_text_says_why_it_is_small(tmp_path):
    from textual.widgets import Static

    app = _repo_app(tmp_path, mode="heavy")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        overlay, item = await _open_overlay_on_a_card(pilot)
        await pilot.press("ctrl+e")  # lease it for this turn
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is main
        (pin,) = wb.pins.list(sid)
        assert pin.kind == "leased" and pin.content  # the card's text is kept with the pin
        sizes = set()
        for command in ("/mode light", "/mode off", "/mode heavy"):
            await type_and_enter(pilot, command)
            pinned = next(i for i in main.view.plan.items if i.id == f"pin:{pin.id}")
            sizes.add(pinned.tokens)
        assert len(sizes) == 1  # the pin is sent as pinned, whatever the mode or retrieval finds

        bare = wb.pins.add(sid, "card:ledgerlite.nowhere.Gone", "leased", label="card ledgerlite.nowhere.Gone")
        await type_and_enter(pilot, "/mode light")
        await pilot.press("ctrl+o")
        await settle(pilot)
        overlay = app.screen
        from textual.widgets import DataTable

        row = next(r for r in overlay.shown_rows if r.item is not None and r.item.id == f"pin:{bare.id}")
        overlay.query_one(DataTable).move_cursor(row=overlay.shown_rows.index(row))
        await pilot.pause()
        detail = str(overlay.query_one("#overlay-detail", Static).render())
        assert "no text stored with the pin and retrieval did not find the card this turn: only its name" in detail
