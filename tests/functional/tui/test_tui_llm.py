"""The workbench wired to the LLM layer: /context rebuild, one runner per session, the usage badge,
replay, Esc on a streaming reply, the model's suggested pins, provider flags and ### STATE panels.

Functional tests drive the app with Pilot; the model is the offline one, or the loopback
chat-completions server of ``tests/llm_server.py`` where a real endpoint is needed (slow replies,
usage that disagrees with the estimate).
"""
from __future__ import annotations

import dataclasses
import json
import os

import pytest
from click.testing import CliRunner
from textual.app import App
from textual.widgets import Markdown

from ctxbench.config import LLMConfig
from ctxbench.records.turns import UsageCheck
from ctxbench.llm.replay import replay
from ctxbench.records.state import extract_state, state_span
from ctxbench.tui.app import CtxbenchApp
from ctxbench.service.options import LaunchOptions
from ctxbench.tui.meter import meter_state
from ctxbench.tui.present import model_label, split_state, usage_text
from ctxbench.tui.screens.overlay import ContextOverlay
from ctxbench.tui.screens.replay import ReplayScreen
from ctxbench.tui.screens.viewer import ViewerScreen
from ctxbench.tui.widgets.bubbles import AssistantBubble, StatePanel, TurnBlock, UsageLine
from llm_server import LLMServer, Reply
from tui_helpers import quiet_config, running, settle, type_and_enter

STATE_REPLY = "Done.\n\n### STATE\nGoal: ship it\nContext: money.py\nResolved: rounding\nTechnical Anchors: 2 places"


def loopback_config(server: LLMServer):
    base = quiet_config()
    llm = dataclasses.replace(LLMConfig(), provider="openai", base_url=server.base_url, model="loopback",
                              max_retries=0, timeout_s=10.0)
    return dataclasses.replace(base, llm=llm)


async def wait_for(pilot, predicate, what: str, rounds: int = 1500):
    """Let the app run until ``predicate()`` holds (a bound on rounds, not a timing assertion)."""
    for _ in range(rounds):
        await pilot.pause(0.02)
        found = predicate()
        if found:
            return found
    raise AssertionError(f"gave up waiting: {what}")


def streaming_bubble(main):
    return next((b for b in main.chat.query(AssistantBubble) if b.has_class("-streaming") and b.text), None)


def new_blocks(main, before: set[int | None]) -> list[TurnBlock]:
    return [b for b in main.chat.query(TurnBlock) if id(b) not in before]


# -- 1. /context rebuild ----------------------------------------------------------------------------

async def test_context_rebuild_streams_a_state_block_stores_it_and_replans(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        history_before = wb.messages.history(sid)
        assert wb.memory.state(sid) == ""
        assert not [i for i in main.view.plan.included if i.kind == "state"]
        system_before = dict(main.meter.state.sections)["system"]
        blocks_before = {id(b) for b in main.chat.query(TurnBlock)}

        await type_and_enter(pilot, "/context rebuild")

        state = wb.memory.state(sid)
        assert state.startswith("### STATE\nGoal: ")
        assert wb.messages.history(sid) == history_before  # the rebuild prompt is not a turn of the history
        assert main.feed.state_block == state
        # the plan and the meter picked the new state up
        state_items = [i for i in main.view.plan.included if i.kind == "state"]
        assert len(state_items) == 1 and state_items[0].section == "system"
        assert dict(main.meter.state.sections)["system"] == system_before + state_items[0].tokens
        # the chat shows the rebuild: a note, the state as a panel with its lines kept, and the usage
        (block,) = new_blocks(main, blocks_before)
        assert block.has_class("rebuild")
        panel = block.query_one(StatePanel)
        assert panel.body.splitlines()[0].startswith("Goal: ")
        assert [line.split(":")[0] for line in panel.body.splitlines()] == [
            "Goal", "Context", "Resolved", "Technical Anchors"]
        assert "### STATE\n" + panel.body == state
        usage = block.query_one(UsageLine)
        assert not usage.mismatch and "reported" in str(usage.render())


async def test_context_rebuild_from_the_palette(tmp_path):
    async with running(tmp_path, size=(100, 30)) as pilot:
        app = pilot.app
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"rebuild the ### STATE")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        main = app.main_screen
        assert main.session.wb.memory.state(main.session.session_id).startswith("### STATE")


