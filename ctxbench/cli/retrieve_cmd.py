"""``ctxbench retrieve QUERY``: the RetrievalSet for a question over an indexed repository."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config, resolve_db


class StderrProgress:
    """Indexing / embedding progress on stderr: updated in place on a terminal, one line per finished phase otherwise."""

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
            if finished:
                self.stream.write(f"{phase}: {done}/{total}\n")
                self.stream.flush()
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


def open_retriever(repo: Path, conn: Any, config: Any, *, semantic: bool, progress: Any = None):
    """Index ``repo`` (incrementally; embedding its cards when ``semantic``) and return (Retriever, index)."""
    from ctxbench.codegraph.index import build_index, load_index, normalize_root
    from ctxbench.retrieval.retriever import Retriever, view_of

    root = normalize_root(repo)
    embedder = None
    embed = None
    if semantic:
        from ctxbench.retrieval.embedder import Embedder
        from ctxbench.retrieval.vectors import load_or_build_index

        embedder = Embedder(config.embedding)
        embedder.start_loading()  # overlaps the model load with parsing

        def embed(cards: Any, embed_progress: Any) -> Any:
            return load_or_build_index(conn, root, cards, embedder, config.embedding, embed_progress)[1]

    build_index(root, conn, config, progress=progress, embed=embed)
    index = load_index(root, conn, config)
    retriever = Retriever(conn, root, config, embedder, index=view_of(index, config))
    return retriever, index


def hits_json(retrieval_set: Any) -> dict[str, Any]:
    return {
        "retrieval_set_id": retrieval_set.id,
        "semantic_available": retrieval_set.semantic_available,
        "notes": list(retrieval_set.notes),
        "hits": [
            {"symbol": h.symbol, "path": h.path, "line": h.line, "score": round(h.score, 6), "why": h.why}
            for h in retrieval_set.hits
        ],
    }


@click.command(help="Retrieve the symbols of a repository that answer QUERY (indexes the repository first if needed).")
@click.argument("query")
@click.option("--repo", "repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Repository to search (default: the current directory).")
@click.option("-k", "k", type=click.IntRange(1, 500), default=None, help="Number of hits (default: retrieval.default_k).")
@click.option("--json", "as_json", is_flag=True, help="Print the RetrievalSet as JSON.")
@click.option("--semantic/--no-semantic", default=True,
              help="Load the embedding model and use semantic search (default) or answer from keyword and graph only.")
@db_option
@config_option
def command(query: str, repo: Path | None, k: int | None, as_json: bool, semantic: bool, db_path: Path | None,
            config_path: Path | None) -> None:
    from ctxbench.retrieval.embedder import EmbedderError
    from ctxbench.store.db import connect

    config = get_config(config_path)
    conn = connect(resolve_db(db_path))  # a StoreError is the CLI's one-line error (exit 2)
    progress = StderrProgress()
    try:
        retriever, _ = open_retriever(repo or Path.cwd(), conn, config, semantic=semantic, progress=progress)
        progress.close()
        if retriever.embedder is not None:
            retriever.embedder.wait()
        result = retriever.retrieve(query, k)
    except EmbedderError as exc:
        progress.close()
        fail(str(exc))
        return
    finally:
        progress.close()
        conn.close()
    if as_json:
        emit_json(hits_json(result))
        return
    for note in result.notes:
        click.echo(f"note: {note}")
    if not result.hits:
        click.echo("no hits")
    for rank, hit in enumerate(result.hits, 1):
        click.echo(f"{rank:>3}. {hit.symbol}  {hit.path}:{hit.line}  {hit.score:.4f}")
        if hit.why:
            click.echo(f"     {hit.why}")
    click.echo(f"retrieval set {result.id}")
