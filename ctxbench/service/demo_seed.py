"""The demo's seed database: its recorded session imported and its repository indexed once, kept between runs.

Each ``ctxbench demo`` starts on a fresh database, so every start imported the recorded session again (masking
secrets and counting the tokens of its ~430 messages) and parsed the demo repository again before the kept vectors
(``service.demo_vectors``) could be used. When a demo ends and no seed exists for its content, one is written to
``<user data dir>/demo-vectors/<key>.seed.sqlite`` (0600, in the 0700 folder): a database holding the session
imported afresh (never the run's own, which the user changed), the code index and every kept vector. The next start
copies it in place of its empty database, in the session's worker (``LaunchOptions.seed_db``), and opens it:
nothing to import, the index only checked, every vector cached.

The key hashes the demo's content digest, ctxbench's version, its source (``code_digest.package_digest``) and the
configuration the demo runs with, so a seed is only used for the very content, code and settings that made it; a seed of other content is removed when a
new one is written.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

from ctxbench.service.code_digest import package_digest
from ctxbench.store.db import make_private_file
from ctxbench.service.demo import DemoFiles
from ctxbench.service.demo_vectors import SEED_SUFFIX, cache_dir, cache_file, made_cache_dir


def seed_key(digest: str, config) -> str:
    """What a seed is filed under: the demo content's ``digest``, ctxbench's version and source, and ``config`` (its
    repr: every field, frozen dataclasses all the way down)."""
    from ctxbench import __version__

    return hashlib.sha256(f"{digest}\0{__version__}\0{package_digest()}\0{config!r}".encode()).hexdigest()[:32]


def seed_file(digest: str, config) -> Path:
    return cache_dir() / f"{seed_key(digest, config)}{SEED_SUFFIX}"


def write_seed(files: DemoFiles, digest: str, config, title: str, derived_from: Path | None = None) -> Path | None:
    """Write the seed of the demo ``files`` (unless it exists): a fresh database with the recorded session imported
    under ``title``, the kept vectors of ``digest`` copied in and the repository indexed (its cards' vectors come
    from those). ``derived_from``: the database of the demo that just ran, whose ``title`` sessions' token counts and
    unchanged-text maskings are copied in (see :func:`_copy_derived`). Seeds of other keys are removed. Returns the
    seed's path (None: no recorded session to seed)."""
    from ctxbench.service.attach import index_repository
    from ctxbench.service.workbench import Workbench

    if files.session_file is None:
        return None
    target = seed_file(digest, config)
    if target.is_file():
        return target
    folder = made_cache_dir()
    partial = target.with_name(target.name + ".part")
    for leftover in folder.glob(partial.name + "*"):
        leftover.unlink()
    make_private_file(partial)  # the user's alone from the start
    try:
        with Workbench(db_path=partial, config=config, repo=files.repo) as wb:
            kept = cache_file(digest)
            if kept.is_file():
                wb.vectors.copy_in(kept)
            wb.import_file(files.session_file, title=title)
            index_repository(wb, files.repo, embed=False)
            sid = wb.sessions.latest(str(files.repo))
            with wb.connection() as conn:
                if derived_from is not None and sid is not None:
                    _copy_derived(conn, derived_from, title, sid)
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the one file that is copied
        os.replace(partial, target)
    finally:
        for leftover in folder.glob(partial.name + "*"):
            leftover.unlink()
    for old in folder.glob(f"*{SEED_SUFFIX}"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


def _copy_derived(conn: sqlite3.Connection, source: Path, title: str, session_id: str) -> None:
    """Copy into ``session_id`` the token counts and maskings the demo in ``source`` kept for its sessions titled
    ``title``, so a seeded start neither counts nor scans its history again. Only what holds no text is copied: counts
    (a text's hash and a number) and the maskings that left a text unchanged (a hash); a masking with a masked text
    (a reply or tool output the user added in that demo, say) is made again when needed. A ``source`` that cannot be
    read copies nothing: the seed is a cache."""
    if not source.is_file():
        return
    try:
        conn.execute("ATTACH DATABASE ? AS ran", (str(source),))  # only read: the demo that wrote it has ended
    except sqlite3.Error:
        return
    try:
        with conn:
            conn.execute(
                "INSERT OR IGNORE INTO token_counts (session_id, tokenizer, key, tokens) "
                "SELECT ?, c.tokenizer, c.key, c.tokens FROM ran.token_counts c "
                "JOIN ran.sessions s ON s.id = c.session_id WHERE s.title = ?", (session_id, title))
            conn.execute(
                "INSERT OR IGNORE INTO masked_texts (session_id, rules, key, redactions, masked) "
                "SELECT ?, m.rules, m.key, m.redactions, NULL FROM ran.masked_texts m "
                "JOIN ran.sessions s ON s.id = m.session_id WHERE s.title = ? AND m.masked IS NULL",
                (session_id, title))
    except sqlite3.Error:
        pass
    finally:
        conn.execute("DETACH DATABASE ran")


def plant_seed(seed: Path | None, db_path: Path | None) -> bool:
    """Copy ``seed`` to ``db_path`` when the seed exists and the database does not yet (0600); whether it did."""
    if seed is None or db_path is None or not seed.is_file() or db_path.exists():
        return False
    make_private_file(db_path)  # 0600 before a byte is copied in
    shutil.copyfile(seed, db_path)
    return True
