"""How the workbench starts: the first frame is painted before the engine and the embedding model are imported,
and the model starts loading as the session starts opening (beside the opening, the first plan and the indexing),
the one model the warm-up then uses."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.service.options import LaunchOptions
from ctxbench.tui.app import CtxbenchApp
from retrieval_fixture import write_repo
from tui_helpers import quiet_config, write_session

REPO_ROOT = Path(__file__).resolve().parents[3]


class WatchedEmbedder(HashingEmbedder):
    """Hashing vectors; notes what the screen showed when its load was started."""

    def __init__(self, app: CtxbenchApp, seen: list[str]) -> None:
        super().__init__()
        self.app, self.seen = app, seen

    def start_loading(self) -> None:
        main = self.app.main_screen
        self.seen.append("before the session opened" if main.session is None and main.view is None else "later")


async def test_the_model_starts_loading_before_the_session_opens_and_the_warm_up_uses_it(tmp_path):
    seen: list[str] = []
    made: list[WatchedEmbedder] = []
    holder: dict[str, CtxbenchApp] = {}

    def factory(config) -> WatchedEmbedder:
        made.append(WatchedEmbedder(holder["app"], seen))
        return made[-1]

    options = LaunchOptions(db_path=tmp_path / "tui.db", import_file=write_session(tmp_path / "session.jsonl"),
                            title="ledgerlite session", repo=write_repo(tmp_path / "repo"), embedder_factory=factory)
    app = CtxbenchApp(options, quiet_config())
    app._disable_notifications = True
    holder["app"] = app
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        for _ in range(3000):
            if main.session is not None and main.session.semantic_ready:
                break
            await pilot.pause(0.01)
        assert main.session.semantic_ready
        assert seen[0] == "before the session opened"
        assert len(made) == 1  # the warm-up waited for that model instead of making another
        assert main.session.attached.retriever.embedder is made[0]


PROBE = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path
    from ctxbench.service.options import LaunchOptions
    from ctxbench.tui.app import CtxbenchApp
    from ctxbench.tui.session_link import SessionLink

    HEAVY = ("ctxbench.service.session", "ctxbench.service.workbench", "ctxbench.retrieval.embedder", "onnxruntime",
             "numpy", "faiss", "torch", "networkx", "tiktoken", "ctxbench.tui.widgets.bubbles", "markdown_it",
             "ctxbench.tui.watch")
    found = {}
    start = SessionLink.start  # the engine's first worker, started once the first frame is on the screen

    def probe(self):
        found["loaded"] = sorted(m for m in HEAVY if m in sys.modules)
        found["indicator"] = str(self.host.query_one("#mode").render())
        start(self)

    SessionLink.start = probe
    repo, session, db = sys.argv[1:4]
    options = LaunchOptions(db_path=Path(db), repo=Path(repo), import_file=Path(session), title="demo")

    async def main():
        app = CtxbenchApp(options)
        async with app.run_test(size=(120, 36)) as pilot:
            while "loaded" not in found:
                await pilot.pause(0.01)

    asyncio.run(main())
    print(json.dumps(found))
""")


def test_the_first_frame_is_painted_before_the_engine_and_the_model_are_imported(tmp_path):
    repo = write_repo(tmp_path / "repo")
    session = write_session(tmp_path / "session.jsonl")
    env = {"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", PROBE, str(repo), str(session), str(tmp_path / "w.db")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["indicator"].startswith("CTX:")  # the main screen's frame
    assert found["loaded"] == []


async def test_the_first_plan_shows_while_the_history_is_still_mounting_and_its_line_lands_under_the_turn(tmp_path,
                                                                                                          monkeypatch):
    import asyncio

    from ctxbench.tui.widgets.chat import ChatPane
    from tui_helpers import settle

    gate = asyncio.Event()
    render = ChatPane.show_history

    async def slow_render(self, *args, **kwargs):  # a long session on a busy laptop: mounting takes a while
        await gate.wait()
        await render(self, *args, **kwargs)

    monkeypatch.setattr(ChatPane, "show_history", slow_render)
    options = LaunchOptions(db_path=tmp_path / "tui.db", import_file=write_session(tmp_path / "session.jsonl"),
                            title="ledgerlite session", index_repo=False)
    app = CtxbenchApp(options, quiet_config())
    app._disable_notifications = True
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        for _ in range(1000):  # (asyncio's sleep: a pilot pause would wait for a screen that waits for the history)
            if main.view is not None:
                break
            await asyncio.sleep(0.01)
        planned = main.view is not None
        gate.set() if not planned else None  # (a screen that waits for the history must not hang the test)
        assert planned and not main.ready  # the plan is on the meter, the history not yet
        assert "waiting" not in str(main.meter.render())
        await pilot.press("ctrl+t")  # keys are taken meanwhile
        assert str(main.query_one("#mode").render()) == "CTX: Heavy"
        gate.set()
        await settle(pilot)
        block = main.chat.block(main.view.group_id)
        assert block is not None and block.attachment() is not None
        assert str(block.attachment().render()) == str(main.attachment_text(main.view))


async def test_a_reopened_sessions_next_stored_plan_writes_only_what_its_turn_changed(tmp_path, monkeypatch):
    """Once the first plan of a reopened long session is shown, the workbench has recalled what it shares with the
    session's stored plans: the next turn's plan encodes only the chunks its new messages changed (the last chunk
    of atom rows and the one chunk of keys), not every chunk of the history again."""
    from ctxbench.bench.perf_large import import_session
    from ctxbench.config import Config
    from ctxbench.records.plan_request import PlanRequest
    from ctxbench.service.workbench import Workbench
    from ctxbench.store import plan_history
    from tui_helpers import settle

    db = tmp_path / "long.db"
    session_id, _, _ = import_session(db, Config(), 300)  # 300 turns: two chunks of atom rows, one of keys
    with Workbench(db, Config()) as wb:
        wb.planning.plan(PlanRequest(session_id, "where is the retry loop?", store=True))  # as a sent turn's
    options = LaunchOptions(db_path=db, session_id=session_id, index_repo=False)
    app = CtxbenchApp(options, quiet_config())
    app._disable_notifications = True
    encoded: list[str] = []
    chunk_key = plan_history.chunk_key
    monkeypatch.setattr(plan_history, "chunk_key", lambda sid, text: encoded.append(text) or chunk_key(sid, text))
    async with app.run_test() as pilot:
        await settle(pilot)
        wb = app.main_screen.link.session.wb
        encoded.clear()
        wb.messages.append(session_id, "user", "a new question about the parser")
        wb.messages.append(session_id, "assistant", "an answer")
        plan = wb.planning.plan(PlanRequest(session_id, "where is the retry loop?", store=True))
        assert len(encoded) == 2
        assert wb.plans.get(plan.plan_id) == plan
