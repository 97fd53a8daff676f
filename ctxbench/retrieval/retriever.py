"""Hybrid code retrieval: semantic (FAISS) + keyword (FTS5) + exact identifiers + the code graph.

``Retriever.retrieve(query)`` returns a ``RetrievalSet``: the fused ranking of the symbols of one
indexed repository, each hit with its component scores and a ``why`` in words. Components:

- semantic: cosine similarity of the query to each card's embedded text (FAISS), only when the
  embedder is loaded; until then the set says semantic search was not available;
- keyword: BM25 over identifier-aware tokens (``keyword``);
- name: symbols whose name is a code identifier written in the query (``push_screen``, ``Region``);
- class scope: the methods of the classes the semantic or keyword component ranks first (the class is the
  clue to a generically named method), in the order found, then by cosine to the query;
- phrase: symbols whose source lines hold text the query quotes (an error message: ``phrases``);
- keyword feedback: the words of the first hits' ids and signatures that the query lacks (the most distinctive
  ones, by IDF) searched again; its share reorders the keyword, name, scope and phrase hits below the first
  ``feedback_head`` hits, which keep their places (``feedback_ranking``);
- personalized: closeness in the code graph (personalized PageRank) to the symbols the session pins
  or recently used (activation), together with what the query mentions (names and paths; alone they
  do not personalize, see ``RetrievalConfig.personalize_mentions_alone``), before graph expansion so
  that it also picks the seeds expanded;
- graph: neighbours (callers, callees, members, bases) of the strongest fused hits;
- pins, activation and mentioned symbols: small boosts on top;
- areas: tests, platform shims, generated and vendored code go after the other symbols in the semantic and
  keyword rankings and weigh less once fused, unless the question asks for them (``areas``);
- capsule: the symbols in the files of the capsules the query is most about (``retrieval.capsules``),
  only when ``[capsules] retrieval_weight`` is above 0 (it is 0 by default).

Beside the hits, the set offers the capsules of code the query is about (``RetrievalSet.capsules``,
at most ``[capsules] max_hits``), each with its score and why; a stale one says so.

Pins and activation are named like pin targets (``card:pkg.mod.f``, ``path:pkg/mod.py``; other
targets such as ``group:12`` are not code and are ignored); mentions are the strings
``retrieval.mentions.mentions`` finds in the query, resolved here to the index's symbol ids.

A relevance floor marks the hits nothing ties to the query (no name, weak similarity, keyword hits
only on chat words like "thanks" or "all"): they stay in the set, with ``below_threshold`` saying
why, and the planner leaves their cards out (reason ``below_threshold``).
"""
from __future__ import annotations

import dataclasses
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ctxbench.records.code import SymbolCard
from ctxbench.config import Config
from ctxbench.retrieval.capsules import CapsuleSearch
from ctxbench.retrieval.areas import asks_for
from ctxbench.retrieval import stages
from ctxbench.retrieval.fuse import Fused, fuse, rrf_unit
from ctxbench.retrieval.stages import FEEDBACK_HEAD_MARGIN, Boosts  # noqa: F401
from ctxbench.retrieval.keyword import (keyword_search, keyword_search_terms, query_terms, symbols_matching,
                                       sync_keyword_index)
from ctxbench.retrieval.components import (BY_NAME, COMPONENTS, EVIDENCE, FEEDBACK, FEEDBACK_TAKERS, SOURCES,
                                          Question, SemanticAnswer, class_member_ranking, feedback_terms, name_ranking,
                                          rank_components, scope_ranking, short_name, weights)