async def test_undo_restores_the_stored_previous_state_without_a_model_call(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        said: list[str] = []
        main.notify = lambda message, **kw: said.append(str(message))
        groups = wb.messages.group_ids(sid)
        await type_and_enter(pilot, "First question that stays")
        kept = wb.memory.state(sid)
        assert "Goal: First question that stays" in kept
        await type_and_enter(pilot, "A question that will be undone")
        assert "Goal: A question that will be undone" in wb.memory.state(sid)
        calls = len(wb.traces.calls(session_id=sid))
        blocks = len(main.chat.query(TurnBlock))

        await type_and_enter(pilot, "/undo")
        await settle(pilot)
        assert wb.messages.group_ids(sid) == (*groups, groups[-1] + 1)
        assert wb.memory.state(sid) == kept  # the version the undone turn saw, as stored
        assert len(wb.traces.calls(session_id=sid)) == calls  # no model call rewrote it
        assert not main.chat.query(".rebuild") and len(main.chat.query(TurnBlock)) == blocks - 1
        assert any("the ### STATE is back to the version before it" in s for s in said)
        state_items = [i for i in main.view.plan.included if i.kind == "state"]
        assert len(state_items) == 1 and "First question that stays" in state_items[0].messages[0]["content"]
        # the undone version stays in the state's history
        assert any("A question that will be undone" in v.content for v in wb.memory.state_history(sid))

        await type_and_enter(pilot, "/undo")  # the first turn wrote the first STATE: none now
        await settle(pilot)
        assert wb.messages.group_ids(sid) == groups and wb.memory.state(sid) == ""
        assert not [i for i in main.view.plan.included if i.kind == "state"]
        assert any("it wrote the first ### STATE, so there is none now" in s for s in said)


async def test_context_drop_and_restore(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        gid = wb.messages.group_ids(sid)[1]
        await type_and_enter(pilot, f"/context drop {gid}")
        assert all(m.status == "dropped" for m in wb.messages.group(sid, gid))
        assert main.chat.block(gid).has_class("-dropped")
        await type_and_enter(pilot, f"/context restore {gid}")
        assert all(m.status == "active" for m in wb.messages.group(sid, gid))
        assert not main.chat.block(gid).has_class("-dropped")


# -- 2. one TurnRunner per session ------------------------------------------------------------------

async def test_one_turn_runner_per_session_closed_with_the_app(tmp_path, monkeypatch):
    import ctxbench.llm.loop as loop

    made: list[object] = []

    class CountingRunner(loop.TurnRunner):
        def __post_init__(self) -> None:
            made.append(self)
            super().__post_init__()

    monkeypatch.setattr(loop, "TurnRunner", CountingRunner)
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        session = app.main_screen.session
        await type_and_enter(pilot, "first question")
        await type_and_enter(pilot, "second question")
        await type_and_enter(pilot, "/context rebuild")
        assert len(made) == 1 and session.runner is made[0]
        wb = session.wb
        assert made[0].traces is wb.traces  # model calls are recorded in the session's own database
    assert wb._database is None  # the app closed the session's store on the way out


# -- 3. usage badge ---------------------------------------------------------------------------------

async def test_offline_turn_shows_estimated_and_reported_tokens_dimly(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        await type_and_enter(pilot, "How is Money rounded?")
        wb, sid = main.session.wb, main.session.session_id
        group = wb.messages.history(sid)[-1].group_id
        line = main.chat.block(group).query_one(UsageLine)
        assert not line.mismatch
        (check,) = main.feed.usage_checks
        report = wb.plans.usage_reports(check.plan_id)[-1]
        assert check.estimated == report.estimated > 0 and check.reported == report.reported
        assert str(line.render()) == f"est {check.estimated:,} · reported {check.reported:,} prompt tok · offline"


async def test_usage_badge_when_the_provider_reports_far_more_than_estimated(tmp_path):
    with LLMServer([Reply(content=STATE_REPLY, prompt_tokens=50_000)]) as server:
        async with running(tmp_path, config=loopback_config(server), size=(120, 40)) as pilot:
            app = pilot.app
            main = app.main_screen
            await type_and_enter(pilot, "Where are the reports rendered?")
            wb, sid = main.session.wb, main.session.session_id
            group = wb.messages.history(sid)[-1].group_id
            line = main.chat.block(group).query_one(UsageLine)
            (check,) = main.feed.usage_checks
            assert check.reported == 50_000 and check.mismatch
            assert line.mismatch and line.has_class("-mismatch")
            text = str(line.render())
            assert text.startswith("⚠ ") and check.badge in text and "loopback" in text
            # the reply's state block was stored and shows as a panel
            assert wb.memory.state(sid) == extract_state(STATE_REPLY)
            assert main.chat.block(group).query_one(StatePanel).body.startswith("Goal: ship it\nContext: money.py")


def test_usage_text_flags_any_mismatched_call():
    ok = UsageCheck("p1", 1000, 1010, "m", 0.0099, False)
    bad = UsageCheck("p2", 1000, 1200, "m", 0.1667, True)
    silent = UsageCheck("p3", 900, None, "m", None, False)
    assert usage_text(()) == ("", False)
    assert usage_text((ok,)) == ("est 1,000 · reported 1,010 prompt tok · m", False)
    text, mismatch = usage_text((bad, ok))
    assert mismatch and bad.badge in text and "2 calls" in text
    assert usage_text((silent,)) == ("est 900 prompt tok · no usage reported · m", False)


# -- 4. replay --------------------------------------------------------------------------------------

async def test_replay_steps_through_the_turns_with_the_plan_each_would_get(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        s = main.settings
        tools = main.session.tools_tokens()  # a live call offers them: the replay budgets them too
        expected = list(replay(wb, sid, mode=s.mode, budget=s.budget, strategy=s.strategy,
                               window_groups=s.window_groups, tools_tokens=tools))
        assert len(expected) == 5

        await type_and_enter(pilot, "/replay")
        screen = app.screen
        assert isinstance(screen, ReplayScreen)

        def shown():
            title = str(screen.query_one("#replay-title").render())
            summary = str(screen.query_one("#replay-summary").render())
            return screen.step, title, summary

        step, title, summary = shown()
        assert step.turn == 1 and "turn 1 / 5" in title
        assert step.plan.plan_id == expected[0].plan.plan_id
        assert screen.query_one("#replay-meter").state == meter_state(expected[0].plan)

        await pilot.press("right")
        await settle(pilot)
        step, title, summary = shown()
        want = expected[1].plan
        assert step.turn == 2 and step.plan.plan_id == want.plan_id and f"group {expected[1].group_id}" in title
        assert f"{len(want.included)} included · {len(want.excluded)} excluded" in summary
        assert str(screen.query_one("#replay-sections").render()).startswith(
            f"system {dict(want.sections).get('system', 0):,} · pins")
        assert screen.query_one("DataTable").row_count == len(want.items)

        await pilot.press("end")
        await settle(pilot)
        await pilot.press("right")  # past the last turn: stays there
        await settle(pilot)
        assert screen.step.turn == 5 and screen.step.plan.plan_id == expected[4].plan.plan_id
        await pilot.press("left")
        await settle(pilot)
        assert screen.step.turn == 4

        await pilot.press("m")  # light -> heavy, for the replay only
        await settle(pilot)
        heavy = list(replay(wb, sid, mode="heavy", budget=s.budget, strategy=s.strategy,
                            window_groups=s.window_groups, only_turn=4, tools_tokens=tools))[0]
        assert screen.step.plan.mode == "heavy" and screen.step.plan.plan_id == heavy.plan.plan_id
        assert main.settings.mode == "light"

        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ViewerScreen)
        assert heavy.plan.plan_id in app.screen.title_text
        await pilot.press("escape")
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is main
        assert heavy.plan.plan_id not in {p.plan_id for p in wb.plans.list(sid, limit=1000)}  # nothing stored


async def test_replay_starts_at_a_given_turn_and_clamps(tmp_path):
    async with running(tmp_path, size=(100, 30)) as pilot:
        app = pilot.app
        await type_and_enter(pilot, "/replay 99")
        await settle(pilot)
        assert isinstance(app.screen, ReplayScreen) and app.screen.step.turn == 5


async def test_replay_budgets_the_tool_definitions_and_counts_dropped_turns(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        users = [m for m in wb.messages.all(sid) if m.role == "user"]
        await type_and_enter(pilot, f"/context drop {users[1].group_id}")  # the second turn, dropped later
        live = main.view.plan  # the live plan of the latest turn, as the meter shows it
        await type_and_enter(pilot, "/replay 99")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        title = str(screen.query_one("#replay-title").render())
        assert f"turn {len(users)} / {len(users)}" in title  # 5 user turns: the dropped one still counts
        plan = screen.step.plan
        tools = [i for i in plan.items if i.kind == "tool_definitions"]
        live_tools = [i for i in live.items if i.kind == "tool_definitions"]
        assert len(tools) == 1 and tools[0].included and tools[0].tokens == live_tools[0].tokens > 0
        # the system section (prompt + tool definitions) is the live one's, token for token
        assert dict(plan.sections)["system"] == dict(live.sections)["system"]

        await pilot.press("home")
        await pilot.press("right")  # turn 2: the dropped one is replayed as it was sent
        await settle(pilot)
        step = screen.step
        assert step.turn == 2 and step.group_id == users[1].group_id
        assert step.plan.query == users[1].content
        assert "dropped since" in str(screen.query_one("#replay-title").render())
        await pilot.press("right")  # turn 3 sees turn 2 as the user left it: dropped
        await settle(pilot)
        dropped = [i for i in screen.step.plan.items if i.id.startswith(("group:", "atom:"))
                   and i.id.split(":")[1] == str(users[1].group_id)]
        assert dropped and all(not i.included and i.reason == "dropped_by_user" for i in dropped)


# -- 5. Esc cancels a streaming reply ---------------------------------------------------------------

async def test_escape_cancels_a_streaming_reply_and_keeps_it_as_partial(tmp_path):
    full = "A slow answer, streamed in small pieces. " * 20
    with LLMServer([Reply(content=full, chunk_chars=4, delay_s=0.03)]) as server:
        async with running(tmp_path, config=loopback_config(server), size=(120, 40)) as pilot:
            app = pilot.app
            main = app.main_screen
            wb, sid = main.session.wb, main.session.session_id
            await type_and_enter(pilot, "Tell me slowly", wait=False)
            bubble = await wait_for(pilot, lambda: streaming_bubble(main), "the reply to start streaming")
            assert main.turn_running
            await pilot.press("escape")
            await settle(pilot)
            assert not main.turn_running
            stored = wb.messages.history(sid)[-1]
            assert stored.role == "assistant" and stored.partial
            assert stored.content and full.startswith(stored.content) and len(stored.content) < len(full)
            assert bubble.has_class("-partial") and not bubble.has_class("-streaming")
            assert "cancelled" in str(bubble.query_one(".partial-note").render())
            assert full.startswith(bubble.text)


async def test_a_history_refresh_during_a_reply_keeps_the_live_turn(tmp_path):
    full = "Streaming while the history changes. " * 12
    with LLMServer([Reply(content=full, chunk_chars=4, delay_s=0.02)]) as server:
        async with running(tmp_path, config=loopback_config(server), size=(120, 40)) as pilot:
            app = pilot.app
            main = app.main_screen
            wb, sid = main.session.wb, main.session.session_id
            await type_and_enter(pilot, "Keep going", wait=False)
            live = await wait_for(pilot, lambda: streaming_bubble(main), "the reply to start streaming")
            first = wb.messages.group_ids(sid)[1]
            main.run_slash(f"/context drop {first}")  # replans and re-reads the history mid-reply
            main.run_slash("/undo")  # refused while the reply arrives
            assert "reply is still arriving" in main.slash.last_error
            await settle(pilot)
            assert main.chat.block(first).has_class("-dropped")
            assert live.is_attached and live.text == full and not live.has_class("-partial")
            group = wb.messages.history(sid)[-1].group_id
            assert live in main.chat.block(group).query(AssistantBubble)
            assert len([b for b in main.chat.query(TurnBlock) if b.group_id == group]) == 1


async def test_escape_before_the_first_token_says_so(tmp_path):
    with LLMServer([Reply(content="late", delay_s=2.0)]) as server:
        async with running(tmp_path, config=loopback_config(server), size=(120, 40)) as pilot:
            app = pilot.app
            main = app.main_screen
            await type_and_enter(pilot, "Are you there?", wait=False)
            await wait_for(pilot, lambda: server.received, "the request to reach the server")
            await pilot.press("escape")
            await settle(pilot)
            wb, sid = main.session.wb, main.session.session_id
            last = wb.messages.all(sid)[-1]
            assert last.role == "user" and last.flags == ("unanswered",)  # nothing of the reply to keep
            block = main.chat.block(last.group_id)
            assert "cancelled before the model replied" in str(block.query_one(".cancel-note").render())


# -- 8. the model's suggest_pins under the overlay's delimiter --------------------------------------

SUGGEST = ('!tool suggest_pins {"items": ["ledgerlite.money.Money.round", "ledgerlite.reports.render_balance"], '
           '"reason": "rounding rules live here"}')


async def test_model_suggestions_appear_under_the_suggested_pins_delimiter(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        wb, sid = main.session.wb, main.session.session_id
        await type_and_enter(pilot, SUGGEST)
        tools = [m for m in wb.messages.history(sid) if m.role == "tool"]
        assert tools[-1].tool_name == "suggest_pins" and "suggested 2 pin(s)" in tools[-1].content
        targets = [s.target for s in main.view.suggestions]
        assert targets[:2] == ["card:ledgerlite.money.Money.round", "card:ledgerlite.reports.render_balance"]
        assert main.view.suggestions[0].why == "model: rounding rules live here"

        await pilot.press("ctrl+o")
        await settle(pilot)
        overlay = app.screen
        assert isinstance(overlay, ContextOverlay)
        rows = overlay.shown_rows
        delimiter = next(n for n, r in enumerate(rows) if r.key == "div:suggested")
        below = [r.target for r in rows[delimiter + 1:]]
        assert below[:2] == targets[:2]
        assert all(r.kind != "suggestion" for r in rows[:delimiter])

        # accept the first (a sticky pin), reject the second: both decisions are stored
        table = overlay.query_one("DataTable")
        table.move_cursor(row=delimiter + 1, animate=False)
        await pilot.press("ctrl+y")
        await settle(pilot)
        assert any(p.target == targets[0] and p.kind == "sticky" for p in wb.pins.list(sid))
        rows = overlay.shown_rows
        nxt = next(n for n, r in enumerate(rows) if r.target == targets[1] and r.kind == "suggestion")
        table.move_cursor(row=nxt, animate=False)
        await pilot.press("ctrl+n")
        await settle(pilot)
        traces = main.session.wb.traces
        assert [s.target for s in traces.suggestions(sid, "accepted")] == [targets[0]]
        assert [s.target for s in traces.suggestions(sid, "rejected")] == [targets[1]]
        assert not {targets[0], targets[1]} & {s.target for s in main.view.suggestions}


# -- 6. provider flags and the model in the status line ---------------------------------------------

async def test_status_line_names_the_model(tmp_path):
    async with running(tmp_path, llm_base_url="http://127.0.0.1:11434/v1", llm_model="llama3.1",
                       size=(120, 40)) as pilot:
        app = pilot.app
        assert app.config_.llm.provider == "openai" and app.config_.llm.model == "llama3.1"
        assert "llama3.1 @ 127.0.0.1:11434" in app.main_screen.status.detail


async def test_demo_ignores_model_variables_unless_flags_say_so(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_LLM_BASE_URL", "http://10.0.0.1:8000/v1")
    monkeypatch.setenv("CTXBENCH_LLM_MODEL", "from-env")
    demo = CtxbenchApp(LaunchOptions(llm_from_env=False), quiet_config())
    assert demo.config_.llm.provider == "offline" and model_label(demo.config_.llm) == "offline model"
    opened = CtxbenchApp(LaunchOptions(), quiet_config())
    assert opened.config_.llm.model == "from-env" and opened.config_.llm.provider == "openai"
    flagged = CtxbenchApp(LaunchOptions(llm_model="flag-model", llm_from_env=True), quiet_config())
    assert flagged.config_.llm.model == "flag-model"  # a flag beats the environment


def test_open_and_demo_accept_the_model_flags(tmp_path, monkeypatch):
    import ctxbench.cli.demo_cmd as demo_cmd
    import ctxbench.cli.open_cmd as open_cmd
    from ctxbench.cli import main as cli

    seen: list = []
    monkeypatch.setattr(open_cmd, "run_workbench", lambda options, config: seen.append((options, config)))
    monkeypatch.setattr(demo_cmd, "run_workbench", lambda options, config: seen.append((options, config)))
    env = {"CTXBENCH_CONFIG": os.devnull, "CTXBENCH_LLM_BASE_URL": "http://10.0.0.1:8000/v1",
           "CTXBENCH_LLM_MODEL": "from-env"}
    runner = CliRunner()
    result = runner.invoke(cli, ["demo", "--db", str(tmp_path / "d.db"), "--no-index"], env=env)
    assert result.exit_code == 0, result.output
    options, config = seen[-1]
    assert config.llm.provider == "offline" and not options.llm_from_env and options.llm_model is None
    assert CtxbenchApp(options, config).config_.llm.provider == "offline"  # the demo stays offline

    result = runner.invoke(cli, ["demo", "--db", str(tmp_path / "d.db"), "--no-index", "--base-url",
                                 "http://127.0.0.1:11434/v1", "--model", "qwen2.5-coder", "--api-key-env", "MY_KEY",
                                 "--context-limit", "32768", "--timeout", "90"],
                           env=env)
    assert result.exit_code == 0, result.output
    llm = CtxbenchApp(*seen[-1]).config_.llm
    assert (llm.provider, llm.base_url, llm.model, llm.api_key_env, llm.context_limit, llm.timeout_s) == (
        "openai", "http://127.0.0.1:11434/v1", "qwen2.5-coder", "MY_KEY", 32768, 90.0)

    result = runner.invoke(cli, ["open", "--repo", str(tmp_path), "--db", str(tmp_path / "o.db"), "--no-index",
                                 "--model", "gpt-4o-mini"], env={**env, "CTXBENCH_LLM_BASE_URL": ""})
    assert result.exit_code == 0, result.output
    options, config = seen[-1]
    assert options.llm_model == "gpt-4o-mini" and options.llm_from_env

    result = runner.invoke(cli, ["--repo", str(tmp_path), "--db", str(tmp_path / "o.db"), "--no-index",
                                 "--base-url", "http://127.0.0.1:8000/v1", "--model", "served"], env=env)
    assert result.exit_code == 0, result.output  # bare `ctxbench` takes them too
    llm = CtxbenchApp(*seen[-1]).config_.llm
    assert (llm.base_url, llm.model) == ("http://127.0.0.1:8000/v1", "served")

    result = runner.invoke(cli, ["open", "--repo", str(tmp_path), "--db", str(tmp_path / "o.db"), "--base-url",
                                 "http://127.0.0.1:11434/v1"], env={"CTXBENCH_CONFIG": os.devnull})
    assert result.exit_code == 2 and "needs a model name" in result.output


# -- 7. ### STATE blocks keep their lines -----------------------------------------------------------

def test_split_state_finds_the_block_and_what_surrounds_it():
    parts = split_state(STATE_REPLY + "\n\n## Next\nmore text")
    assert parts.before == "Done."
    assert parts.state == "Goal: ship it\nContext: money.py\nResolved: rounding\nTechnical Anchors: 2 places"
    assert parts.after == "## Next\nmore text"
    assert split_state("no state here").state == ""
    span = state_span(STATE_REPLY)
    assert STATE_REPLY[span[0]:span[1]] == extract_state(STATE_REPLY)


class BubbleApp(App[None]):
    def compose(self):
        yield AssistantBubble("", classes="msg -streaming")


@pytest.mark.parametrize("reply,step", [(STATE_REPLY, 5), (STATE_REPLY, 1),
                                        (STATE_REPLY.replace("### STATE", "  ### STATE"), 1)])
async def test_a_streamed_state_block_goes_to_the_panel_not_to_markdown(reply, step):
    app = BubbleApp()
    async with app.run_test() as pilot:
        bubble = app.query_one(AssistantBubble)
        for start in range(0, len(reply), step):  # pieces that split the heading
            await bubble.write(reply[start:start + step])
            await pilot.pause()
            assert "STATE" not in (bubble.markdown.source or "")
        assert bubble.state_panel().body == split_state(reply).state
        await bubble.finish()
        await pilot.pause()
        assert bubble.markdown.source == "Done."
        assert bubble.query_one(StatePanel).has_class("-after-text")
        assert len(bubble.query(StatePanel)) == 1 and len(bubble.query(Markdown)) == 1


async def test_history_replies_render_their_state_as_a_panel(tmp_path):
    async with running(tmp_path, size=(120, 40)) as pilot:
        app = pilot.app
        main = app.main_screen
        await type_and_enter(pilot, "What is the state now?")
        snap = main.session.snapshot()
        await main.chat.show_history(snap.history, snap.dropped)  # as after a reload
        await pilot.pause()
        last = list(main.chat.query(AssistantBubble))[-1]
        panel = last.query_one(StatePanel)
        assert panel.body.splitlines()[0] == "Goal: What is the state now?"
        assert "STATE" not in last.markdown.source
        assert json.dumps(panel.body).count("\\n") == 3
