"""The demo's vectors are kept between runs: a second demo start embeds nothing (``service.demo_vectors``)."""
from __future__ import annotations

import stat

from ctxbench.config import Config
from counting_embedder import CountingEmbedder
from ctxbench.service.demo import DemoFiles, demo_files
from ctxbench.service.demo_vectors import cache_dir, cache_file, demo_digest, keep
from ctxbench.service.options import LaunchOptions
from ctxbench.service.session import WorkbenchSession
from ctxbench.service.workbench import Workbench


def demo_start(db_path, files: DemoFiles) -> tuple[int, CountingEmbedder]:
    """One demo start as ``ctxbench demo`` makes it: open on a fresh database seeded with the kept vectors, index,
    warm; then keep. Returns how many vectors the database had when the session opened, and the embedder."""
    embedder = CountingEmbedder()
    digest = demo_digest(files)
    options = LaunchOptions(db_path=db_path, repo=files.repo, import_file=files.session_file, title="demo",
                            embedder_factory=lambda config: embedder, kept_vectors=cache_file(digest))
    session = WorkbenchSession(options, Config())
    session.open()
    seeded = session.wb.conn.execute("SELECT COUNT(*) FROM card_vectors").fetchone()[0]
    try:
        session.attach_repository(lambda progress: None)
        assert session.semantic_ready
        keep(session.wb, digest)
    finally:
        session.close()
    return seeded, embedder


def test_a_second_demo_start_embeds_no_history_text_and_no_card(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    files = demo_files()
    seeded, first = demo_start(tmp_path / "one.db", files)
    assert seeded == 0 and len(first.texts) > 400  # cards and the recorded session's messages
    seeded, second = demo_start(tmp_path / "two.db", files)
    assert seeded >= len(set(first.texts)) - 5 > 0
    assert second.texts == []  # the whole warm-up found every vector kept
    kept = cache_file(demo_digest(files))
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache_dir().stat().st_mode) == 0o700


def test_another_demo_content_gets_a_cache_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    files = demo_files()
    changed = tmp_path / "session.jsonl"
    changed.write_text(files.session_file.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    other = DemoFiles(files.repo, changed)
    assert demo_digest(other) != demo_digest(files)
    demo_start(tmp_path / "one.db", files)
    seeded, _ = demo_start(tmp_path / "two.db", other)
    assert seeded == 0  # the kept vectors belong to the other demo
    assert [p.name for p in cache_dir().iterdir()] == [cache_file(demo_digest(other)).name]  # the old one went


def test_indexing_keeps_the_vectors_of_messages(tmp_path):
    """Pruning the card vectors no card has any more (an index run does it) leaves turn and message vectors alone:
    it deleted every message vector of the fused strategy, so the history was embedded again after each index run."""
    import numpy as np

    from ctxbench.config import SemanticHistoryConfig
    from ctxbench.retrieval.history_vectors import cache_key, message_cache_key
    from ctxbench.store.vectors import prune_card_vectors

    with Workbench(db_path=tmp_path / "w.db", config=Config()) as wb:
        vector = np.ones(4, dtype=np.float32)
        keys = (message_cache_key("m", SemanticHistoryConfig()), cache_key("m", SemanticHistoryConfig()), "m|t1")
        for key in keys:
            wb.vectors.save([("h1", vector)], key)
        conn = wb.database.dedicated_connection()
        conn.execute("CREATE TABLE IF NOT EXISTS code_cards (card_hash TEXT)")  # an index holding no card
        prune_card_vectors(conn)
        left = {row[0] for row in conn.execute("SELECT model FROM card_vectors")}
    assert left == set(keys[:2])  # the card vector no card has went; the history's stayed
