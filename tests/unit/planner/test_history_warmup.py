"""History embedding is incremental and shown: vectors are cached by content hash (in the process and in the
store), a plan embeds only a few missing texts itself, the warm-up embeds the rest in chunks with progress — on a
terminal in the CLI, in the embedder slot of the workbench — and a warm-up cut short keeps what it made."""
from __future__ import annotations

import io
import sys

import pytest

from ctxbench.config import Config
from ctxbench.records.errors import EmbedderError
from ctxbench.retrieval import history_vectors
from ctxbench.retrieval.embedder import HashingEmbedder
from counting_embedder import CountingEmbedder
from ctxbench.service.workbench import Workbench

from retrieval_fixture import write_repo
from plan_requests import inputs_of

TURNS = 100


def _session(wb: Workbench, turns: int = TURNS) -> str:
    sid = wb.new_session("warm")
    for g in range(turns):
        wb.messages.append(sid, "user", f"question {g}: what about invoice number {g}?")
        wb.messages.append(sid, "assistant", f"answer {g}: invoice {g} is paid in cents")
    return sid


@pytest.mark.parametrize("strategy, units", [("fused", 2 * TURNS), ("semantic", TURNS)])
def test_a_plan_embeds_a_few_the_warm_up_the_rest_and_then_only_new_turns_are_embedded(tmp_path, strategy, units):
    config = Config()
    per_plan = config.planner.fused.embed_per_plan
    assert per_plan < units
    with Workbench(tmp_path / "w.db", config) as wb:
        sid = _session(wb)
        wb.embedder = CountingEmbedder()
        inputs_of(wb, sid, "which invoice is unpaid?", strategy=strategy)
        assert len(wb.embedder.texts) == per_plan + 1  # the newest texts, and the query
        assert wb.history.pending(sid) == units - per_plan  # left for the warm-up
        progress: list[tuple[int, int]] = []
        embedded = wb.history.warm(sid, lambda done, total: progress.append((done, total)), strategy=strategy)
        assert embedded == units - per_plan
        assert progress[0] == (0, embedded) and progress[-1] == (embedded, embedded)
        assert [d for d, _t in progress] == sorted(d for d, _t in progress) and len(progress) > 2  # in chunks
        assert wb.history.warm(sid, strategy=strategy) == 0  # nothing left

        wb.embedder.texts.clear()
        wb.messages.append(sid, "user", "question 99: and invoice 99?")
        wb.messages.append(sid, "assistant", "answer 99: invoice 99 is late")
        inputs = inputs_of(wb, sid, "which invoice is late?", strategy=strategy)
        new = 2 if strategy == "fused" else 1  # two messages, or one turn
        assert len(wb.embedder.texts) == new + 1  # only the new turn's texts, and the query
        assert wb.history.warm(sid, strategy=strategy) == 0  # every text has its vector
        assert wb.history.pending(sid) == 0
        if strategy == "fused":
            assert len(inputs.message_similarity) == units + new  # and every message its similarity
        else:  # the turns at least as similar as the floor, most similar first
            similarity = [s for _g, s in inputs.semantic_ranking]
            assert similarity == sorted(similarity, reverse=True) and min(similarity) >= 0.0

    with Workbench(tmp_path / "w.db", config) as again:  # a new process: the store's vector cache has them
        again.embedder = CountingEmbedder()
        assert again.history.warm(sid, strategy=strategy) == 0
        inputs_of(again, sid, "which invoice is late?", strategy=strategy)
        assert again.embedder.texts == ["which invoice is late?"]


def test_a_warm_up_cut_short_keeps_what_it_embedded(tmp_path):
    with Workbench(tmp_path / "w.db", Config()) as wb:
        sid = _session(wb)
        wb.embedder = CountingEmbedder(fail_after=1)  # one chunk, then the model fails
        with pytest.raises(EmbedderError):
            wb.history.warm(sid, strategy="fused")
        kept = len(wb.embedder.texts)
        assert kept == history_vectors.WARM_CHUNK
    with Workbench(tmp_path / "w.db", Config()) as later:
        later.embedder = CountingEmbedder()
        assert later.history.warm(sid, strategy="fused") == 2 * TURNS - kept


def test_plan_shows_history_embedding_progress_on_a_terminal(tmp_path, monkeypatch):
    from ctxbench.cli.plan_cmd import warm_history

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    with Workbench(tmp_path / "w.db", Config()) as wb:
        sid = _session(wb)
        wb.embedder = CountingEmbedder()
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        warm_history(wb, sid, "semantic", quiet=False)
        shown = terminal.getvalue()
        assert f"\rembedding history: 0/{TURNS}" in shown and f"\rembedding history: {TURNS}/{TURNS}" in shown
        assert shown.endswith("\n")
        piped = io.StringIO()  # not a terminal: nothing (a log would fill with counters)
        monkeypatch.setattr(sys, "stderr", piped)
        wb.messages.append(sid, "user", "one more question about invoices")
        warm_history(wb, sid, "semantic", quiet=False)
        assert piped.getvalue() == ""


