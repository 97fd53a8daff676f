"""The fusion stages: each takes the fused entries (symbol -> ``fuse.Fused``) and returns new ones, never changing
what it was given. In the order ``Retriever.retrieve`` runs them:

1. ``fuse_components``: the components' rankings fused (RRF or score sums, ``fuse``);
2. ``weigh_kinds``: each entry times its kind and area weight (a symbol named in the query keeps its score);
3. ``graph_support``: hits linked in the code graph to the strongest hits gain support (nothing is added);
4. ``personalize``: hits close to the pinned, mentioned and active symbols gain their closeness;
5. ``expand_graph``: the neighbours of the strongest hits join or gain as hop targets;
6. ``add_boosts``: pins, mentions and activation (pinned and mentioned symbols join);
7. ``add_feedback``: the keyword feedback's share, below the first ``feedback_head`` hits, which keep their places.

Scores are in RRF units (``unit``: a first place of weight 1) under the RRF fusion, else in raw units. The stages
that say something about a hit beyond its scores (supported by, neighbour of) return those notes beside the entries.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import networkx as nx

from ctxbench.retrieval.components import FEEDBACK, FEEDBACK_TAKERS, NAME, short_name
from ctxbench.retrieval.fuse import Fused, fuse, rrf_unit
from ctxbench.retrieval.tables import IndexTables

Entries = Mapping[str, Fused]
FEEDBACK_HEAD_MARGIN = 1e-6  # how far above the best lifted hit the feedback head is raised (RRF units)


@dataclass(frozen=True)
class Boosts:
    """The symbols a turn pins, mentions and has active (with their activation), resolved to the index's ids."""

    pins: frozenset[str] = frozenset()
    mentioned: frozenset[str] = frozenset()
    active: Mapping[str, float] = field(default_factory=dict)

    def personalizes(self, rc: Any) -> bool:
        """Whether these boosts restart a personalized walk (mentions alone only when configured so)."""
        return bool(self.pins or self.active or (self.mentioned and rc.personalize_mentions_alone))

    def label(self) -> str:
        """The words a personalized hit's why gives: "near pinned/mentioned/active code"."""
        kinds = [words for words, given in (("pinned", self.pins), ("mentioned", self.mentioned),
                                            ("active", self.active)) if given]
        return "near " + "/".join(kinds) + " code"


def unit(rc: Any) -> float:
    """The scale the stages' gains are given in: an RRF first place of weight 1 (1 under the score fusion)."""
    return rrf_unit(rc.rrf_k) if rc.fusion == "rrf" else 1.0


def fuse_components(rankings: Mapping[str, Sequence[tuple[str, float]]], weights: Mapping[str, float], rc: Any
                    ) -> dict[str, Fused]:
    return {f.symbol: f for f in fuse(rankings, weights, method=rc.fusion, rrf_k=rc.rrf_k)}


def weigh_kinds(entries: Entries, tables: IndexTables, asked: frozenset[str], rc: Any) -> dict[str, Fused]:
    """Each entry times its kind and area weight, but a symbol named in the query: wanted whatever its kind or
    area. (An entry of weight 1 is kept as it is: x * 1.0 is x.)"""
    out = dict(entries)
    for sid, entry in entries.items():
        if NAME not in entry.scores:
            weight = tables.weight_of(sid, asked, rc)
            if weight != 1.0:
                out[sid] = entry.times(weight)
    return out


def _strongest(entries: Entries, count: int) -> list[Fused]:
    return sorted(entries.values(), key=lambda f: (-f.score, f.symbol))[:count]


