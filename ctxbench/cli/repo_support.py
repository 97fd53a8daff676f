"""What the commands working on a repository's code index share: progress on stderr, opening the retriever.

``opened_retriever`` opens the database, indexes the repository (incrementally, embedding its cards
and waiting for the model unless ``semantic`` is off) through the same ``service.attach.attach_repository``
the app and ``chat`` use, shows progress on stderr, and closes everything afterwards. ``EmbedderError``
(a model that cannot load) propagates to the command.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from ctxbench.service.workbench import Workbench


NO_SEMANTIC = "--no-semantic"  # why semantic search is off when a command ran without the model


class StderrProgress:
    """Indexing / embedding progress on stderr, updated in place, on a terminal only: piped or redirected (a log, a
    script reading stderr) the counters are noise, so nothing is written."""

    def __init__(self, stream: Any = None, min_interval: float = 0.1):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.min_interval = min_interval
        self.phase = ""
        self.last = 0.0
        self.shown = False  # something of the current phase is on the terminal line

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = total > 0 and done >= total
        if phase != self.phase:
            self._end_line()
            self.phase = phase
            self.last = 0.0
        if not self.tty:
            return
        if finished or now - self.last >= self.min_interval:
            self.stream.write(f"\r{phase}: {done}/{total}")
            self.stream.flush()
            self.last = now
            self.shown = True

    def _end_line(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\n")
            self.stream.flush()
        self.shown = False

    def close(self) -> None:
        self._end_line()


@contextmanager
def stderr_progress(quiet: bool = False) -> Iterator[StderrProgress | None]:
    """A ``StderrProgress`` (None when ``quiet``), its last line ended however the block ends."""
    progress = None if quiet else StderrProgress()
    try:
        yield progress
    finally:
        if progress is not None:
            progress.close()


def fit_root(repo: Path) -> Path:
    """``repo`` resolved, when it is a folder to index; else the reason on one line and exit 2, before anything is
    opened or indexed (``service.attach.root_refusal``: the home folder, the whole disk, /proc, /sys, /dev)."""
    from ctxbench.cli.common import fail
    from ctxbench.service.attach import root_refusal

    refusal = root_refusal(repo)
    if refusal:
        fail(refusal, 2)
    return repo.resolve()


def checked_repository(wb: Workbench, repo: Path, *, quiet: bool = False) -> None:
    """Refuse a folder that is no repository to index (the home folder or above it; the first time, one with no
    source files: exit 2, nothing indexed), and say so before a repository is indexed for the first time."""
    import click

    from ctxbench.cli.common import fail
    from ctxbench.service.attach import check_repository

    check = check_repository(wb, repo)
    if check.refusal:
        fail(check.refusal, 2)
    if not check.indexed_before and not quiet:
        click.echo(f"{check.root} is not indexed yet: indexing its {check.source_files} source files first "
                   "(later runs only read what changed)", err=True)


@contextmanager
def opened_retriever(repo: Path, db_path: Path | None, config: Any, *, semantic: bool,
                     quiet: bool = False, one_shot: bool = False) -> Iterator[tuple[Any, Any]]:
    """``(Retriever, CodeIndex)`` for ``repo`` in the user's database (or ``db_path``), ready to answer:
    indexed, and with ``semantic`` its cards embedded and the model loaded. The database is closed after."""
    from ctxbench.cli.common import resolve_db
    from ctxbench.service.attach import attach_repository
    from ctxbench.service.workbench import Workbench

    fit_root(repo)  # a folder that is no repository: refused before the store is opened or the model loads
    embedder = None
    if semantic:  # the model loads (in its thread) while the database opens and the repository is checked and indexed
        from ctxbench.retrieval.embedder import Embedder

        embedder = Embedder(config.embedding)
        embedder.start_loading()
    with Workbench(resolve_db(db_path), config) as wb:  # a StoreError is the CLI's one-line error (exit 2)
        checked_repository(wb, repo, quiet=quiet)
        with stderr_progress(quiet) as progress:
            attached = attach_repository(wb, repo, progress, semantic=semantic, embedder=embedder,
                                         one_shot=one_shot, semantic_off=NO_SEMANTIC)
        yield attached.retriever, attached.index
