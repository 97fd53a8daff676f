"""What retrieval reads of a code index: an ``IndexView`` (cards by symbol id, the graph, a repository key, the
scaffold, a version that changes whenever the cards or capsules change), made from the code graph's ``CodeIndex``
in one place (``service.index_views.view_of``, which reads the configuration the default scaffold needs)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Mapping

import networkx as nx

from ctxbench.records.capsules import Capsule
from ctxbench.records.code import SymbolCard


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