def graph_support(entries: Entries, graph: nx.DiGraph, rc: Any) -> tuple[dict[str, Fused], dict[str, str]]:
    """Hits the direct components found that are linked in the code graph to the strongest hits (callers,
    callees, members, bases) gain support: ``graph_support_weight`` x the relation's weight x the seed's
    strength relative to the best hit, the best link counting. Nothing is added: only candidates with
    their own evidence move, so a mode without graph neighbours keeps showing direct hits only. Returns the new
    entries and, per supported symbol, the words saying by what."""
    from ctxbench.codegraph.graph import IN_RELATION, OUT_RELATION, neighbours

    relation_weight = dict(rc.graph_relation_weights)
    seeds = _strongest(entries, rc.graph_support_seeds)
    top = seeds[0].score if seeds else 0.0
    if top <= 0:
        return dict(entries), {}
    best: dict[str, tuple[float, str]] = {}
    for seed in seeds:
        strength = seed.score / top
        for nb in neighbours(graph, seed.symbol):
            if nb.symbol == seed.symbol or nb.symbol not in entries:
                continue
            gain = relation_weight.get(nb.kind, 0.0) * strength
            if gain > best.get(nb.symbol, (0.0, ""))[0]:
                words = (IN_RELATION if nb.direction == "out" else OUT_RELATION).get(nb.kind, nb.kind)
                best[nb.symbol] = (gain, f"{words} {short_name(seed.symbol)}")
    out = dict(entries)
    scale = unit(rc)
    for sid, (gain, _) in best.items():
        out[sid] = out[sid].plus(rc.graph_support_weight * scale * gain, {"support": gain})
    return out, {sid: words for sid, (_, words) in best.items()}


def personalize(entries: Entries, near: Mapping[str, float], rc: Any) -> dict[str, Fused]:
    """The hits at least ``personalized_min`` close (``near``: personalized PageRank closeness) gain
    ``personalized_weight`` x their closeness."""
    scale = unit(rc)
    out = dict(entries)
    for sid, entry in entries.items():
        closeness = near.get(sid, 0.0)
        if closeness >= rc.personalized_min:
            out[sid] = entry.plus(rc.personalized_weight * scale * closeness, {"personalized": closeness})
    return out


def expand_graph(entries: Entries, graph: nx.DiGraph, cards: Mapping[str, Any], tables: IndexTables,
                 asked: frozenset[str], similarity: Callable[[str], float] | None, rc: Any
                 ) -> tuple[dict[str, Fused], dict[str, tuple[str, str]]]:
    """Neighbours of the strongest hits (callers, callees, members, bases) scored as hop targets: the seed's
    strength times the relation's weight times, blended by ``graph_hop_relevance``, how much the neighbour itself
    is about the query (its cosine to the query, or its own fused score, relative to the best neighbour); the
    ``graph_neighbours`` best of each seed gain that score (kind and area weighted), joining when new. Returns the
    new entries and, per neighbour, (the relation in words, the seed it neighbours)."""
    from ctxbench.codegraph.graph import IN_RELATION, OUT_RELATION, neighbours

    relation_weight = dict(rc.graph_relation_weights)
    seeds = _strongest(entries, rc.graph_seeds)
    top = seeds[0].score if seeds else 0.0
    blend = rc.graph_hop_relevance
    candidates = {seed.symbol: [(relation_weight.get(nb.kind, 0.0), nb) for nb in neighbours(graph, seed.symbol)
                                if nb.symbol != seed.symbol and nb.symbol in cards]
                  for seed in seeds}
    relevance: dict[str, float] = {}
    if blend > 0:
        pool = {nb.symbol for near in candidates.values() for _, nb in near}
        raw = {sid: max(0.0, similarity(sid)) if similarity is not None else 0.0 for sid in pool}
        best_sim = max(raw.values(), default=0.0)
        for sid in pool:
            own = entries[sid].score / top if sid in entries and top > 0 else 0.0
            relevance[sid] = max(raw[sid] / best_sim if best_sim > 0 else 0.0, min(1.0, own))
    scale = unit(rc)
    gains: dict[str, tuple[float, str, str]] = {}
    for seed in seeds:
        # the seed's neighbours by hop score (relation weight x relevance), at most graph_neighbours of them
        near = sorted(((w * ((1.0 - blend) + blend * relevance.get(nb.symbol, 0.0)), nb)
                       for w, nb in candidates[seed.symbol]),
                      key=lambda wn: (-wn[0], wn[1].symbol))
        for weight, nb in near[: rc.graph_neighbours]:
            if weight <= 0:
                continue
            gain = rc.graph_weight * scale * weight * (seed.score / top if top > 0 else 0.0)
            if gain > gains.get(nb.symbol, (0.0, "", ""))[0]:
                # how the neighbour relates to the seed: the seed calls it -> it is "called by" the seed
                words = (IN_RELATION if nb.direction == "out" else OUT_RELATION).get(nb.kind, nb.kind)
                gains[nb.symbol] = (gain, words, seed.symbol)
    out = dict(entries)
    notes: dict[str, tuple[str, str]] = {}
    for sid, (gain, words, seed) in gains.items():
        entry = out.get(sid)
        if entry is None or NAME not in entry.scores:
            gain *= tables.weight_of(sid, asked, rc)
        out[sid] = (entry if entry is not None else Fused(sid)).plus(gain, {"graph": gain})
        notes[sid] = (f"{words} {short_name(seed)}", seed)
    return out, notes


