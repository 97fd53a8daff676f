"""What retrieval derives from one version of a code index, built once per version into frozen records.

- ``IndexTables``: symbol names, the module symbols of each file, the methods of each class, each symbol's kind
  (``NESTED`` for a function inside a function) and area (``retrieval.areas``): what the name, scope and mention
  lookups and the kind and area weights read on every query;
- ``FeedbackWords``: the words of each card's id and signature and how many cards hold each word (the keyword
  feedback's IDF), built only where the feedback is on;
- ``GraphWalk``: the code graph with every edge both ways and its plain PageRank (personalized retrieval),
  built only where something is pinned, mentioned or active, or when ``prepare`` asks.

``VersionedTables`` keeps the latest record of each kind with the version it was built for, and builds a new
one when the view's version changes: the records themselves never change. ``Recent`` is the small bounded
cache the retriever keeps of per-query results (personalized closeness, query vectors).
"""
from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterable, Mapping, Sequence

import networkx as nx

from ctxbench.records.code import SymbolCard
from ctxbench.retrieval.areas import area_of, area_weight
from ctxbench.retrieval.mentions import SOURCE_SUFFIXES
from ctxbench.retrieval.vectors import NON_WORD, split_identifier

if TYPE_CHECKING:
    from ctxbench.config import IndexConfig, RetrievalConfig
    from ctxbench.retrieval.index_view import IndexView

NESTED = "nested"  # pseudo-kind for kind_weights: a function defined inside another function


@dataclass(frozen=True)
class IndexTables:
    """The lookups of one index version (see the module docstring); every list in card order."""

    version: str
    names: Mapping[str, tuple[str, ...]]  # symbol name -> ids, every kind but modules (too broad a hit)
    modules: Mapping[str, tuple[str, ...]]  # file path -> the ids of its module symbols
    members: Mapping[str, tuple[str, ...]]  # class id -> the ids of its methods
    kinds: Mapping[str, str]  # symbol id -> its kind (NESTED: a function or method inside a function or method)
    areas: Mapping[str, str]  # symbol id -> the area of its file ("" for ordinary code)

    def path_symbols(self, path: str) -> list[str]:
        """The module symbols of the file ``path`` (exact, or the one file whose path ends with it)."""
        path = path.removeprefix("./")
        if path in self.modules:
            return list(self.modules[path])
        matches = [sid for p in sorted(self.modules) if p.endswith("/" + path) for sid in self.modules[p]]
        return matches if len(matches) == 1 else []

    def resolve_targets(self, cards: Mapping[str, SymbolCard], targets: Iterable[Any]) -> list[str]:
        """Symbol ids of pin or activation targets (``card:<id>``, ``path:<file>``, a bare id, or a ``Pin``)."""
        out: dict[str, None] = {}
        for target in targets:
            text = target if isinstance(target, str) else getattr(target, "target", "")
            kind, sep, name = text.partition(":")
            if not sep:
                kind, name = "card", text
            if kind == "card" and name in cards:
                out[name] = None
            elif kind == "path":
                out.update(dict.fromkeys(self.path_symbols(name)))
        return list(out)

    def resolve_mentions(self, cards: Mapping[str, SymbolCard], mentioned: Iterable[str], limit: int) -> list[str]:
        """Symbol ids of what a turn mentions: exact ids, file paths (their modules), dotted tails, or bare
        names (every symbol so named, unless more than ``limit`` are)."""
        out: dict[str, None] = {}
        for raw in mentioned:
            name = raw.strip().strip("`").removeprefix("card:").rstrip("()")
            if name in cards:
                out[name] = None
                continue
            if name.startswith("path:") or "/" in name or name.endswith(SOURCE_SUFFIXES):
                out.update(dict.fromkeys(self.path_symbols(name.removeprefix("path:"))))
                continue
            parts = name.split(".")
            matches = [sid for sid in self.names.get(parts[-1], ()) if len(parts) == 1 or sid.endswith("." + name)]
            if 0 < len(matches) <= limit:
                out.update(dict.fromkeys(sorted(matches)))
        return list(out)

    def weight_of(self, sid: str, asked: frozenset[str], rc: RetrievalConfig) -> float:
        """The kind weight times the area weight of a symbol (an area the question asks for weighs 1)."""
        weight = _as_dict(rc.kind_weights).get(self.kinds.get(sid, ""), 1.0)
        if sid in self.areas and rc.area_weights:
            weight *= area_weight(self.areas[sid], asked, _as_dict(rc.area_weights))
        return weight

    def areas_last(self, ranking: Sequence[tuple[str, float]], asked: frozenset[str], rc: RetrievalConfig
                   ) -> list[tuple[str, float]]:
        """``ranking`` with the symbols of a demoted area (tests, platform shims, generated, vendored code the
        question does not ask for) moved after the others, each part in its order: they no longer take the ranks
        (and so the RRF share) of the symbols a question is about."""
        weights = _as_dict(rc.area_weights)
        kept: list[tuple[str, float]] = []
        demoted: list[tuple[str, float]] = []
        for sid, score in ranking:
            area = self.areas.get(sid, "")
            (demoted if area and area_weight(area, asked, weights) < 1.0 else kept).append((sid, score))
        return kept + demoted


def _as_dict(pairs: Any) -> Mapping[str, float]:
    """A config's (name, weight) pairs as a mapping, made once per tuple (read, never changed)."""
    try:
        return _pairs_dict(pairs)
    except TypeError:  # not hashable (a dict or a list given in code): made each time
        return dict(pairs)


