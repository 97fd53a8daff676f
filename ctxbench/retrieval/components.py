"""The retrieval components, as one table: each ranks the index's symbols for a question in its own way.

A ``Component`` has its name (the key of its ranking, of its score in a hit's ``components`` and in the fused
entries), the ``retrieve(sources=...)`` switch that turns it on, the config field of its fusion weight, the words
and figures it adds to a hit's why, its flags (what the keyword feedback, the relevance floor and a hit's provenance
make of it) and its ``rank`` function. ``COMPONENTS`` lists them in the order they run and are explained:

- semantic: cosine of the query to each card's embedded text (FAISS), when the embedder is ready;
- keyword: BM25 over identifier-aware tokens (``keyword``);
- name: symbols whose name is a code identifier written in the query;
- scope: the members of the classes named in the query, in the order semantic and keyword ranked them;
- class_scope: the members of the classes the semantic or keyword component ranks first (``class_member_ranking``);
- phrase: symbols whose source lines hold text the query quotes (``phrases``);
- capsule: the symbols of the capsules the query is most about (``retrieval.capsules``);
- prf_keyword: the keyword feedback (``feedback_terms``): not fused with the others, added last by
  ``stages.add_feedback``.

The components marked ``areas_last`` have the symbols of demoted areas moved after the others before the components
marked ``after_areas`` (and the feedback) read them. The functions below are the pure rankers; the retriever hands
each component what it needs through a ``Question``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from ctxbench.retrieval.keyword import query_terms
from ctxbench.retrieval.mentions import code_identifiers
from ctxbench.retrieval.stemming import stem
from ctxbench.retrieval.tables import FeedbackWords, IndexTables

if TYPE_CHECKING:
    from ctxbench.config import CapsuleConfig, RetrievalConfig
    from ctxbench.retrieval.index_view import IndexView
    from ctxbench.records.code import SymbolCard

Ranking = Sequence[tuple[str, float]]  # (symbol id, raw score), best first

SOURCES = ("semantic", "keyword", "name", "phrase", "graph", "capsule")  # the switches of ``retrieve(sources=...)``
# the components the stages and the explainer name: a symbol NAME found is wanted whatever its kind or area (the
# kind, area and feedback weights and the mention boost leave it alone); SEMANTIC and KEYWORD are the floor's evidence
SEMANTIC, KEYWORD, NAME = "semantic", "keyword", "name"


@dataclass(frozen=True)
class SemanticAnswer:
    """What the semantic component found: its ranking, the note saying why it was not used, the cosine of any symbol
    to the query and the query's vector (None and None without)."""

    available: bool = False
    ranking: Ranking = ()
    note: str = ""
    similarity: Callable[[str], float] | None = None
    vector: Any = None


@dataclass(frozen=True)
class Question:
    """One query as the components see it."""

    text: str
    view: IndexView
    tables: IndexTables
    asked: frozenset[str]  # the areas the question asks for (``areas.asks_for``)
    semantic: SemanticAnswer
    searcher: Any  # the Retriever: the components that read the store (keyword, phrases, capsules) ask it


def short_name(symbol: str) -> str:
    """``widgets._data_table.DataTable.sort`` -> ``DataTable.sort`` (class.member or the bare name)."""
    parts = symbol.split(".")
    return ".".join(parts[-2:]) if len(parts) > 1 else symbol


@dataclass(frozen=True)
class Component:
    name: str
    source: str  # the switch in ``retrieve(sources=...)`` that turns it on
    weight_field: tuple[str, str]  # (config section, field): its weight in the fusion
    why: Callable[[float, int, str], str]  # (raw score, rank, symbol) -> its words in the hit's why
    rank: Callable[[Question, Mapping[str, Ranking]], Ranking | None]  # (question, the rankings so far)
    figures: Callable[[float, int], tuple[tuple[str, float], ...]] | None = None  # its entries in hit.components
    read_by_others: bool = False  # runs even at weight 0: other components read its ranking
    areas_last: bool = False  # demoted areas go last in its ranking before later components read it
    after_areas: bool = False  # runs after the demoted areas went last (reads the reordered rankings)
    fused: bool = True  # False: not fused with the others (the keyword feedback, added last)
    takes_feedback: bool = False  # the keyword feedback's share goes to the hits it found
    evidence: bool = False  # alone ties a hit to the query (the relevance floor)
    provenance: str = ""  # the hit's provenance when this is its best-ranked direct component

    def weight(self, retrieval: RetrievalConfig, capsules: CapsuleConfig) -> float:
        """Its fusion weight, read from the section its ``weight_field`` names (``retrieval`` or ``capsules``)."""
        section, name = self.weight_field
        return getattr({"retrieval": retrieval, "capsules": capsules}[section], name)

    def shown(self, score: float, rank: int) -> tuple[tuple[str, float], ...]:
        """Its entries in a hit's ``components``: its raw score rounded, unless it has figures of its own."""
        if self.figures is not None:
            return self.figures(score, rank)
        return ((self.name, round(score, 4)),)

    @property
    def direct(self) -> bool:
        """Found from the query itself: fused in the keyword feedback's first fusion."""
        return self.fused and not self.after_areas


