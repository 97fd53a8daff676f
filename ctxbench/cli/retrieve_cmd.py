"""``ctxbench retrieve QUERY``: the RetrievalSet for a question over an indexed repository."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config


def hits_json(retrieval_set: Any) -> dict[str, Any]:
    return {
        "retrieval_set_id": retrieval_set.id,
        "semantic_available": retrieval_set.semantic_available,
        "notes": list(retrieval_set.notes),
        "hits": [
            {"symbol": h.symbol, "path": h.path, "line": h.line, "score": round(h.score, 6), "why": h.why}
            for h in retrieval_set.hits
        ],
        **({"capsules": [{"id": c.capsule.id, "title": c.capsule.title, "score": round(c.score, 6), "why": c.why,
                          "status": c.capsule.status, "stale_files": list(c.capsule.stale_files)}
                         for c in retrieval_set.capsules]} if retrieval_set.capsules else {}),
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
    from ctxbench.cli.plan_cmd import EMPTY_QUERY
    from ctxbench.cli.repo_support import opened_retriever
    from ctxbench.records.errors import EmbedderError

    if not query.strip():
        fail(EMPTY_QUERY, 2)
    config = get_config(config_path)
    try:
        with opened_retriever(repo or Path.cwd(), db_path, config, semantic=semantic, one_shot=True) as (retriever, _):
            result = retriever.retrieve(query, k, scaffold="")  # hits only: no scaffold to build
    except EmbedderError as exc:
        fail(str(exc))
        return
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
    for offered in result.capsules:  # capsules of code the query is about (ctxbench capsules --show ID)
        c = offered.capsule
        state = f"  STALE: {c.stale_note()}" if c.stale else ""
        click.echo(f"capsule {c.label} {c.title}  {offered.score:.4f}{state}")
        click.echo(f"     {c.headline()}")
    click.echo(f"retrieval set {result.id}")
