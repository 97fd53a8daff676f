"""The demo's vectors kept between runs: each ``ctxbench demo`` starts on a fresh database, so without them it
embedded the demo's cards and its ~430 history texts again every time (80 s on a busy laptop).

The vectors of a run are written, when it ends, to ``<user data dir>/demo-vectors/<digest>.sqlite`` (0600, in a
0700 folder), where the digest hashes the demo's content: every file of its repository and its recorded
sessions. The next run's session seeds its database from that file as it opens (``LaunchOptions.kept_vectors``,
in the session's worker, not before the first paint), so its warm-up finds every vector cached and embeds
nothing. A demo whose files changed has another digest, hence a cache of its
own (the old one is removed when the new one is written). Rows are keyed by text hash and model key, as in any
database, so a cached vector is only ever used for the very text and model it was made for.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import platformdirs

from ctxbench.config import APP_NAME
from ctxbench.service.demo import DemoFiles

CACHE_FOLDER = "demo-vectors"
SUFFIX = ".sqlite"
SEED_SUFFIX = ".seed.sqlite"  # the seed databases beside the vectors (``service.demo_seed``)


def cache_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME)) / CACHE_FOLDER


def made_cache_dir() -> Path:
    """:func:`cache_dir`, made when missing and the user's alone (0700): where kept vectors and seeds are written."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def demo_digest(files: DemoFiles) -> str:
    """sha256 of the demo's content: each file of its repository (path and bytes) and its session file."""
    digest = hashlib.sha256()
    paths = sorted(p for p in files.repo.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in paths:
        digest.update(str(path.relative_to(files.repo)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    if files.session_file is not None:
        digest.update(b"session\0" + files.session_file.read_bytes())
    return digest.hexdigest()[:32]


def cache_file(digest: str) -> Path:
    return cache_dir() / f"{digest}{SUFFIX}"


def keep(workbench, digest: str) -> int:
    """Write ``workbench``'s vectors as the kept ones of the demo ``digest`` (older demos' files removed); how many."""
    folder = made_cache_dir()
    count = workbench.vectors.copy_out(cache_file(digest))
    if not count:
        return 0
    for old in folder.glob(f"*{SUFFIX}"):
        if old.name != cache_file(digest).name and not old.name.endswith(SEED_SUFFIX):  # seeds: ``demo_seed``'s
            old.unlink(missing_ok=True)
    return count