def add_boosts(entries: Entries, boosts: Boosts, rc: Any) -> dict[str, Fused]:
    """Pinned symbols gain ``pin_boost``, mentioned ones ``mention_boost`` (not when the query names them: the
    name component counted them), active ones ``activation_boost`` x their activation; pinned and mentioned
    symbols join when no component found them."""
    out = dict(entries)
    for sid in sorted(boosts.pins | boosts.mentioned):
        if sid not in out:
            out[sid] = Fused(sid)
    for sid, entry in out.items():
        if sid in boosts.pins:
            entry = entry.plus(rc.pin_boost, {"pin": 1.0})
        if sid in boosts.mentioned:  # named in the query: the name component counted it already
            entry = (Fused(sid, entry.score, {**entry.scores, "mentioned": 1.0}, entry.ranks) if NAME in entry.scores
                     else entry.plus(rc.mention_boost, {"mentioned": 1.0}))
        if boosts.active.get(sid):
            entry = entry.plus(rc.activation_boost * boosts.active[sid], {"activation": boosts.active[sid]})
        out[sid] = entry
    return out


def add_feedback(entries: Entries, feedback: Sequence[tuple[str, float]], cards: Mapping[str, Any],
                 tables: IndexTables, asked: frozenset[str], rc: Any) -> dict[str, Fused]:
    """Add the feedback ranking's share (``prf_keyword_weight``, kind and area weighted as fused scores are) to the
    hits the keyword, name, scope or phrase components found, which have evidence of their own for the relevance
    floor whatever its settings (so the floor still never changes the order). It adds no hit (on the twelve tuning
    repositories adding the symbols only it found changed no figure).

    The first ``feedback_head`` hits keep their places: they get no share, and when a lifted hit would pass the
    last of them they are all raised by the same amount, just above it (their order and gaps unchanged, so the
    score the planner orders cards by still agrees with the hits' order).
    """
    found = {sid for sid, f in entries.items() if any(c in f.scores for c in FEEDBACK_TAKERS)}
    head = sorted((f for f in entries.values() if f.symbol in cards),
                  key=lambda f: (-f.score, f.symbol))[: max(0, rc.feedback_head)]
    taken = {f.symbol for f in head}
    out = dict(entries)
    for f in fuse({FEEDBACK: feedback}, {FEEDBACK: rc.prf_keyword_weight}, method=rc.fusion, rrf_k=rc.rrf_k):
        entry = out.get(f.symbol)
        if entry is None or f.symbol not in found or f.symbol in taken:  # the feedback words alone do not tie
            continue  # a symbol to the query; the head keeps its places
        gain = f.score if NAME in entry.scores else f.score * tables.weight_of(f.symbol, asked, rc)
        out[f.symbol] = entry.plus(gain, f.scores, f.ranks)
    if head:
        floor = min(f.score for f in head)
        best = max((f.score for sid, f in out.items() if sid not in taken and sid in cards), default=None)
        if best is not None and best >= floor:
            lift = best - floor + FEEDBACK_HEAD_MARGIN
            for f in head:
                out[f.symbol] = out[f.symbol].plus(lift, {"feedback_head": lift})
    return out


def ranked(entries: Entries, cards: Mapping[str, Any], k: int) -> list[Fused]:
    """The ``k`` best entries of symbols the index has, best first (ties by symbol id)."""
    return sorted((f for f in entries.values() if f.symbol in cards), key=lambda f: (-f.score, f.symbol))[:k]