def _capsule_ranking(q: Question, got: Mapping[str, Ranking]) -> Ranking | None:
    view = q.view
    if not view.capsules:
        return None
    return q.searcher.capsule_ranking(view, q.text, q.semantic.vector, got.get(SEMANTIC, ()),
                                      got.get(KEYWORD, ()), got.get(NAME, ()))


COMPONENTS: tuple[Component, ...] = (
    Component(SEMANTIC, "semantic", ("retrieval", "semantic_weight"),
              why=lambda score, rank, sid: f"semantic {score:.2f}",
              rank=lambda q, got: q.semantic.ranking if q.semantic.available else None,
              read_by_others=True, areas_last=True, provenance="semantic"),
    Component(KEYWORD, "keyword", ("retrieval", "keyword_weight"),
              why=lambda score, rank, sid: f"keyword rank {rank}",
              rank=lambda q, got: q.searcher.keyword_ranking(q.text, q.searcher.retrieval.candidate_pool),
              figures=lambda score, rank: ((KEYWORD, round(score, 4)), ("keyword_rank", float(rank))),
              read_by_others=True, areas_last=True, takes_feedback=True, provenance="keyword"),
    Component(NAME, "name", ("retrieval", "name_weight"),
              why=lambda score, rank, sid: "named in the query",
              rank=lambda q, got: name_ranking(q.tables, q.text, q.searcher.retrieval.name_generic_max),
              figures=lambda score, rank: ((NAME, 1.0),),
              read_by_others=True, takes_feedback=True, evidence=True, provenance="keyword"),
    Component("scope", "name", ("retrieval", "scope_weight"),
              why=lambda score, rank, sid: f"member of {short_name(sid.rsplit('.', 1)[0])}",
              rank=lambda q, got: scope_ranking(q.view.cards, got[NAME], got.get(SEMANTIC, ()),
                                                got.get(KEYWORD, ())),
              takes_feedback=True, evidence=True),
    Component("class_scope", "name", ("retrieval", "class_scope_weight"),
              why=lambda score, rank, sid: f"member of {short_name(sid.rsplit('.', 1)[0])}, a class the query is about",
              rank=lambda q, got: class_member_ranking(
                  q.view.cards, q.tables, q.searcher.retrieval, q.semantic.similarity, got.get(SEMANTIC, ()),
                  got.get(KEYWORD, ()), named=[sid for sid, _ in got[NAME]])),
    Component("phrase", "phrase", ("retrieval", "phrase_weight"),
              why=lambda score, rank, sid: "holds the quoted text",
              rank=lambda q, got: q.searcher.phrase_ranking(q.text, q.searcher.retrieval.candidate_pool),
              takes_feedback=True, evidence=True),
    Component("capsule", "capsule", ("capsules", "retrieval_weight"),
              why=lambda score, rank, sid: "in a capsule the query is about",
              rank=_capsule_ranking, after_areas=True),
    Component("prf_keyword", "keyword", ("retrieval", "prf_keyword_weight"),
              why=lambda score, rank, sid: f"feedback keyword rank {rank} (words of the first hits)",
              rank=lambda q, got: q.searcher.feedback_ranking(q.view, q.text, got, q.asked),
              after_areas=True, fused=False),
)
BY_NAME: Mapping[str, Component] = {c.name: c for c in COMPONENTS}
PROVENANCE = tuple((c.name, c.provenance) for c in COMPONENTS if c.provenance)  # (component, the provenance it gives)
FEEDBACK = "prf_keyword"  # the component the feedback stage adds
FEEDBACK_TAKERS = tuple(c.name for c in COMPONENTS if c.takes_feedback)
EVIDENCE = tuple(c.name for c in COMPONENTS if c.evidence)


def weights(retrieval: RetrievalConfig, capsules: CapsuleConfig, components: Iterable[Component] = COMPONENTS
            ) -> dict[str, float]:
    """Component name -> its fusion weight."""
    return {c.name: c.weight(retrieval, capsules) for c in components}


def rank_components(question: Question, sources: Sequence[str], retrieval: RetrievalConfig,
                    capsules: CapsuleConfig) -> dict[str, Ranking]:
    """Every component ``sources`` turns on and its weight (or another component) needs, in table order: the
    direct ones, then (demoted areas moved last in the rankings marked so) the ones that read those."""
    rc = retrieval
    got: dict[str, Ranking] = {}
    for late in (False, True):
        if late and rc.areas_last_in_components and rc.area_weights:
            got = {name: question.tables.areas_last(ranking, question.asked, rc)
                   if BY_NAME[name].areas_last else ranking for name, ranking in got.items()}
        for c in COMPONENTS:
            if c.after_areas != late or c.source not in sources or not (c.read_by_others or c.weight(retrieval, capsules) > 0):
                continue
            ranking = c.rank(question, got)
            if ranking is not None:
                got[c.name] = ranking
    return got


