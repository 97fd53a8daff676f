"""Hybrid code retrieval: semantic (FAISS) + keyword (FTS5) + exact identifiers + the code graph.

``Retriever.retrieve(query)`` returns a ``RetrievalSet``: the fused ranking of the symbols of one indexed
repository, each hit with its component scores and a ``why`` in words. It is a short pipeline:

1. the components rank the symbols (``components.COMPONENTS``: semantic, keyword, name, scope, class scope,
   phrase, capsule and the keyword feedback; tests, shims, generated and vendored code go last in the semantic and
   keyword rankings unless the question asks for them, ``areas``);
2. the fusion stages (``stages``) fuse those rankings and move the fused entries: kind and area weights, graph
   support, closeness in the code graph to what the turn pins, mentions or has active (personalized PageRank),
   graph neighbours of the strongest hits, the pin, mention and activation boosts, the keyword feedback;
3. the explainer (``explain``) turns the best ``k`` into hits: their why, provenance, excerpt for the query and,
   for the hits nothing ties to the query (no name, weak similarity, keyword hits only on chat words like
   "thanks"), why they are below the relevance floor (they stay in the set; the planner leaves their cards out).

Beside the hits, the set offers the capsules of code the query is about (``RetrievalSet.capsules``, at most
``[capsules] max_hits``), each with its score and why; a stale one says so.

What the retriever derives from an index version (names, modules, members, kinds, areas, the feedback's words, the
graph walk) is built once per version into frozen records (``tables``). Pins and activation are named like pin
targets (``card:pkg.mod.f``, ``path:pkg/mod.py``; other targets such as ``group:12`` are not code and are
ignored); mentions are the strings ``retrieval.mentions.mentions`` finds in the query, resolved to symbol ids.
"""
from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ctxbench.records.code import SymbolCard
from ctxbench.config import CapsuleConfig, EmbeddingConfig, IndexConfig, RetrievalConfig
from ctxbench.retrieval.capsules import CapsuleSearch
from ctxbench.retrieval.areas import asks_for
from ctxbench.retrieval import stages
from ctxbench.retrieval.explain import HitNotes, below_floor, explain
from ctxbench.retrieval.fuse import Fused, fuse
from ctxbench.retrieval.stages import FEEDBACK_HEAD_MARGIN, Boosts  # noqa: F401
from ctxbench.retrieval.keyword import (keyword_search, keyword_search_terms, query_terms, symbols_matching,
                                       sync_keyword_index)
from ctxbench.retrieval.components import (BY_NAME, COMPONENTS, FEEDBACK, SOURCES, Question, SemanticAnswer,
                                          class_member_ranking, feedback_terms, name_ranking, rank_components,
                                          scope_ranking, weights)
from ctxbench.retrieval.query_vector import encode_query, query_key
from ctxbench.retrieval.index_view import IndexView
from ctxbench.retrieval.tables import NESTED, IndexTables, Recent, VersionedTables  # noqa: F401
from ctxbench.records.retrieval import RetrievalSet

NOTE_LOADING = "semantic search not available: model loading"
NOTE_EMBEDDING = "semantic search not available: embedding cards"
NOTE_NO_EMBEDDER = "semantic search not available: no embedding model"
NOTE_OFF = "semantic search off ({reason})"  # the user turned it off (``--no-semantic``): not a failure
NOTE_FAILED = "semantic search not available: {error}"
NOTE_NOT_INDEXED = "repository not indexed"

PERSONALIZED_CACHE_SIZE = 16  # personalized PageRank results kept per retriever (activation changes per turn)
QUERY_VECTOR_CACHE_SIZE = 32  # query vectors kept per retriever: clustering a query reuses retrieval's encoding


