"""The workbench answers at once while it warms up: nothing typed or pressed is lost, and an action shows on the
screen before the engine has done it (its figures marked pending until the replan arrives)."""
from __future__ import annotations

import threading

from textual.widgets import Input

from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.service.options import LaunchOptions
from ctxbench.tui.app import CtxbenchApp
from ctxbench.tui.screens.overlay import ContextOverlay
from retrieval_fixture import write_repo
from tui_helpers import quiet_config, write_session


class GatedEmbedder(HashingEmbedder):
    """A model whose load ends when the test says so: the moment semantic search becomes ready is the test's."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate

    @property
    def ready(self) -> bool:
        return self.gate.is_set()

    def wait(self, timeout=None) -> bool:
        return self.gate.wait(timeout)


def warming_app(tmp_path, gate: threading.Event) -> CtxbenchApp:
    options = LaunchOptions(db_path=tmp_path / "tui.db", import_file=write_session(tmp_path / "session.jsonl"),
                            title="ledgerlite session", repo=write_repo(tmp_path / "repo"),
                            embedder_factory=lambda config: GatedEmbedder(gate))
    app = CtxbenchApp(options, quiet_config())
    app._disable_notifications = True
    return app


async def until(pilot, condition, rounds: int = 2000) -> None:
    for _ in range(rounds):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError("the workbench never got there")


async def caught_up(pilot) -> None:
    """The model is ready and every action and replan asked for has been shown."""
    app = pilot.app
    main = app.main_screen
    await until(pilot, lambda: main.session is not None and main.session.semantic_ready and not main.meter.pending
                and not any(w.is_running and w.group in ("plan", "action", "engine") for w in app.workers))
    await pilot.pause()


async def type_text(pilot, text: str) -> None:
    for ch in text:
        await pilot.press("space" if ch == " " else ch)


async def test_nothing_typed_or_pressed_is_lost_through_the_warm_up_and_semantic_ready(tmp_path):
    gate, slow = threading.Event(), threading.Event()
    app = warming_app(tmp_path, gate)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            main = app.main_screen
            typed = "render the table rows "
            await type_text(pilot, typed)  # while the session opens and the repository is indexed
            await until(pilot, lambda: main.view is not None and main.session.retrieval_ready)
            await type_text(pilot, "as lines ")
            typed += "as lines "
            await pilot.press("ctrl+t")  # Heavy, planned for the draft: its cards come from the code index
            assert str(main.query_one("#mode").render()) == "CTX: Heavy"
            await until(pilot, lambda: not main.meter.pending
                        and any(i.id.startswith("card:") for i in main.view.plan.items))
            await pilot.press("ctrl+o")
            overlay = app.screen
            assert isinstance(overlay, ContextOverlay)
            await type_text(pilot, "symbol_card")
            assert overlay.query_one("#overlay-filter", Input).value == "symbol_card"
            pinned = overlay.selected_row.target
            assert pinned.startswith("card:")
            # the engine is slow today (a busy laptop): pins wait until the test says
            engine_pin = main.session.pin_item
            main.session.pin_item = lambda *a, **k: slow.wait(60) and engine_pin(*a, **k)
            await pilot.press("ctrl+s")
            # on the screen at once, before the engine stored the pin: the badge, marked pending
            assert overlay.pin_shown(overlay.selected_row) == "sticky" and overlay.pending
            gate.set()  # semantic search becomes ready now, while the user goes on typing
            await type_text(pilot, " card:")
            assert overlay.query_one("#overlay-filter", Input).value == "symbol_card card:"
            await pilot.press("down")
            leased = overlay.selected_row.target
            assert leased.startswith("card:") and leased != pinned
            await pilot.press("ctrl+e")
            assert overlay.pin_shown(overlay.selected_row) == "leased" and "replanning" in str(
                overlay.query_one("#overlay-title").render())
            slow.set()
            await pilot.press("escape")
            await type_text(pilot, "renderer")
            typed += "renderer"
            await pilot.press("ctrl+t", "ctrl+t")
            assert str(main.query_one("#mode").render()) == "CTX: Light"
            await caught_up(pilot)
            assert main.prompt.value == typed
            pins = {p.target: p.kind for p in main.session.pins()}
            assert pins == {pinned: "sticky", leased: "leased"}
            assert main.view.plan.mode == "light" and not main.meter.pending
            assert {i.id for i in main.view.plan.items if i.pin} == {f"pin:{p.id}" for p in main.session.pins()}
    finally:
        gate.set()
        slow.set()


async def test_a_budget_change_shows_its_figure_at_once_and_marks_it_pending(tmp_path):
    gate = threading.Event()
    app = warming_app(tmp_path, gate)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            main = app.main_screen
            await until(pilot, lambda: main.view is not None and not main.meter.pending  # the model still loads
                        and main.session.retrieval_ready and not any(w.group == "plan" for w in app.workers))
            before = main.meter.state
            slow = threading.Event()  # a busy laptop: the replan takes a while
            engine_plan = main.session.plan
            main.session.plan = lambda *a, **k: slow.wait(60) and engine_plan(*a, **k)
            await pilot.press("ctrl+up")
            step = main.config.ui.budget_step
            assert main.meter.state.budget == before.budget + step  # the new budget, before any replan
            assert main.meter.pending and "…" in str(main.meter.render())
            slow.set()
            gate.set()
            await caught_up(pilot)
            assert main.meter.state.budget == main.view.plan.budget == before.budget + step
            assert not main.meter.pending
    finally:
        gate.set()


async def test_a_task_start_shows_in_the_status_line_at_once(tmp_path):
    from tui_helpers import make_app, settle

    app = make_app(tmp_path)
    slow = threading.Event()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            main = app.main_screen
            await until(pilot, lambda: main.view is not None and not main.meter.pending)
            engine_start = main.session.compaction.start_task
            main.session.compaction.start_task = lambda *a, **k: slow.wait(60) and engine_start(*a, **k)
            main.run_slash("/task start fix-rounding")
            await pilot.pause()
            assert "fix-rounding" in main.status.detail  # before the task is stored
            slow.set()
            await settle(pilot)
            assert main.session.wb.tasks.current(main.session.session_id).name == "fix-rounding"
            assert "fix-rounding" in main.status.detail
    finally:
        slow.set()


async def test_accept_reject_and_drop_show_on_their_rows_before_the_engine_has_done_them(tmp_path):
    from textual.widgets import DataTable

    from tui_helpers import cut_cards_config, make_app, settle

    app = make_app(tmp_path, config=cut_cards_config())
    slow = threading.Event()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            main = app.main_screen
            await pilot.press("ctrl+o")
            await settle(pilot)
            overlay = app.screen
            session = main.session
            def held(engine):
                def run(*args, **kwargs):
                    slow.wait(60)
                    return engine(*args, **kwargs)
                return run

            for name in ("accept", "reject", "drop"):  # the engine is slow: each waits until the test says
                setattr(session, name, held(getattr(session, name)))

            def select(predicate) -> str:
                index = next(n for n, r in enumerate(overlay.shown_rows) if predicate(r))
                overlay.query_one(DataTable).move_cursor(row=index, animate=False)
                return overlay.shown_rows[index].target

            accepted = select(lambda r: r.kind == "suggestion")
            await pilot.press("ctrl+y")
            rejected = select(lambda r: r.kind == "suggestion" and r.target != accepted)
            await pilot.press("ctrl+n")
            dropped = select(lambda r: r.kind == "included" and r.target.startswith("atom:"))
            await pilot.press("ctrl+d")
            assert overlay.pending == {accepted: "sticky", rejected: "rejected", dropped: "dropping"}
            table = overlay.query_one(DataTable)
            shown = {r.target: [str(c) for c in table.get_row(r.key)] for r in overlay.shown_rows
                     if r.target in overlay.pending}
            assert shown[accepted][0].startswith("★") and "accepted: pinning…" in shown[accepted]
            assert "rejected…" in shown[rejected] and "dropping…" in shown[dropped]
            assert "replanning" in str(overlay.query_one("#overlay-title").render())
            slow.set()
            await settle(pilot)
            assert overlay.pending == {}
            assert accepted in {p.target for p in session.pins()}
            assert not next(i for i in overlay.view.plan.items if i.id == dropped).included
    finally:
        slow.set()
