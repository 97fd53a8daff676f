"""Closing a session while work runs on its store (the user quits while the repository indexes or embeds, or while
a plan runs): a warm-up stops at its next progress report, its transaction rolled back, and a plan is let finish,
before the store's connections are closed under them; nothing is left half-written, and the store opens again."""
from __future__ import annotations

import threading
import time

import pytest

from ctxbench.config import Config
from ctxbench.service.options import LaunchOptions
from ctxbench.service.session import WorkbenchSession
from ctxbench.service.store_users import SessionClosing
from ctxbench.service.workbench import Workbench
from counting_embedder import CountingEmbedder
from retrieval_fixture import write_repo


def _session(tmp_path, **options) -> WorkbenchSession:
    session = WorkbenchSession(LaunchOptions(db_path=tmp_path / "ctx.db", repo=write_repo(tmp_path / "repo"),
                                             new_session=True, title="closing", **options), Config())
    session.open()
    return session


def _close_at(session: WorkbenchSession, slot_text: str) -> list[BaseException]:
    """Run the warm-up in a thread; when it reports ``slot_text``, close the session from this thread (as the front
    end does on quitting) and let the warm-up go on; what the warm-up raised."""
    reached, raised = threading.Event(), []

    def status(progress) -> None:
        if slot_text in progress.text and not reached.is_set():
            reached.set()
            deadline = time.monotonic() + 10
            while not session.store_users.closed and time.monotonic() < deadline:  # the close has begun: the warm-up goes on
                time.sleep(0.001)

    def warm() -> None:
        try:
            session.attach_repository(status)
        except BaseException as exc:  # noqa: BLE001 - what the warm-up raised is the test's
            raised.append(exc)

    thread = threading.Thread(target=warm)
    thread.start()
    assert reached.wait(30)
    session.close()  # waits for the warm-up to stop
    assert not thread.is_alive()
    thread.join()
    return raised


def test_closing_while_the_repository_indexes_stops_the_indexing_before_the_store_closes(tmp_path):
    session = _session(tmp_path, warm_embedder=False)
    raised = _close_at(session, "indexing: parse")
    assert [type(e) for e in raised] == [SessionClosing]  # not a closed database under a running statement
    with Workbench(db_path=tmp_path / "ctx.db", config=Config()) as wb:  # nothing half-written: no file indexed
        assert wb.conn.execute("SELECT COUNT(*) FROM code_files").fetchone()[0] == 0
        assert wb.sessions.latest(str((tmp_path / "repo").resolve())) is not None


def test_closing_while_the_cards_embed_stops_the_embedding(tmp_path):
    embedder = CountingEmbedder()
    session = _session(tmp_path, embedder_factory=lambda config: embedder)
    raised = _close_at(session, "embedding")
    assert [type(e) for e in raised] == [SessionClosing]
    assert not session.semantic_ready


def test_a_closed_session_starts_no_warm_up(tmp_path):
    session = _session(tmp_path, warm_embedder=False)
    session.close()
    with pytest.raises(SessionClosing):
        session.attach_repository(lambda progress: None)


def test_closing_waits_for_a_plan_that_is_running(tmp_path):
    """A plan reads the index's own connection (retrieval): closing waits for it to end instead of closing that
    connection under it; a plan asked for once closed is refused."""
    session = _session(tmp_path, warm_embedder=False)
    session.attach_repository(lambda progress: None)
    planning, release, planned = threading.Event(), threading.Event(), []
    engine_plan = session.wb.planning.plan

    def slow_plan(request):
        planning.set()
        release.wait(10)
        return engine_plan(request)

    session.wb.planning.plan = slow_plan
    thread = threading.Thread(target=lambda: planned.append(session.plan("how are rows padded?")))
    thread.start()
    assert planning.wait(10)
    closer = threading.Thread(target=session.close)
    closer.start()
    time.sleep(0.2)
    assert closer.is_alive()  # waiting for the plan
    release.set()
    closer.join(10)
    thread.join(10)
    assert not closer.is_alive() and len(planned) == 1 and planned[0].plan.items
    with pytest.raises(SessionClosing):
        session.plan("and now?")
