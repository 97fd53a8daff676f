"""The code graph: a networkx DiGraph of modules, classes and functions; PageRank; neighbours.

Nodes are symbol ids with ``kind``, ``name``, ``path`` and ``line`` attributes. An edge
``a -> b`` carries ``kinds`` (a tuple, since a function may both call and reference another) and
``kind`` (the first of them in ``EDGE_KINDS`` order).

PageRank runs on a cached sparse matrix (one per graph, built on first use): importance flows
along calls, inheritance, references and imports, and both ways along ``contains`` (a module
whose functions are much used is central too), each kind with its weight from ``IndexConfig``.
Personalized PageRank adds teleport weight to pinned, mentioned and recently active symbols.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import networkx as nx
import numpy as np

from ctxbench.records.code import CALLS, CONTAINS, EDGE_KINDS, IMPORTS, INHERITS, REFERENCES
from ctxbench.codegraph.resolve import Edge
from ctxbench.records.code import Symbol
from ctxbench.config import IndexConfig

PAGERANK_MAX_ITER = 100
PAGERANK_TOL = 1.0e-6  # per node, as networkx
_RANKER_KEY = "_ctxbench_ranker"

OUT_RELATION = {CALLS: "calls", INHERITS: "inherits from", REFERENCES: "references", IMPORTS: "imports",
                CONTAINS: "contains"}
IN_RELATION = {CALLS: "called by", INHERITS: "inherited by", REFERENCES: "referenced by", IMPORTS: "imported by",
               CONTAINS: "contained in"}


@dataclass(frozen=True)
class Neighbour:
    symbol: str
    kind: str  # edge kind
    direction: str  # "out" (symbol -> neighbour) or "in" (neighbour -> symbol)
    relation: str  # how the neighbour relates to the symbol, in words: "calls", "called by", "contained in", ...


def build_graph(symbols: Iterable[Symbol], edges: Iterable[Edge]) -> nx.DiGraph:
    graph = nx.DiGraph()
    for s in symbols:
        graph.add_node(s.id, kind=s.kind, name=s.name, path=s.path, line=s.line)
    order = {k: i for i, k in enumerate(EDGE_KINDS)}
    for e in edges:
        if e.src not in graph or e.dst not in graph:
            continue
        data = graph.get_edge_data(e.src, e.dst)
        if data is None:
            graph.add_edge(e.src, e.dst, kind=e.kind, kinds=(e.kind,))
        elif e.kind not in data["kinds"]:
            kinds = tuple(sorted((*data["kinds"], e.kind), key=lambda k: order.get(k, 99)))
            data["kinds"] = kinds
            data["kind"] = kinds[0]
    return graph


class _Ranker:
    """The row-normalized transition matrix of a graph, for repeated (personalized) PageRank."""

    def __init__(self, graph: nx.DiGraph, config: IndexConfig):
        import scipy.sparse as sp

        self.nodes = list(graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        weight = {CALLS: config.pagerank_calls_weight, INHERITS: config.pagerank_inherits_weight,
                  REFERENCES: config.pagerank_references_weight, IMPORTS: config.pagerank_imports_weight,
                  CONTAINS: config.pagerank_contains_weight}
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        for a, b, data in graph.edges(data=True):
            ia, ib = self.index[a], self.index[b]
            w = sum(weight.get(k, 0.0) for k in data["kinds"])
            if w <= 0:
                continue
            rows.append(ia)
            cols.append(ib)
            vals.append(w)
            if CONTAINS in data["kinds"]:
                rows.append(ib)
                cols.append(ia)
                vals.append(weight[CONTAINS])
        n = len(self.nodes)
        m = sp.csr_array((vals, (rows, cols)), shape=(n, n), dtype=float)
        out = np.asarray(m.sum(axis=1)).ravel()
        self.dangling = out == 0
        inv = np.zeros(n)
        inv[~self.dangling] = 1.0 / out[~self.dangling]
        self.matrix_t = (sp.diags_array(inv) @ m).T.tocsr()
        self.alpha = config.pagerank_alpha

    def rank(self, teleport: np.ndarray) -> np.ndarray:
        n = len(self.nodes)
        if n == 0:
            return teleport
        p = teleport / teleport.sum()
        x = p.copy()
        for _ in range(PAGERANK_MAX_ITER):
            last = x
            x = self.alpha * (self.matrix_t @ last + last[self.dangling].sum() * p) + (1 - self.alpha) * p
            if np.abs(x - last).sum() < n * PAGERANK_TOL:
                break
        return x


def _ranker(graph: nx.DiGraph, config: IndexConfig) -> _Ranker:
    key = (config.pagerank_alpha, config.pagerank_calls_weight, config.pagerank_inherits_weight,
           config.pagerank_references_weight, config.pagerank_imports_weight, config.pagerank_contains_weight,
           graph.number_of_nodes(), graph.number_of_edges())
    cached = graph.graph.get(_RANKER_KEY)
    if cached is not None and cached[0] == key:
        return cached[1]
    ranker = _Ranker(graph, config)
    graph.graph[_RANKER_KEY] = (key, ranker)
    return ranker


def pagerank(graph: nx.DiGraph, personalization: Mapping[str, float] | None = None,
             config: IndexConfig | None = None) -> dict[str, float]:
    """PageRank of every node (scores sum to 1).

    ``personalization`` maps symbol ids to extra teleport weight on top of the uniform
    ``IndexConfig.personalize_base_weight`` (see ``personalization``); None gives plain PageRank.
    """
    config = config or IndexConfig()
    ranker = _ranker(graph, config)
    n = len(ranker.nodes)
    if n == 0:
        return {}
    if personalization:
        teleport = np.full(n, config.personalize_base_weight / n if config.personalize_base_weight > 0 else 0.0)
        for node, w in personalization.items():
            i = ranker.index.get(node)
            if i is not None and w > 0:
                teleport[i] += w
        if teleport.sum() <= 0:
            teleport = np.ones(n)
    else:
        teleport = np.ones(n)
    scores = ranker.rank(teleport)
    return dict(zip(ranker.nodes, scores.tolist()))


def personalization(graph: nx.DiGraph, *, pins: Iterable[str] = (), mentioned: Iterable[str] = (),
                    activation: Mapping[str, float] | None = None,
                    config: IndexConfig | None = None) -> dict[str, float]:
    """Teleport weights for personalized PageRank from pins, symbols mentioned in the turn and activation scores.

    Ids not in the graph are ignored. A pinned or mentioned module spreads its weight over the
    symbols it contains, so that pinning a file favours what is in it.
    """
    config = config or IndexConfig()
    weights: dict[str, float] = {}

    def add(node: str, w: float) -> None:
        if node not in graph or w <= 0:
            return
        if graph.nodes[node].get("kind") == "module":
            children = [c for c in graph.successors(node) if CONTAINS in graph.edges[node, c]["kinds"]]
            if children:
                share = w / (len(children) + 1)
                weights[node] = weights.get(node, 0.0) + share
                for c in children:
                    weights[c] = weights.get(c, 0.0) + share
                return
        weights[node] = weights.get(node, 0.0) + w

    for node in pins:
        add(node, config.personalize_pin_weight)
    for node in mentioned:
        add(node, config.personalize_mention_weight)
    for node, score in (activation or {}).items():
        add(node, config.personalize_activation_weight * float(score))
    return weights


def neighbours(graph: nx.DiGraph, symbol: str, *, kinds: Sequence[str] | None = None, direction: str = "both",
               limit: int | None = None) -> list[Neighbour]:
    """Neighbours of ``symbol`` (callers, callees, container, members, bases, ...), sorted for stable output.

    ``direction``: "out" (what the symbol calls/contains/...), "in" (its callers, container, ...), or "both".
    """
    if symbol not in graph:
        return []
    wanted = set(kinds) if kinds else None
    found: list[Neighbour] = []
    if direction in ("out", "both"):
        for nb in graph.successors(symbol):
            for kind in graph.edges[symbol, nb]["kinds"]:
                if wanted is None or kind in wanted:
                    found.append(Neighbour(nb, kind, "out", OUT_RELATION.get(kind, kind)))
    if direction in ("in", "both"):
        for nb in graph.predecessors(symbol):
            for kind in graph.edges[nb, symbol]["kinds"]:
                if wanted is None or kind in wanted:
                    found.append(Neighbour(nb, kind, "in", IN_RELATION.get(kind, kind)))
    order = {k: i for i, k in enumerate(EDGE_KINDS)}
    found.sort(key=lambda n: (order.get(n.kind, 99), n.direction, n.symbol))
    return found[:limit] if limit is not None else found


def callers(graph: nx.DiGraph, symbol: str) -> list[str]:
    return [n.symbol for n in neighbours(graph, symbol, kinds=(CALLS,), direction="in")]


def callees(graph: nx.DiGraph, symbol: str) -> list[str]:
    return [n.symbol for n in neighbours(graph, symbol, kinds=(CALLS,), direction="out")]


def top_symbols(scores: Mapping[str, float], graph: nx.DiGraph, n: int,
                kinds: Iterable[str] = ("class", "function", "method", "interface", "struct", "trait", "enum")
                ) -> list[str]:
    """The ``n`` highest-scoring symbols of the given kinds (ties by id)."""
    allowed = set(kinds)
    ranked = sorted((sid for sid in scores if graph.nodes[sid].get("kind") in allowed),
                    key=lambda sid: (-scores[sid], sid))
    return ranked[:n]