@lru_cache(maxsize=32)
def _pairs_dict(pairs: tuple[tuple[str, float], ...]) -> Mapping[str, float]:
    return dict(pairs)


def build_tables(view: IndexView) -> IndexTables:
    names: dict[str, list[str]] = {}
    modules: dict[str, list[str]] = {}
    members: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    areas: dict[str, str] = {}
    file_areas: dict[str, str] = {}
    cards = view.cards
    for sid, card in cards.items():
        if card.kind == "module":
            modules.setdefault(card.path, []).append(sid)
        else:
            names.setdefault(sid.rsplit(".", 1)[-1], []).append(sid)
        parent = cards.get(sid.rsplit(".", 1)[0])
        kind = card.kind
        if kind in ("function", "method") and parent is not None and parent.kind in ("function", "method"):
            kind = NESTED
        if card.kind == "method" and parent is not None and parent.kind == "class":
            members.setdefault(sid.rsplit(".", 1)[0], []).append(sid)
        kinds[sid] = kind
        area = file_areas.get(card.path)
        if area is None:
            area = file_areas[card.path] = area_of(card.path)
        areas[sid] = area
    return IndexTables(view.version, _frozen(names), _frozen(modules), _frozen(members), kinds, areas)


def _frozen(table: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {key: tuple(ids) for key, ids in table.items()}


@dataclass(frozen=True)
class FeedbackWords:
    """The keyword feedback's word table of one index version."""

    version: str
    words: Mapping[str, frozenset[str]]  # symbol id -> the words of its id and signature
    df: Mapping[str, int]  # word -> how many of the version's cards hold it
    cards: int  # how many cards (at least 1): the N of the IDF


def build_feedback_words(view: IndexView) -> FeedbackWords:
    words = {sid: card_words(card) for sid, card in view.cards.items()}
    df: dict[str, int] = {}
    for found in words.values():
        for w in found:
            df[w] = df.get(w, 0) + 1
    return FeedbackWords(view.version, words, df, max(1, len(view.cards)))


@lru_cache(maxsize=200_000)
def _token_words(token: str) -> tuple[str, ...]:
    """One identifier token's words, remembered (ids and signatures repeat their tokens)."""
    return tuple(split_identifier(token))


def card_words(card: SymbolCard) -> frozenset[str]:
    """The words of a card's id and signature, identifiers split as the keyword index splits them."""
    out: set[str] = set()
    for text in (card.symbol_id, card.signature):
        for token in NON_WORD.split(text):
            if token:
                out.update(_token_words(token))
    return frozenset(out)


@dataclass(frozen=True)
class GraphWalk:
    """The code graph of one index version with every edge both ways (callers as well as callees are close),
    and its plain PageRank: what personalized PageRank walks and divides by."""

    version: str
    graph: nx.DiGraph
    plain: Mapping[str, float]

    def closeness(self, weights: Mapping[str, float], given: Iterable[str], icfg: IndexConfig) -> dict[str, float]:
        """Symbol -> closeness in (0, 1] to the symbols the walk restarts at (``weights``: the personalization):
        its personalized PageRank over its plain PageRank (so hubs every walk reaches do not win), relative to the
        best symbol the walk does not restart at, capped at 1; the ``given`` symbols left out."""
        from ctxbench.codegraph import graph as graphmod

        given = set(given)
        plain = self.plain
        scores = graphmod.pagerank(self.graph, weights, dataclasses.replace(icfg, personalize_base_weight=0.0))
        lift = {sid: v / plain[sid] for sid, v in scores.items()
                if v > 0 and plain.get(sid, 0.0) > 0 and sid not in weights and sid not in given}
        top = max(lift.values(), default=0.0)
        near = {sid: min(1.0, v / top) for sid, v in lift.items()} if top > 0 else {}
        for sid in weights:  # what a pinned or mentioned file contains: as close as can be
            if sid not in given:
                near[sid] = 1.0
        return near


def build_walk(view: IndexView, icfg: IndexConfig) -> GraphWalk:
    from ctxbench.codegraph import graph as graphmod

    both = nx.DiGraph()
    both.add_nodes_from(view.graph.nodes(data=True))
    for a, b, data in view.graph.edges(data=True):
        for x, y in ((a, b), (b, a)):
            if both.has_edge(x, y):
                kinds = tuple(sorted(set(both.edges[x, y]["kinds"]) | set(data["kinds"])))
                both.edges[x, y]["kinds"] = kinds
            else:
                both.add_edge(x, y, kinds=tuple(data["kinds"]))
    return GraphWalk(view.version, both, graphmod.pagerank(both, None, icfg))


class VersionedTables:
    """The latest record of each kind, with the index version it was built for (one lock, held only to read or
    swap a record: two threads asking at once may both build it, and either result is the same)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[str, tuple[str, Any]] = {}

    def get(self, kind: str, view: IndexView, build: Callable[[IndexView], Any]) -> Any:
        """The ``kind`` record of ``view``'s version, built by ``build(view)`` when there is none yet."""
        with self._lock:
            found = self._built.get(kind)
        if found is not None and found[0] == view.version:
            return found[1]
        value = build(view)
        with self._lock:
            self._built[kind] = (view.version, value)
        return value

    def tables(self, view: IndexView) -> IndexTables:
        return self.get("tables", view, build_tables)

    def feedback_words(self, view: IndexView) -> FeedbackWords:
        return self.get("words", view, build_feedback_words)

    def walk(self, view: IndexView, icfg: IndexConfig) -> GraphWalk:
        return self.get("walk", view, lambda v: build_walk(v, icfg))


class Recent:
    """A bounded, thread-safe cache of the last ``size`` results (least recently used dropped first)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
