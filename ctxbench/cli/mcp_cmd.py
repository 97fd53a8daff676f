"""``ctxbench mcp``: the planner as an MCP server over stdio, for other agents."""
from __future__ import annotations

import asyncio
from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config

HELP = """Serve the planner as MCP tools over stdio: plan_context, retrieve_code, pin, unpin, and the
resource ctxbench://plan/current.

Add it to an agent, e.g. Claude Code: `claude mcp add ctxbench -- ctxbench mcp --repo PATH`. The repository
is indexed on the first tool call (keyword and code graph; --semantic adds the embedding model). Plans are
stored in a session of the repository (or --session ID). --schemas prints the tools' schemas and their
size in tokens instead of serving."""


@click.command("mcp", help=HELP)
@click.option("--repo", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Repository to plan over (default: the enclosing repository of the current directory).")
@click.option("--session", "session_id", default=None, help="Plan in this session (default: the repository's latest).")
@click.option("--semantic", is_flag=True, help="Load the embedding model for semantic search (slower first call).")
@click.option("--schemas", is_flag=True, help="Print the tool schemas and their tokens, then exit.")
@click.option("--json", "as_json", is_flag=True, help="With --schemas: print JSON.")
@db_option
@config_option
def command(repo: Path | None, session_id: str | None, semantic: bool, schemas: bool, as_json: bool,
            db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.cli.open_cmd import find_repo_root
    from ctxbench.cli.repo_support import fit_root
    from ctxbench.mcp_server.server import build_server, tool_listing
    from ctxbench.service.agent_tools import AgentTools, tool_schema_tokens

    config = get_config(config_path)
    root = repo.resolve() if repo is not None else find_repo_root(Path.cwd())
    if not schemas:  # serving plans over it: a folder that is no repository is refused before the first call
        root = fit_root(root)
    tools = AgentTools(config, db_path=db_path, repo=root, session_id=session_id, semantic=semantic)
    server = build_server(tools)
    if schemas:
        from ctxbench.tokens import get_tokenizer

        listing = asyncio.run(tool_listing(server))
        tokenizer = get_tokenizer(config.tokenizer.name, config.tokenizer.cache_size)
        sizes = tool_schema_tokens(listing, tokenizer.count)
        total = sum(n for _, n in sizes)
        limit = config.mcp.max_schema_tokens
        if as_json:
            emit_json({"tokenizer": tokenizer.name, "limit": limit, "total_tokens": total,
                       "tools": [dict(t, tokens=n) for t, (_, n) in zip(listing, sizes)]})
        else:
            for name, n in sizes:
                click.echo(f"{name:<16}{n:>6} tok")
            click.echo(f"{'total':<16}{total:>6} tok  (limit {limit:,}, {tokenizer.name})")
        if total > limit:
            fail(f"the tool schemas take {total} tokens, over mcp.max_schema_tokens = {limit}", 1)
        return
    try:
        server.run("stdio")
    finally:
        tools.close()