from ctxbench.retrieval.mentions import SOURCE_SUFFIXES
from ctxbench.retrieval.query_vector import encode_query, query_key
from ctxbench.retrieval.index_view import IndexView, load_index_view, view_of  # noqa: F401 (the public names)
from ctxbench.retrieval.tables import NESTED, IndexTables, Recent, VersionedTables  # noqa: F401
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet

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

    def __init__(self, conn: sqlite3.Connection, root: str | Path | None, config: Config | None = None,
                 embedder: Any = None, *, index: IndexView | None = None):
        self.conn = conn
        self.root = Path(root).resolve() if root is not None else None
        self.config = config or Config()
        self.embedder = embedder
        self.semantic_off = ""  # why the user turned semantic search off (``--no-semantic``); "" when they did not
        self._index = index
        self._tables = VersionedTables()  # what is derived from the index, one frozen record per version
        self._keyword_lock = threading.Lock()  # held while the keyword index is brought up to date
        self._keyword_version: str | None = None
        self._vector_lock = threading.Lock()  # held while cards are embedded and the FAISS index is built
        self._vectors: tuple[str, Any] | None = None  # (index version, its FAISS index)
        self._personalized = Recent(PERSONALIZED_CACHE_SIZE)  # (version, personalization) -> closeness
        self._query_vectors = Recent(QUERY_VECTOR_CACHE_SIZE)  # (embedder key, query) -> vector
        self._capsules = CapsuleSearch(conn, self.config)
        self.last_embed_stats: Any = None

    # -- index ------------------------------------------------------------------------------------
    @property
    def index(self) -> IndexView | None:
        if self._index is None and self.root is not None:
            self._index = load_index_view(self.root, self.conn, self.config)
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
            self._tables.walk(view, self.config.index)  # personalized retrieval's, not on the first turn with a pin
            if self.config.retrieval.prf_keyword_weight > 0:
                self._tables.feedback_words(view)  # the keyword feedback's, here rather than on the first turn
        if self.embedder is not None:
            if wait_for_model:
                if not self.embedder.ready and self.config.retrieval.query_excerpts:
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
                lines = self.config.retrieval.keyword_body_lines
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
            self.root or v.repo_key, self.config.index.secret_file_globs, self.config.retrieval.excerpt_files_cached))

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
                    self.conn, view.repo_key, list(view.cards.values()), self.embedder, self.config.embedding,
                    progress)
                self._vectors = (view.version, vectors)
            return self._vectors[1]
        finally:
            self._vector_lock.release()

    def resolve_targets(self, targets: Iterable[Any]) -> list[str]:
        """Symbol ids of pin or activation targets (``card:<id>``, ``path:<file>``, a bare id, or a ``Pin``)."""
        view = self.index
        if view is None:
            return []
        out: dict[str, None] = {}
        for target in targets:
            text = target if isinstance(target, str) else getattr(target, "target", "")
            kind, sep, name = text.partition(":")
            if not sep:
                kind, name = "card", text
            if kind == "card" and name in view.cards:
                out[name] = None
            elif kind == "path":
                out.update(dict.fromkeys(self.tables(view).path_symbols(name)))
        return list(out)

    def resolve_mentions(self, mentioned: Iterable[str]) -> list[str]:
        """Symbol ids of what a turn mentions: exact ids, file paths (their modules), dotted tails, or bare
        names (every symbol so named, unless more than ``retrieval.mention_max_symbols`` are)."""
        view = self.index
        if view is None:
            return []
        limit = self.config.retrieval.mention_max_symbols
        tables = self.tables(view)
        names = tables.names
        out: dict[str, None] = {}
        for raw in mentioned:
            name = raw.strip().strip("`").removeprefix("card:").rstrip("()")
            if name in view.cards:
                out[name] = None
                continue
            if name.startswith("path:") or "/" in name or name.endswith(SOURCE_SUFFIXES):
                out.update(dict.fromkeys(tables.path_symbols(name.removeprefix("path:"))))
                continue
            parts = name.split(".")
            matches = [sid for sid in names.get(parts[-1], ()) if len(parts) == 1 or sid.endswith("." + name)]
            if 0 < len(matches) <= limit:
                out.update(dict.fromkeys(sorted(matches)))
        return list(out)

    def personalized_closeness(self, pins: Iterable[str] = (), mentioned: Iterable[str] = (),
                               activation: Mapping[str, float] | None = None) -> dict[str, float]:
        """Symbol -> closeness in (0, 1] to the given symbols in the code graph, by personalized PageRank.

        The walk follows edges both ways and restarts only at the pinned, mentioned and active symbols
        (weights from the index config; a module spreads its weight over what it contains). A symbol's
        closeness is its personalized PageRank over its plain PageRank (so hubs every walk reaches do not
        win), relative to the best symbol the walk does not restart at, capped at 1. The given symbols are
        left out (they have boosts of their own). Cached per index version and personalization.
        """
        from ctxbench.codegraph import graph as graphmod

        view = self.index
        if view is None:
            return {}
        icfg = self.config.index
        given = set(pins) | set(mentioned) | set(activation or {})
        weights = graphmod.personalization(view.graph, pins=sorted(set(pins)), mentioned=sorted(set(mentioned)),
                                           activation=activation, config=icfg)
        if not weights:
            return {}
        key = (view.version, tuple(sorted(weights.items())))
        cached = self._personalized.get(key)
        if cached is not None:
            return cached
        walk = self._tables.walk(view, icfg)
        plain = walk.plain
        scores = graphmod.pagerank(walk.graph, weights, dataclasses.replace(icfg, personalize_base_weight=0.0))
        lift = {sid: v / plain[sid] for sid, v in scores.items()
                if v > 0 and plain.get(sid, 0.0) > 0 and sid not in weights and sid not in given}
        top = max(lift.values(), default=0.0)
        near = {sid: min(1.0, v / top) for sid, v in lift.items()} if top > 0 else {}
        for sid in weights:  # what a pinned or mentioned file contains: as close as can be
            if sid not in given:
                near[sid] = 1.0
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
        vector = encode_query(self.embedder, query, self.config.embedding.query_max_seq_length)
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
        return keyword_search(self.conn, view.repo_key, query, pool, self.config.retrieval)

    def name_ranking(self, query: str) -> list[tuple[str, float]]:
        """Symbols whose name (or dotted id suffix) is a code identifier written in the query."""
        view = self.index
        return [] if view is None else name_ranking(self.tables(view), query)

    def phrase_ranking(self, query: str, pool: int) -> list[tuple[str, float]]:
        """Symbols whose source lines hold text the query quotes, most of it first (``phrases``)."""
        from ctxbench.retrieval.phrases import PhraseIndexes, quoted_phrases

        view = self.index
        phrases = quoted_phrases(query)
        if view is None or not phrases:
            return []
        indexes = self._tables.get("phrases", view, lambda v: PhraseIndexes(self.root or v.repo_key,
                                                                             self.config.index.secret_file_globs))
        return indexes.get(view.version, view.cards).search(phrases, pool, self.config.retrieval.keyword_stopwords)

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
        return class_member_ranking(view.cards, self.tables(view), self.config.retrieval, similarity, *rankings,
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
        rc = self.config.retrieval
        if rc.feedback_hits <= 0 or rc.feedback_terms <= 0:
            return []
        direct = weights(self.config, (c for c in COMPONENTS if c.direct))
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
        rc = self.config.retrieval
        k = rc.default_k if k is None else k
        view = self.index
        if view is None:
            return RetrievalSet.create(query, (), notes=(NOTE_NOT_INDEXED,))
        semantic = self._semantic(query, rc.candidate_pool) if "semantic" in sources else SemanticAnswer()
        notes = [semantic.note] if semantic.note else []
        semantic_available = semantic.available
        similarity, query_vector = semantic.similarity, semantic.vector
        asked = asks_for(query_terms(query))
        question = Question(query, view, self.tables(view), asked, semantic, self)
        found_by = rank_components(question, sources, self.config)
        rankings = {name: ranking for name, ranking in found_by.items() if BY_NAME[name].fused}
        feedback = found_by.get(FEEDBACK, [])
        capsules = view.capsules if "capsule" in sources else ()
        tables = question.tables
        fused = stages.fuse_components(rankings, weights(self.config, (c for c in COMPONENTS if c.fused)), rc)
        fused = stages.weigh_kinds(fused, tables, asked, rc)
        support_notes: dict[str, str] = {}
        if fused and rc.graph_support_weight > 0 and (rc.graph_support_heavy if "graph" in sources
                                                      else rc.graph_support_light):
            fused, support_notes = stages.graph_support(fused, view.graph, rc)
        boosts = self.boosts(pins, activation, mentioned)
        if fused and rc.personalized_weight > 0 and boosts.personalizes(rc):
            near = self.personalized_closeness(boosts.pins, boosts.mentioned, boosts.active)
            fused = stages.personalize(fused, near, rc)
        graph_notes: dict[str, tuple[str, str]] = {}  # symbol -> (why in words, the seed it neighbours)
        if "graph" in sources and fused and rc.graph_weight > 0:
            fused, graph_notes = stages.expand_graph(fused, view.graph, view.cards, tables, asked, similarity, rc)
        fused = stages.add_boosts(fused, boosts, rc)
        if feedback:  # added last, below the first feedback_head hits, which keep their places
            fused = stages.add_feedback(fused, feedback, view.cards, tables, asked, rc)
        ranked = stages.ranked(fused, view.cards, k)
        near_label = boosts.label()
        floor = self._relevance_floor(view, query, ranked, fused, graph_notes, semantic_available)
        words = self._excerpt_words(query)
        top_width = (rc.excerpt_top_lines, rc.excerpt_top_hits) if rc.excerpt_top_lines > 0 else (0, 0)
        hits = tuple(self._hit(view, f, graph_notes.get(f.symbol, ("", "")), floor.get(f.symbol, ""), near_label,
                               words, top_width[0] if rank < top_width[1] else 0, support_notes.get(f.symbol, ""))
                     for rank, f in enumerate(ranked))
        offered = ()
        if capsules:
            support = [(f.symbol, f.score) for f in ranked if f.symbol not in floor]
            offered = self._capsules.hits(view.repo_key, view.version, capsules, view.cards, query, query_vector,
                                          self.embedder, support)
        return RetrievalSet.create(query, hits, view.version, semantic_available=semantic_available,
                                   notes=tuple(notes), scaffold=view.scaffold_text() if scaffold is None else scaffold,
                                   capsules=offered)

    def _relevance_floor(self, view: IndexView, query: str, ranked: Sequence[Fused], fused: Mapping[str, Fused],
                         graph_notes: Mapping[str, tuple[str, str]], semantic_available: bool) -> dict[str, str]:
        """Symbol -> why it is below the relevance floor, for the ranked hits that are (see RetrievalConfig).

        Evidence that a hit is about the query: named in it (or a member of a class named there), pinned or
        mentioned, a semantic similarity of at least ``min_semantic_similarity``, or a keyword hit on a word
        that is neither a stop word nor a chat word. A graph neighbour has the evidence of the hit it
        neighbours.
        """
        rc = self.config.retrieval
        minimum = rc.min_semantic_similarity
        keyword_ids = sorted(sid for sid, f in fused.items() if "keyword" in f.scores)
        stop = tuple(rc.keyword_stopwords)
        content_terms = query_terms(query, stop + tuple(rc.chat_words))
        if keyword_ids and len(content_terms) < len(query_terms(query, stop)):
            # some words of the query are chat words: which keyword hits match one of the others?
            keyword_evidence = symbols_matching(self.conn, view.repo_key, content_terms, keyword_ids)
        else:
            keyword_evidence = set(keyword_ids)

        def direct(entry: Fused) -> bool:
            if any(c in entry.scores for c in (*EVIDENCE, "pin", "mentioned")):
                return True
            if entry.scores.get("semantic", float("-inf")) >= minimum:
                return True
            return entry.symbol in keyword_evidence

        def missing(entry: Fused) -> str:
            if not semantic_available:
                semantic = "semantic search off" if self.semantic_off else "semantic search not available"
            elif "semantic" in entry.scores:
                semantic = f"semantic {entry.scores['semantic']:.2f} < {minimum:.2f}"
            else:
                semantic = f"semantic < {minimum:.2f}"
            keyword = "keyword hits only on chat words" if "keyword" in entry.scores else "no keyword hit"
            return f"{semantic}, {keyword}, not named in the query"

        out: dict[str, str] = {}
        for entry in ranked:
            if direct(entry):
                continue
            seed = graph_notes.get(entry.symbol, ("", ""))[1]
            seed_entry = fused.get(seed) if seed else None
            if seed_entry is not None:
                if direct(seed_entry):
                    continue
                out[entry.symbol] = f"below the relevance floor: neighbour of {short_name(seed)}, itself below it"
            else:
                out[entry.symbol] = f"below the relevance floor: {missing(entry)}"
        return out

    def _score_words(self, score: float) -> str:
        """The hit's fused score and its scale, first in its why: the number the overlay's score column shows."""
        rc = self.config.retrieval
        if rc.fusion == "rrf":
            return f"score {score:.3f} (RRF: a first place in one source = {rrf_unit(rc.rrf_k):.3f})"
        return f"score {score:.3f} (sum of per-source scores, each at most its weight)"

    def _excerpt_words(self, query: str) -> Any:
        """The query's words for choosing excerpts, as the ``excerpts.WordMatcher`` every hit of the query shares
        (None when excerpts are the stored heads)."""
        rc = self.config.retrieval
        if not rc.query_excerpts:
            return None
        from ctxbench.retrieval.excerpts import WordMatcher, query_words

        return WordMatcher(query_words(query_terms(query, tuple(rc.keyword_stopwords) + tuple(rc.chat_words))))

    def _excerpt(self, view: IndexView, card: SymbolCard, words: Any, width: int = 0) -> Any:
        if words is None:
            return None
        from ctxbench.retrieval.excerpts import query_excerpt

        icfg = self.config.index
        width = width or self.config.retrieval.excerpt_lines or icfg.excerpt_lines
        rc = self.config.retrieval
        return query_excerpt(card, self._source_lines(view), words.words, width, rc.excerpt_context_lines,
                             icfg.card_line_max_chars, words, slack=rc.excerpt_whole_slack,
                             statement_lines=rc.excerpt_statement_lines, blank=rc.excerpt_blank_lines,
                             occurrence=rc.excerpt_occurrence_share)

    def _hit(self, view: IndexView, f: Fused, graph_note: tuple[str, str], below_threshold: str = "",
             near_label: str = "", words: Any = None, width: int = 0,
             support_note: str = "") -> RetrievalHit:
        card = view.cards[f.symbol]
        chosen = self._excerpt(view, card, words, width)
        components: list[tuple[str, float]] = []
        why: list[str] = []
        for c in COMPONENTS:
            if c.name in f.scores:
                score, rank = f.scores[c.name], f.ranks.get(c.name, 0)
                components.extend(c.shown(score, rank))
                why.append(c.why(score, rank, f.symbol))
        if "feedback_head" in f.scores:
            components.append(("feedback_head", round(f.scores["feedback_head"], 6)))
            why.append(f"kept among the first {self.config.retrieval.feedback_head} "
                       f"(+{f.scores['feedback_head']:.3f} over the hits the feedback lifted)")
        if "personalized" in f.scores:
            components.append(("personalized", round(f.scores["personalized"], 4)))
            why.append(f"{near_label} {f.scores['personalized']:.2f}")
        if "support" in f.scores:
            components.append(("support", round(f.scores["support"], 4)))
            why.append(f"supported: {support_note}")
        if "graph" in f.scores:
            components.append(("graph", round(f.scores["graph"], 6)))
            why.append(graph_note[0])
        for key, words in (("pin", "pinned"), ("mentioned", "mentioned"), ("activation", "recently active")):
            if key in f.scores:
                components.append((key, round(f.scores[key], 4)))
                why.append(words)
        direct = [c.name for c in COMPONENTS if c.provenance and c.name in f.scores]
        if direct:
            best = max(direct, key=lambda c: (f.ranks.get(c, 10**9) * -1, c))
            provenance = BY_NAME[best].provenance
        elif "graph" in f.scores:
            provenance = "graph"
        elif "pin" in f.scores:
            provenance = "pin"
        else:
            provenance = "activation"
        return RetrievalHit(
            symbol=f.symbol,
            path=card.path,
            line=card.line,
            score=round(f.score, 8),
            components=tuple(components),
            why=" · ".join([self._score_words(f.score), *why]),
            provenance=provenance,
            card_text=card.render(with_excerpt=False),
            excerpt=chosen.text if chosen is not None else card.excerpt,
            excerpt_lines=((chosen.first, chosen.last) if chosen is not None
                           else (card.line, card.line + card.excerpt.count("\n")) if card.excerpt else (0, 0)),
            card_head=card.head() if chosen is not None else "",
            card_hash=card.card_hash,
            neighbour_of=graph_note[1] if provenance == "graph" else "",
            below_threshold=below_threshold,
        )
