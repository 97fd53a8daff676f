"""What retrieval reads of a code index: an ``IndexView`` (cards by symbol id, the graph, a repository key, the
scaffold, a version that changes whenever the cards or capsules change), made from the code graph's ``CodeIndex``
in one place (``view_of``) or loaded from the store (``load_index_view``)."""
from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import networkx as nx

from ctxbench.config import Config
from ctxbench.records.capsules import Capsule
from ctxbench.records.code import SymbolCard

if TYPE_CHECKING:
    from ctxbench.codegraph.index import CodeIndex


@dataclass(frozen=True)
class IndexView:
    """What retrieval needs of a code index: cards by symbol id, the graph, a repository key, the scaffold.

    ``scaffold`` is the scaffold at the default budget; ``scaffold_at(tokens)`` folds it to any other
    size (``service.attach.ModeRetrieval`` fits it to each plan's share).
    """

    repo_key: str
    cards: Mapping[str, SymbolCard]
    graph: nx.DiGraph
    scaffold: str = ""
    version: str = ""  # changes whenever the indexed cards (or the repository's capsules) change
    scaffold_at: Callable[[int], str] | None = dataclasses.field(default=None, compare=False, repr=False)
    # builds ``scaffold`` on first use when it was not given (a one-shot ``retrieve`` never needs it, and
    # building it costs the tokenizer's load and a PageRank)
    default_scaffold: Callable[[], str] | None = dataclasses.field(default=None, compare=False, repr=False)
    _built: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)
    capsules: tuple[Capsule, ...] = ()  # the repository's capsules of code (stale ones too)

    def scaffold_text(self) -> str:
        """The scaffold at the default budget: ``scaffold``, or built once by ``default_scaffold``."""
        if self.scaffold or self.default_scaffold is None:
            return self.scaffold
        if "scaffold" not in self._built:
            self._built["scaffold"] = self.default_scaffold()
        return self._built["scaffold"]


def load_index_view(root: Path, conn: sqlite3.Connection, config: Config | None = None) -> IndexView | None:
    """The index of ``root`` from the store as an ``IndexView``, or None when it was never indexed."""
    from ctxbench.codegraph.index import IndexNotFound, load_index

    try:
        code_index = load_index(root, conn, config)
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
