"""The demo's seed database: a second demo start opens the session an earlier run imported and the index it built,
importing nothing, parsing no file and embedding nothing, and it plans exactly as a start that imported afresh."""
from __future__ import annotations

import stat

from ctxbench.codegraph import index as index_mod
from ctxbench.config import Config
from ctxbench.service.demo import demo_files
from ctxbench.service.demo_seed import seed_file, write_seed
from ctxbench.service.demo_vectors import cache_dir, cache_file, demo_digest, keep
from ctxbench.service.options import LaunchOptions
from ctxbench.service.session import WorkbenchSession
from ctxbench.service.workbench import Workbench
from counting_embedder import CountingEmbedder

TITLE = "demo · demo_repo"


def start(db_path, files, config, *, seed: bool):
    """One demo start as ``ctxbench demo`` makes it (seeded or not): its session's snapshot, its first plan and the
    texts its warm-up embedded."""
    embedder = CountingEmbedder()
    digest = demo_digest(files)
    options = LaunchOptions(db_path=db_path, repo=files.repo, import_file=files.session_file, title=TITLE,
                            embedder_factory=lambda c: embedder, kept_vectors=cache_file(digest),
                            seed_db=seed_file(digest, config) if seed else None)
    session = WorkbenchSession(options, config)
    try:
        snapshot = session.open()
        session.plan()  # the front end's first plan comes before the index and the warm-up
        session.attach_repository(lambda progress: None)
        assert session.semantic_ready
        warmed = list(embedder.texts)  # what the warm-up embedded (the plan below embeds its question)
        plan = session.plan().plan
        keep(session.wb, digest)
    finally:
        session.close()
    return snapshot, plan, warmed


def test_a_seeded_demo_start_imports_nothing_parses_nothing_and_plans_as_a_fresh_import(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    files, config = demo_files(), Config()
    counts = {"imports": 0, "parsed": 0}
    import_file, build_index = Workbench.import_file, index_mod.build_index

    def counting_import(self, *args, **kwargs):
        counts["imports"] += 1
        return import_file(self, *args, **kwargs)

    def counting_index(*args, **kwargs):
        result = build_index(*args, **kwargs)
        counts["parsed"] += result.files_parsed
        return result

    monkeypatch.setattr(Workbench, "import_file", counting_import)
    monkeypatch.setattr(index_mod, "build_index", counting_index)
    fresh, fresh_plan, _ = start(tmp_path / "one.db", files, config, seed=True)  # no seed yet
    assert counts["imports"] == 1 and counts["parsed"] > 0
    seed = write_seed(files, demo_digest(files), config, TITLE)
    assert seed == seed_file(demo_digest(files), config) and seed.is_file()
    assert stat.S_IMODE(seed.stat().st_mode) == 0o600 and stat.S_IMODE(cache_dir().stat().st_mode) == 0o700
    counts.update(imports=0, parsed=0)
    seeded, seeded_plan, warmed = start(tmp_path / "two.db", files, config, seed=True)
    assert counts == {"imports": 0, "parsed": 0}  # the seed held the session and the index
    assert warmed == []  # and every vector
    assert stat.S_IMODE((tmp_path / "two.db").stat().st_mode) == 0o600

    def shown(snapshot):
        return [(m.group_id, m.role, m.content, m.tool_calls, m.tokens, m.status) for m in snapshot.history]

    assert seeded.title == fresh.title == TITLE and shown(seeded) == shown(fresh)

    def planned(plan):
        return [(i.id, i.kind, i.tokens, i.included, i.reason, i.messages) for i in plan.items]

    assert planned(seeded_plan) == planned(fresh_plan) and seeded_plan.budget == fresh_plan.budget


def test_a_seed_of_other_settings_is_not_used(tmp_path, monkeypatch):
    import dataclasses

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    files, config = demo_files(), Config()
    other = dataclasses.replace(config, ui=dataclasses.replace(config.ui, budget_step=config.ui.budget_step + 1))
    write_seed(files, demo_digest(files), config, TITLE)
    assert seed_file(demo_digest(files), config).is_file()
    assert not seed_file(demo_digest(files), other).is_file()
    write_seed(files, demo_digest(files), other, TITLE)
    assert [p.name for p in cache_dir().glob("*.seed.sqlite")] == [seed_file(demo_digest(files), other).name]


def test_a_seed_keeps_the_token_counts_and_plain_maskings_of_the_demo_that_ran(tmp_path, monkeypatch):
    from ctxbench.redaction import scanner
    from ctxbench.tokens import TiktokenTokenizer, get_tokenizer

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    files, config = demo_files(), Config()
    get_tokenizer().forget()  # each demo is a fresh process: nothing counted or masked in memory
    scanner.forget_masks()
    start(tmp_path / "ran.db", files, config, seed=False)
    write_seed(files, demo_digest(files), config, TITLE, derived_from=tmp_path / "ran.db")

    counted, scanned = [], []
    raw_count, find_spans = TiktokenTokenizer._raw_count, scanner.find_spans
    monkeypatch.setattr(TiktokenTokenizer, "_raw_count", lambda self, text: counted.append(text) or raw_count(self, text))
    monkeypatch.setattr(scanner, "find_spans", lambda text, filename="": scanned.append(text) or find_spans(text, filename))
    get_tokenizer().forget()
    scanner.forget_masks()
    start(tmp_path / "seeded.db", files, config, seed=True)
    with Workbench(db_path=tmp_path / "seeded.db", config=config) as wb:
        history = {m.content for m in wb.messages.all(wb.sessions.latest(str(files.repo))) if m.content}
    assert len(history) > 100
    assert not [t for t in counted if t in history]  # no message of the history counted again
    assert not [t for t in scanned if t in history]  # nor scanned for secrets
    assert scanned == []  # nor the repository files its plans' excerpts are read from
