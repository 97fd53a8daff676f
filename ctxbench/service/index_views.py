"""Index views for the retriever, made where the whole configuration is known: ``view_of`` adapts the code graph's
``CodeIndex`` to the ``retrieval.index_view.IndexView`` retrieval reads (its default scaffold sized by the planner's
modes and the default budget, counted with the configured tokenizer); ``load_index_view`` loads one from the store.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxbench.config import Config
from ctxbench.retrieval.index_view import IndexView

if TYPE_CHECKING:
    from ctxbench.codegraph.index import CodeIndex


def load_index_view(root: Path, conn: sqlite3.Connection, config: Config | None = None) -> IndexView | None:
    """The index of ``root`` from the store as an ``IndexView``, or None when it was never indexed."""
    from ctxbench.codegraph.index import IndexNotFound, load_index

    try:
        code_index = load_index(root, conn, None if config is None else config.index,
                                None if config is None else config.capsules)
    except IndexNotFound:
        return None
    return view_of(code_index, config)


def view_of(code_index: CodeIndex, config: Config | None = None, tokenizer: Any = None) -> IndexView:
    """Adapt the code graph's ``CodeIndex`` to what retrieval needs (the one place a view is made).

    The view's default scaffold is the scaffold at the largest scaffold share of any mode of the default
    budget (what a caller that names no budget gets), built on first use; ``scaffold_at(tokens)`` builds
    it for any size, counted with ``tokenizer`` (a Tokenizer, a callable returning one, or None for the
    configured one, loaded only when a scaffold is built), so each plan can get its own share's worth.
    """
    config = config or Config()
    chosen: dict[str, Any] = {}

    def counter() -> Any:
        if "tokenizer" not in chosen:
            if tokenizer is None:
                from ctxbench.tokens import get_tokenizer

                chosen["tokenizer"] = get_tokenizer(config.tokenizer.name, config.tokenizer.cache_size)
            else:
                chosen["tokenizer"] = tokenizer() if callable(tokenizer) and not hasattr(tokenizer, "count") \
                    else tokenizer
        return chosen["tokenizer"]

    def scaffold_at(tokens: int) -> str:
        return code_index.scaffold(tokens, counter()) if tokens > 0 else ""

    planner = config.planner
    share = max((m.scaffold_share for m in planner.modes), default=0.0)
    return IndexView(
        repo_key=code_index.root,
        cards=code_index.cards,
        graph=code_index.graph,
        version=code_index.version,
        scaffold_at=scaffold_at,
        default_scaffold=lambda: scaffold_at(max(1, int(config.default_budget_tokens() * share))),
        capsules=code_index.capsules,
    )


def retriever_for(conn: sqlite3.Connection, root: Path | str | None, config: Config, embedder: Any = None, *,
                  index: IndexView | None = None) -> Any:
    """The ``retrieval.retriever.Retriever`` of ``root`` with the sections of ``config`` it reads, over ``index``
    (default: the view of ``root`` loaded from the store when first asked for, as ``load_index_view`` makes it)."""
    from ctxbench.retrieval.retriever import Retriever

    load_view = None
    if index is None and root is not None:
        def load_view() -> IndexView | None:
            return load_index_view(Path(root).resolve(), conn, config)
    return Retriever(conn, root, config.retrieval, embedder, index=index, load_view=load_view,
                     index_config=config.index, embedding=config.embedding, capsules=config.capsules)
