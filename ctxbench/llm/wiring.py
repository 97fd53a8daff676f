"""Connecting a Workbench to a repository's code index for the turn runner.

``attach_repository(workbench, repo)`` plugs code retrieval into the Workbench (its
``retriever`` seam) and returns the :class:`CodeContext` that ``request_code_context`` expands
symbols with. Both come from the code index (``ctxbench.codegraph`` / ``ctxbench.retrieval``);
when the index cannot be loaded, the turn still runs without them and the tool says why.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxbench.llm.tools import CodeContext


class IndexCodeContext:
    """Symbol bodies from a loaded code index."""

    def __init__(self, index: Any, repo: Path, max_chars: int) -> None:
        self.index = index
        self.repo = Path(repo)
        self.max_chars = max_chars

    def expand(self, symbol: str) -> str | None:
        body = self.index.body(symbol) if hasattr(self.index, "body") else None
        if body is None:
            return None
        if len(body) > self.max_chars:
            body = body[: self.max_chars] + f"\n[cut at {self.max_chars} characters]"
        return body

    def known_names(self) -> tuple[list[str], list[str]]:
        symbols = list(getattr(self.index, "symbol_ids", lambda: [])())
        paths = list(getattr(self.index, "paths", lambda: [])())
        return symbols, paths


def attach_repository(workbench: Any, repo: Path | None) -> CodeContext | None:
    """Plug retrieval for ``repo`` into ``workbench`` and return its code context (None without an index)."""
    if repo is None:
        return None
    try:
        from ctxbench.codegraph.index import load_index
    except ImportError:
        return None
    index = load_index(Path(repo), workbench.config)
    if index is None:
        return None
    try:
        from ctxbench.retrieval.retriever import Retriever

        workbench.retriever = Retriever(index, workbench.config)
    except ImportError:
        pass
    return IndexCodeContext(index, Path(repo), workbench.config.llm.query_db_max_chars)