def _open_session(tmp_path):
    """A workbench session on a small repository whose embedder counts what it encodes, opened."""
    from ctxbench.service.options import LaunchOptions
    from ctxbench.service.session import WorkbenchSession

    embedder = CountingEmbedder()
    options = LaunchOptions(db_path=tmp_path / "tui.db", repo=write_repo(tmp_path / "repo"),
                            embedder_factory=lambda config: embedder, strategy="fused")
    session = WorkbenchSession(options, Config())
    session.open()
    return session


def test_the_workbench_shows_history_embedding_in_the_embedder_slot(tmp_path):
    session = _open_session(tmp_path)
    try:
        for g in range(TURNS):
            session.wb.messages.append(session.session_id, "user", f"question {g} about invoice {g}")
        seen = []
        session.attach_repository(seen.append)
        history = [p for p in seen if p.slot == "embedder" and p.text.startswith("embedding history")]
        assert history and history[-1].fraction == 1.0 and history[-1].text == f"embedding history {TURNS}/{TURNS}"
        assert [p.fraction for p in history] == sorted(p.fraction for p in history)
        assert seen[-1].text == "semantic ready" and seen[-1].state == "ready"
        # switching to a strategy that compares other texts embeds those in the background, shown the same way
        seen.clear()
        session.use_settings(session.with_settings(strategy="semantic"))
        import threading

        for thread in threading.enumerate():
            if thread.name == "ctxbench-warm-history":
                thread.join(timeout=30)
        turns = [p for p in seen if p.text.startswith("embedding history")]
        assert turns and turns[-1].text == f"embedding history {TURNS}/{TURNS}"
        assert session.wb.history.warm(session.session_id, strategy="semantic") == 0
    finally:
        session.close()


def test_similarities_of_histories_grown_from_one_another_are_those_of_a_fresh_start():
    """The stacked vectors grow in place when a history only gained turns; two histories grown differently from
    the same one (two branches) do not write over each other."""
    from ctxbench.records.messages import Message
    from ctxbench.retrieval.history_vectors import MessageVectors

    config = Config().planner.semantic

    class Cache:
        def __init__(self) -> None:
            self.rows: dict = {}

        def load(self, hashes, key):
            return {h: self.rows[(h, key)] for h in hashes if (h, key) in self.rows}

        def save(self, rows, key):
            self.rows.update(((h, key), v) for h, v in rows)

    def history(n: int, branch: str = "") -> tuple[Message, ...]:
        return tuple(Message(id=i + 1, session_id="s", branch_id="b", group_id=i // 2,
                             role="user" if i % 2 == 0 else "assistant",
                             content=f"{branch} message {i} about invoices and {'cents' if i % 3 else 'ledgers'}")
                     for i in range(n))

    embedder, cache = HashingEmbedder(), Cache()
    grown = MessageVectors()
    base = history(40)
    left = base + history(50, "left")[40:]
    right = base + history(46, "right")[40:]
    steps = [base, base + history(44)[40:], left, right, left + history(52, "more")[50:]]
    for h in steps + steps[::-1]:  # and each again after the others grew (nothing written over)
        got, _ = grown.similarity(h, "unpaid invoices", embedder, cache, config, embed_limit=None)
        fresh, _ = MessageVectors().similarity(h, "unpaid invoices", embedder, cache, config, embed_limit=None)
        assert got == fresh and len(got) == len(h)


def test_texts_a_plan_left_without_a_vector_are_embedded_in_the_background(tmp_path):
    """Turns added while the workbench is open (an import, a long paste of turns, a transcript whose texts all
    changed) leave more missing texts than a plan embeds itself: the session's next plan starts the warm-up."""
    import threading

    session = _open_session(tmp_path)
    try:
        session.attach_repository(lambda progress: None)
        for g in range(TURNS):  # arrive after the attach's warm-up
            session.wb.messages.append(session.session_id, "user", f"question {g} about invoice {g}")
        session.plan("which invoice is unpaid?")
        for thread in threading.enumerate():
            if thread.name == "ctxbench-warm-history":
                thread.join(timeout=30)
        assert session.wb.history.warm(session.session_id, strategy="fused") == 0  # the background did it
        session.plan("which invoice is late?")
        assert session.wb.history.pending(session.session_id) == 0
    finally:
        session.close()