class Retriever:
    """Answers retrieval queries over one indexed repository; caches what it loads."""

    def __init__(self, conn: sqlite3.Connection, root: str | Path | None, retrieval: RetrievalConfig | None = None,
                 embedder: Any = None, *, index: IndexView | None = None,
                 load_view: Callable[[], IndexView | None] | None = None, index_config: IndexConfig | None = None,
                 embedding: EmbeddingConfig | None = None, capsules: CapsuleConfig | None = None):
        """Over ``index`` (or what ``load_view`` loads when first asked; None: not indexed), reading only its own
        sections of the config (``service.index_views.retriever_for`` makes one from the whole Config)."""
        self.conn = conn
        self.root = Path(root).resolve() if root is not None else None
        self.retrieval = retrieval or RetrievalConfig()
        self.index_config = index_config or IndexConfig()
        self.embedding_config = embedding or EmbeddingConfig()
        self.capsule_config = capsules or CapsuleConfig()
        self.embedder = embedder
        self.semantic_off = ""  # why the user turned semantic search off (``--no-semantic``); "" when they did not
        self._index, self._load_view = index, load_view
        self._tables = VersionedTables()  # what is derived from the index, one frozen record per version
        self._keyword_lock = threading.Lock()  # held while the keyword index is brought up to date
        self._keyword_version: str | None = None
        self._vector_lock = threading.Lock()  # held while cards are embedded and the FAISS index is built
        self._vectors: tuple[str, Any] | None = None  # (index version, its FAISS index)
        self._personalized = Recent(PERSONALIZED_CACHE_SIZE)  # (version, personalization) -> closeness
        self._query_vectors = Recent(QUERY_VECTOR_CACHE_SIZE)  # (embedder key, query) -> vector
        self._capsules = CapsuleSearch(conn, self.capsule_config, self.retrieval)
        self.last_embed_stats: Any = None

    def variant(self, **changes: Any) -> "Retriever":
        """This retriever with some of its keyword arguments changed (a bench's variant, a test's settings)."""
        made = {"retrieval": self.retrieval, "index": self.index, "index_config": self.index_config,
                "embedding": self.embedding_config, "capsules": self.capsule_config, **changes}
        return Retriever(self.conn, self.root, made.pop("retrieval"), self.embedder, **made)

    # -- index ------------------------------------------------------------------------------------
    @property
    def index(self) -> IndexView | None:
        if self._index is None and self._load_view is not None:
            self._index = self._load_view()
        return self._index

    def prepare(self, progress: Callable[[int, int], None] | None = None, *, wait_for_model: bool = False,
                walk: bool = True) -> None:
        """Bring the keyword index, the graph walk of personalized retrieval and the keyword feedback's word table
        (unless ``walk`` is False: a one-shot command builds them only when asked) and (when the model is ready or
        ``wait_for_model``) the vector index up to date."""
        view = self.index
        if view is None:
            return
        self._sync_keyword(view)
        if walk:
            self._tables.walk(view, self.index_config)  # personalized retrieval's, not on the first turn with a pin
            if self.retrieval.prf_keyword_weight > 0:
                self._tables.feedback_words(view)  # the keyword feedback's, here rather than on the first turn
        if self.embedder is not None:
            if wait_for_model:
                if not self.embedder.ready and self.retrieval.query_excerpts:
                    # while the model loads: the secret scanner that masks the files of excerpts (its rules load on
                    # first use, ~0.1 s that a one-shot ``retrieve`` otherwise spends after the model is ready)
                    from ctxbench.redaction import redact

                    redact("warm = 1")
                self.embedder.wait()
            if self.embedder.ready:
                self._vector_index(view, progress)
        if view.capsules:  # their keyword rows and vectors, so the first plan that offers one does not wait
            self._capsules.prepare(view.repo_key, view.version, view.capsules, self.embedder)

    @property
    def semantic_ready(self) -> bool:
        """True once the embedder is loaded and the vector index of the current cards is built."""
        view = self._index
        embedder = self.embedder
        vectors = self._vectors
        return bool(embedder is not None and embedder.ready and view is not None and vectors is not None
                    and vectors[0] == view.version)

    def tables(self, view: IndexView) -> IndexTables:
        """The name, module, member, kind and area tables of ``view``'s version (built on first use)."""
        return self._tables.tables(view)

    def _sync_keyword(self, view: IndexView) -> None:
        with self._keyword_lock:
            if self._keyword_version != view.version:
                lines = self.retrieval.keyword_body_lines
                body = None
                if lines > 0:
                    def body(card: SymbolCard) -> str:
                        return self._body_text(view, card, lines)
                sync_keyword_index(self.conn, view.repo_key, list(view.cards.values()), body,
                                   f"-b{lines}" if lines > 0 else "")
                self._keyword_version = view.version

    def _body_text(self, view: IndexView, card: SymbolCard, limit: int) -> str:
        """Up to ``limit`` lines of a function's or method's body from its file (masked), for the keyword
        index; "" for other kinds (their card's excerpt is used) or an unreadable file."""
        if card.kind not in ("function", "method"):
            return ""
        source = self._source_lines(view)
        lines = source.lines(card.path)
        if lines is None or card.end_line > len(lines):
            return ""
        return "\n".join(lines[card.line - 1: min(card.end_line, card.line - 1 + limit)])

    def _source_lines(self, view: IndexView) -> Any:
        """The masked lines of the repository's files (an ``excerpts.SourceLines``, made once)."""
        from ctxbench.retrieval.excerpts import SourceLines

        return self._tables.get("source", view, lambda v: SourceLines(
            self.root or v.repo_key, self.index_config.secret_file_globs, self.retrieval.excerpt_files_cached))

    def _vector_index(self, view: IndexView, progress: Callable[[int, int], None] | None = None, *,
                      block: bool = True):
        """The FAISS index of the view's cards (embedding what is missing); None when ``block`` is False and
        another thread is building it right now."""
        from ctxbench.retrieval.vectors import load_or_build_index

        built = self._vectors
        if built is not None and built[0] == view.version:
            return built[1]
        if not self._vector_lock.acquire(blocking=block):
            return None
        try:
            if self._vectors is None or self._vectors[0] != view.version:
                vectors, self.last_embed_stats = load_or_build_index(
                    self.conn, view.repo_key, list(view.cards.values()), self.embedder, self.embedding_config,
                    progress)
                self._vectors = (view.version, vectors)
            return self._vectors[1]
        finally:
            self._vector_lock.release()

    def resolve_targets(self, targets: Iterable[Any]) -> list[str]:
        """Symbol ids of pin or activation targets (``card:<id>``, ``path:<file>``, a bare id, or a ``Pin``)."""
        view = self.index
        return [] if view is None else self.tables(view).resolve_targets(view.cards, targets)

    def resolve_mentions(self, mentioned: Iterable[str]) -> list[str]:
        """Symbol ids of what a turn mentions: exact ids, file paths (their modules), dotted tails, or bare
        names (every symbol so named, unless more than ``retrieval.mention_max_symbols`` are)."""
        view = self.index
        if view is None:
            return []
        return self.tables(view).resolve_mentions(view.cards, mentioned, self.retrieval.mention_max_symbols)

    def personalized_closeness(self, pins: Iterable[str] = (), mentioned: Iterable[str] = (),
                               activation: Mapping[str, float] | None = None) -> dict[str, float]:
        """Symbol -> closeness in (0, 1] to the given symbols in the code graph, by personalized PageRank
        (``GraphWalk.closeness``). The walk follows edges both ways and restarts only at the pinned, mentioned and
        active symbols (weights from the index config; a module spreads its weight over what it contains); the
        given symbols are left out (they have boosts of their own). Cached per index version and personalization.
        """
        from ctxbench.codegraph import graph as graphmod

        view = self.index
        if view is None:
            return {}
        icfg = self.index_config
        restart = graphmod.personalization(view.graph, pins=sorted(set(pins)), mentioned=sorted(set(mentioned)),
                                           activation=activation, config=icfg)
        if not restart:
            return {}
        key = (view.version, tuple(sorted(restart.items())))
        near = self._personalized.get(key)
        if near is None:
            given = set(pins) | set(mentioned) | set(activation or {})
            near = self._tables.walk(view, icfg).closeness(restart, given, icfg)
            self._personalized.put(key, near)
        return near

    # -- components -------------------------------------------------------------------------------
    def semantic_ranking(self, query: str, pool: int) -> tuple[list[tuple[str, float]], str]:
        """(symbol, cosine) best first, or an empty list and the note saying why semantic search was not used."""
        answer = self._semantic(query, pool)
        return list(answer.ranking), answer.note

    def _semantic(self, query: str, pool: int) -> SemanticAnswer:
        """The semantic component's answer: its ranking (or the note saying why there is none), the cosine of any
        symbol to the query and the query's vector."""
        view = self.index
        if view is None:
            return SemanticAnswer(note=NOTE_NOT_INDEXED)
        if self.embedder is None:
            return SemanticAnswer(note=NOTE_OFF.format(reason=self.semantic_off) if self.semantic_off
                                  else NOTE_NO_EMBEDDER)
        error = getattr(self.embedder, "error", None)
        if error is not None:
            return SemanticAnswer(note=NOTE_FAILED.format(error=error))
        if not self.embedder.ready:
            self.embedder.start_loading()
            return SemanticAnswer(note=NOTE_LOADING)
        vectors = self._vector_index(view, block=False)
        if vectors is None:  # another thread is embedding the cards: answer without waiting for it
            return SemanticAnswer(note=NOTE_EMBEDDING)
        query_vector = self._encode_query(query)
        return SemanticAnswer(True, vectors.search(query_vector, pool), "",
                              lambda sid: vectors.similarity(query_vector, sid), query_vector)

    def _encode_query(self, query: str) -> Any:
        """The embedding of ``query`` (kept for the last ``QUERY_VECTOR_CACHE_SIZE`` queries: retrieval and the
        query's cluster share one encoding)."""
        key = (query_key(self.embedder), query)
        found = self._query_vectors.get(key)
        if found is not None:
            return found
        vector = encode_query(self.embedder, query, self.embedding_config.query_max_seq_length)
        self._query_vectors.put(key, vector)
        return vector

    def forget_query_vectors(self) -> None:
        """Drop the kept query vectors: the next search of any text encodes it, as a new question does (the
        warm-latency benches call this before each timed query, so a repeated text is not free)."""
        self._query_vectors.clear()

    def query_vector(self, query: str) -> Any:
        """The query's embedding as semantic retrieval uses it (encoded once, then kept), or None while semantic
        search is not available (no model, still loading, failed, or turned off)."""
        embedder = self.embedder
        if embedder is None or getattr(embedder, "error", None) is not None or not embedder.ready:
            return None
        return self._encode_query(query)

    def keyword_ranking(self, query: str, pool: int) -> list[tuple[str, float]]:
        view = self.index
        if view is None:
            return []
        self._sync_keyword(view)
        return keyword_search(self.conn, view.repo_key, query, pool, self.retrieval)

    def name_ranking(self, query: str) -> list[tuple[str, float]]:
        """Symbols whose name (or dotted id suffix) is a code identifier written in the query."""
        view = self.index
        return [] if view is None else name_ranking(self.tables(view), query, self.retrieval.name_generic_max)

    def phrase_ranking(self, query: str, pool: int) -> list[tuple[str, float]]:
        """Symbols whose source lines hold text the query quotes, most of it first (``phrases``)."""
        from ctxbench.retrieval.phrases import PhraseIndexes, quoted_phrases

        view = self.index
        phrases = quoted_phrases(query)
        if view is None or not phrases:
            return []
        indexes = self._tables.get("phrases", view, lambda v: PhraseIndexes(self.root or v.repo_key,
                                                                             self.index_config.secret_file_globs))
        return indexes.get(view.version, view.cards).search(phrases, pool, self.retrieval.keyword_stopwords)

    def scope_ranking(self, named: Sequence[tuple[str, float]], *rankings: Sequence[tuple[str, float]]
                      ) -> list[tuple[str, float]]:
        """Members of the classes named in the query, in the order the other components ranked them."""
        view = self.index
        return [] if view is None else scope_ranking(view.cards, named, *rankings)

    def class_member_ranking(self, similarity: Any, *rankings: Sequence[tuple[str, float]],
                             named: Iterable[str] = ()) -> list[tuple[str, float]]:
        """``components.class_member_ranking`` over this retriever's index."""
        view = self.index
        if view is None:
            return []
        return class_member_ranking(view.cards, self.tables(view), self.retrieval, similarity, *rankings,
                                    named=named)

    def capsule_ranking(self, view: IndexView, query: str, query_vector: Any, *rankings: Sequence[tuple[str, float]]
                        ) -> list[tuple[str, float]]:
        """The symbols of the capsules ``query`` is most about (``rankings``: semantic, keyword, name)."""
        return self._capsules.member_ranking(view.repo_key, view.version, view.capsules, view.cards, query,
                                             query_vector, self.embedder, *rankings)

    def feedback_ranking(self, view: IndexView, query: str, rankings: Mapping[str, Sequence[tuple[str, float]]],
                         asked: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
        """Pseudo-relevance feedback for the keyword component: the words ``components.feedback_terms`` picks from
        a first fusion of the direct components (``rankings``) searched as a second keyword query (demoted areas
        last). Empty when the first fusion found nothing or no word is left."""
        rc = self.retrieval
        if rc.feedback_hits <= 0 or rc.feedback_terms <= 0:
            return []
        direct = weights(self.retrieval, self.capsule_config, (c for c in COMPONENTS if c.direct))
        first = fuse({c: r for c, r in rankings.items() if c in direct}, direct, method=rc.fusion, rrf_k=rc.rrf_k)
        tables = self.tables(view)
        terms = feedback_terms(first, view.cards, tables, self._tables.feedback_words(view), query, asked, rc)
        found = keyword_search_terms(self.conn, view.repo_key, terms, rc.candidate_pool, rc)
        return tables.areas_last(found, asked, rc) if rc.area_weights else found

    def boosts(self, pins: Iterable[Any] = (), activation: Mapping[str, float] | None = None,
               mentioned: Iterable[str] = ()) -> Boosts:
        """The pinned, mentioned and active symbols of a turn as the index's ids (an activation target that names
        several symbols gives each its score; a symbol named twice keeps the higher)."""
        active: dict[str, float] = {}
        for target, score in sorted((activation or {}).items()):
            for sid in self.resolve_targets((target,)):
                active[sid] = max(active.get(sid, 0.0), float(score))
        return Boosts(frozenset(self.resolve_targets(pins)), frozenset(self.resolve_mentions(mentioned)), active)

    # -- retrieval --------------------------------------------------------------------------------
    def retrieve(self, query: str, k: int | None = None, *, pins: Iterable[Any] = (),
                 activation: Mapping[str, float] | None = None, mentioned: Iterable[str] = (),
                 sources: Sequence[str] = SOURCES, scaffold: str | None = None) -> RetrievalSet:
        """The fused RetrievalSet for ``query``; ``scaffold`` replaces the view's default-budget scaffold."""
        rc = self.retrieval
        view = self.index
        if view is None:
            return RetrievalSet.create(query, (), notes=(NOTE_NOT_INDEXED,))
        semantic = self._semantic(query, rc.candidate_pool) if "semantic" in sources else SemanticAnswer()
        question = Question(query, view, self.tables(view), asks_for(query_terms(query)), semantic, self)
        rankings = rank_components(question, sources, self.retrieval, self.capsule_config)
        fused, notes = self._fuse(question, rankings, self.boosts(pins, activation, mentioned), sources)
        ranked = stages.ranked(fused, view.cards, rc.default_k if k is None else k)
        below = below_floor(query, ranked, fused, notes, semantic.available, self.semantic_off,
                            lambda terms, ids: symbols_matching(self.conn, view.repo_key, terms, ids), rc)
        hits = explain(query, view.cards, ranked, notes, below, self.retrieval, self.index_config,
                       self._source_lines(view))
        capsules = view.capsules if "capsule" in sources else ()
        offered = self._capsules.hits(view.repo_key, view.version, capsules, view.cards, query, semantic.vector,
                                      self.embedder, [(f.symbol, f.score) for f in ranked if f.symbol not in below]
                                      ) if capsules else ()
        return RetrievalSet.create(query, hits, view.version, semantic_available=semantic.available,
                                   notes=(semantic.note,) if semantic.note else (),
                                   scaffold=view.scaffold_text() if scaffold is None else scaffold, capsules=offered)

    def _fuse(self, q: Question, rankings: Mapping[str, Sequence[tuple[str, float]]], boosts: Boosts,
              sources: Sequence[str]) -> tuple[Mapping[str, Fused], HitNotes]:
        """The fusion stages in order (``stages``), as ``sources`` and the weights turn them on: the fused entries
        and what the stages noted of them."""
        rc, view, tables = self.retrieval, q.view, q.tables
        fused = stages.fuse_components({name: r for name, r in rankings.items() if BY_NAME[name].fused},
                                       weights(rc, self.capsule_config, (c for c in COMPONENTS if c.fused)), rc)
        fused = stages.weigh_kinds(fused, tables, q.asked, rc)
        support: Mapping[str, str] = {}
        if fused and rc.graph_support_weight > 0 and (rc.graph_support_heavy if "graph" in sources
                                                      else rc.graph_support_light):
            fused, support = stages.graph_support(fused, view.graph, rc)
        if fused and rc.personalized_weight > 0 and boosts.personalizes(rc):
            near = self.personalized_closeness(boosts.pins, boosts.mentioned, boosts.active)
            fused = stages.personalize(fused, near, rc)
        graph: Mapping[str, tuple[str, str]] = {}
        if "graph" in sources and fused and rc.graph_weight > 0:
            fused, graph = stages.expand_graph(fused, view.graph, view.cards, tables, q.asked, q.semantic.similarity, rc)
        fused = stages.add_boosts(fused, boosts, rc)
        feedback = rankings.get(FEEDBACK)
        if feedback:  # added last, below the first feedback_head hits, which keep their places
            fused = stages.add_feedback(fused, feedback, view.cards, tables, q.asked, rc)
        return fused, HitNotes(support, graph, boosts.label())