def name_ranking(tables: IndexTables, query: str, generic_max: int = 0) -> list[tuple[str, float]]:
    """Symbols whose name (or dotted id suffix) is a code identifier written in the query; with ``generic_max``, a
    bare name more than that many symbols share (``__init__``, ``get``) is left out as a word of low information."""
    found: dict[str, float] = {}
    for token in code_identifiers(query):
        parts = token.split(".")
        named = tables.names.get(parts[-1], ())
        if generic_max and len(parts) == 1 and len(named) > generic_max:
            continue
        for sid in named:
            # a dotted mention (Screen.dismiss) must match the id's tail, a bare name any symbol so named
            if len(parts) > 1 and not sid.endswith("." + token) and sid != token:
                continue
            found[sid] = max(found.get(sid, 0.0), float(len(parts)))
    return sorted(found.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))


def scope_ranking(cards: Mapping[str, SymbolCard], named: Ranking, *rankings: Ranking) -> list[tuple[str, float]]:
    """Members of the classes named in the query, in the order the other components ranked them."""
    if not named:
        return []
    scopes = {sid for sid, _ in named if cards[sid].kind == "class"}
    if not scopes:
        return []
    best: dict[str, float] = {}
    for ranking in rankings:
        for rank, (sid, _) in enumerate(ranking, 1):
            if sid.rsplit(".", 1)[0] in scopes:
                best[sid] = max(best.get(sid, 0.0), 1.0 / rank)
    return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))


def class_member_ranking(cards: Mapping[str, SymbolCard], tables: IndexTables, rc: RetrievalConfig,
                         similarity: Callable[[str], float] | None, *rankings: Ranking,
                         named: Iterable[str] = ()) -> list[tuple[str, float]]:
    """Members of the classes the semantic or keyword component ranks among its first ``class_scope_top``
    (a question about "the sorted list's add" finds the class by its words, not the generic method): the
    members those components found, in their order, then the class's other members by their cosine to the
    query (when semantic search is available), at most ``candidate_pool`` of them. A class ``named`` in the
    query is left to the scope component (its members are counted there once)."""
    if rc.class_scope_top <= 0:
        return []
    skip = set(named)
    classes: dict[str, None] = {}
    for ranking in rankings:
        for sid, _ in ranking[: rc.class_scope_top]:
            card = cards.get(sid)
            if card is not None and card.kind == "class" and sid not in skip:
                classes.setdefault(sid)
    if not classes:
        return []
    best: dict[str, tuple[float, float]] = {}
    for ranking in rankings:
        for rank, (sid, _) in enumerate(ranking, 1):
            if sid.rsplit(".", 1)[0] in classes:
                found = best.get(sid, (0.0, 0.0))
                best[sid] = (max(found[0], 1.0 / rank), found[1])
    if similarity is not None:
        for cls in classes:
            for sid in tables.members.get(cls, ()):
                best[sid] = (best.get(sid, (0.0, 0.0))[0], float(similarity(sid)))
    ordered = sorted(best.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))[: rc.candidate_pool]
    return [(sid, found or sim) for sid, (found, sim) in ordered]


def feedback_terms(first: Sequence[Any], cards: Mapping[str, SymbolCard], tables: IndexTables, words: FeedbackWords,
                   query: str, asked: frozenset[str], rc: RetrievalConfig) -> list[str]:
    """The keyword feedback's words: the first ``feedback_hits`` symbols of ``first`` (a first fusion of the direct
    components; kind and area weighted, modules left out) lend the words of their ids and signatures that the query
    does not hold, by IDF over the repository's cards, weighted 1 / rank; the ``feedback_terms`` best."""
    weighted = sorted(((f.score * tables.weight_of(f.symbol, asked, rc), f.symbol) for f in first
                       if f.symbol in cards and cards[f.symbol].kind != "module"),
                      key=lambda sf: (-sf[0], sf[1]))
    feedback = [sid for _, sid in weighted[: rc.feedback_hits]]
    if not feedback:
        return []
    stop = set(rc.keyword_stopwords)
    asked_words = {stem(w) for w in query_terms(query)}
    gain: dict[str, float] = {}
    for rank, sid in enumerate(feedback, 1):
        for w in words.words.get(sid, ()):
            if w in stop or len(w) < 3 or w.isdigit() or stem(w) in asked_words:
                continue
            gain[w] = gain.get(w, 0.0) + math.log(words.cards / words.df.get(w, 1)) / rank
    return [w for w, _ in sorted(gain.items(), key=lambda kv: (-kv[1], kv[0]))[: rc.feedback_terms]]
