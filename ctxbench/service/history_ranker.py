"""How earlier messages and turns rank against a query: the history's keyword index, its vectors, the warm-up.

A :class:`HistoryRanker` is the part of planning that remembers between plans: per session the keyword index of
its messages (BM25 over the planned history's own statistics, ``retrieval.history_keywords``), the vectors of
single messages (the fused strategy) and of whole turns (the semantic strategy, ``retrieval.history_vectors``),
and how many texts the session's last plan found without a vector (``pending``), which the warm-up embeds.
"""
from __future__ import annotations

import dataclasses
import threading
from contextlib import AbstractContextManager
from typing import Any, Callable, Protocol, Sequence

from ctxbench.config import BM25_B, BM25_K1, CACHED_SESSIONS, Config
from ctxbench.records.derived import deriving_for
from ctxbench.records.messages import Message
from ctxbench.records.plans import PlanInputs
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.vocab import EMBEDDING_STRATEGIES
from ctxbench.service.history_cache import HistoryCache
from ctxbench.store import sessions as session_store
from ctxbench.store.vectors import VectorCache


class HistoryEmbedder(Protocol):
    """What the semantic history strategy needs of an embedder (``retrieval.embedder.Embedder``)."""

    key: str
    ready: bool
    error: Any

    def encode(self, texts: list[str], **kwargs: Any) -> Any: ...


class HistorySource(Protocol):
    """What the ranker reads of the workbench (``service.workbench.Workbench``)."""

    config: Config
    vectors: VectorCache
    history_cache: HistoryCache
    embedder: HistoryEmbedder | None

    def connection(self) -> AbstractContextManager[Any]: ...

    def settings(self, session_id: str) -> SessionSettings: ...


class HistoryRanker:
    """The keyword scores and similarities of a session's history, kept between plans, and its warm-up."""

    def __init__(self, source: HistorySource) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._message_vectors: Any = None
        self._turn_vectors: Any = None
        # session -> texts its last plan found without a vector (none: its last plan embedded nothing)
        self._pending: dict[str, int] = {}
        self._keywords: dict[str, Any] = {}  # session id -> its HistoryKeywords, most recent last

    @property
    def config(self) -> Config:
        return self.source.config  # read at each use: a workbench's config may be replaced between plans

    # -- what is kept per session ----------------------------------------------------------------------------
    def forget(self, session_id: str) -> None:
        """Drop what is held for ``session_id``: what its last plan left to embed and its keyword index."""
        self._pending.pop(session_id, None)
        with self._lock:
            self._keywords.pop(session_id, None)

    def settled(self, session_id: str) -> None:
        """The session's strategy embeds nothing now: nothing is left to warm for it."""
        self._pending.pop(session_id, None)

    def clear(self) -> None:
        self._pending.clear()

    def pending(self, session_id: str) -> int:
        """Texts the session's last plan compared by meaning had no vector for (left for :meth:`warm`): a history
        that grew past what a plan embeds itself, or whose texts all changed (a transcript of speakers that no
        longer reads as one)."""
        return self._pending.get(session_id, 0)

    def embedder(self) -> HistoryEmbedder | None:
        """The embedder the semantic history strategy ranks with, when it is ready; None while it loads, after it
        failed to load, or when there is none."""
        embedder = self.source.embedder
        if embedder is not None and embedder.ready and embedder.error is None:
            return embedder
        return None

    # -- the indexes -----------------------------------------------------------------------------------------
    @property
    def message_vectors(self) -> Any:
        """The vectors of single messages (``retrieval.history_vectors.MessageVectors``), made on first use."""
        return self._history_vectors("_message_vectors", "MessageVectors")

    @property
    def turn_vectors(self) -> Any:
        """The vectors of whole turns (``retrieval.history_vectors.TurnVectors``), made on first use."""
        return self._history_vectors("_turn_vectors", "TurnVectors")

    def _history_vectors(self, attribute: str, kind: str) -> Any:
        with self._lock:
            if getattr(self, attribute) is None:
                from ctxbench.retrieval import history_vectors  # numpy and the vector code load on first use

                setattr(self, attribute, getattr(history_vectors, kind)())
            return getattr(self, attribute)

    def keywords(self, session_id: str) -> Any:
        """The session's keyword index of its messages (``retrieval.history_keywords.HistoryKeywords``), kept
        between plans for the last ``CACHED_SESSIONS`` sessions planned."""
        with self._lock:
            index = self._keywords.pop(session_id, None)
            if index is None:
                from ctxbench.retrieval.history_keywords import HistoryKeywords

                index = HistoryKeywords()
            self._keep_keywords(session_id, index)
            return index

    def kept_keywords(self, session_id: str) -> Any:
        """The session's keyword index when one is kept here, else None (``service.history_snapshot``)."""
        with self._lock:
            return self._keywords.get(session_id)

    def adopt_keywords(self, session_id: str, index: Any) -> None:
        """Take ``index`` (a ``HistoryKeywords`` of the session's messages, made by an earlier process) as the
        session's keyword index, unless one is kept already."""
        with self._lock:
            if session_id not in self._keywords:
                self._keep_keywords(session_id, index)

    def _keep_keywords(self, session_id: str, index: Any) -> None:
        """Keep ``index`` as the session's, most recent last, for the last ``CACHED_SESSIONS`` sessions (lock held)."""
        self._keywords[session_id] = index
        while len(self._keywords) > CACHED_SESSIONS:
            self._keywords.pop(next(iter(self._keywords)))

    # -- rankings --------------------------------------------------------------------------------------------
    def keyword_scores(self, session_id: str, history: Sequence[Message], query: str) -> Sequence[tuple[int, float]]:
        """(message id, BM25 relevance) of the active messages of ``history`` for ``query``, best first: Porter-stemmed
        words, BM25 with the statistics of ``history`` alone, so other branches and sessions never change them."""
        return self.keywords(session_id).message_scores(
            history, query, self.config.planner.fused.keyword_candidates, k1=BM25_K1, b=BM25_B)

    def keyword_ranking(self, session_id: str, history: Sequence[Message], query: str) -> tuple[int, ...]:
        """Turns (group ids) of ``history`` ranked by BM25 relevance to ``query`` on exact words, with the statistics
        of ``history`` alone (the hybrid strategy's keyword list)."""
        return self.keywords(session_id).group_ranking(
            history, query, self.config.planner.hybrid.keyword_candidates, k1=BM25_K1, b=BM25_B)

    def ranked(self, inputs: PlanInputs) -> PlanInputs:
        """``inputs`` with what its strategy compares by meaning or by words filled in: the semantic strategy's
        similar turns, the fused strategy's keyword scores and similarities; the others unchanged."""
        self._pending.pop(inputs.session_id, None)  # set again below by a plan that compares by meaning
        if inputs.strategy == "semantic":
            ranking = self._semantic_ranking(inputs)
            return dataclasses.replace(inputs, semantic_ranking=ranking) if ranking else inputs
        if inputs.strategy == "fused":
            return self._fused_inputs(inputs)
        return inputs

    def _fused_inputs(self, inputs: PlanInputs) -> PlanInputs:
        """Each earlier message's BM25 relevance (over this history's own statistics) and, with a ready embedder,
        its cosine similarity to the query (a plan embeds at most ``fused.embed_per_plan`` messages itself)."""
        keyword = self.keyword_scores(inputs.session_id, inputs.history, inputs.query)
        similarity: tuple[tuple[int, float], ...] = ()
        embedder = self.embedder()
        if embedder is not None:
            from ctxbench.records.errors import EmbedderError

            fused = self.config.planner.fused
            try:
                similarity, stats = self.message_vectors.similarity(
                    inputs.history, inputs.query, embedder, self.source.vectors, self.config.planner.semantic,
                    embed_limit=fused.embed_per_plan, skip_groups=inputs.dropped_groups,
                    speaker_share=fused.speaker_share)
                self._pending[inputs.session_id] = stats.pending
            except EmbedderError:
                similarity = ()
        return dataclasses.replace(inputs, message_keyword=keyword, message_similarity=similarity)

    def _semantic_ranking(self, inputs: PlanInputs) -> tuple[tuple[int, float], ...]:
        """Earlier turns most similar to the query (empty without a ready embedder)."""
        embedder = self.embedder()
        if embedder is None:
            return ()
        from ctxbench.records.errors import EmbedderError

        try:
            ranking, stats = self.turn_vectors.ranking(inputs.history, inputs.query, embedder, self.source.vectors,
                                                       self.config.planner.semantic,
                                                       embed_limit=self.config.planner.fused.embed_per_plan,
                                                       skip_groups=inputs.dropped_groups)
            self._pending[inputs.session_id] = stats.pending
        except EmbedderError:
            return ()
        return ranking

    # -- the warm-up -----------------------------------------------------------------------------------------
    def warm(self, session_id: str, progress: Callable[[int, int], None] | None = None, *,
             strategy: str | None = None) -> int:
        """Embed what the active branch's plans compare with the query and has no vector yet — its messages for
        ``fused``, its turns for ``semantic`` (``strategy``, default: the session's) — in chunks, each saved as it
        is made (a killed warm-up keeps them), ``progress(done, total)`` after each; returns how many were
        embedded. A plan embeds only ``fused.embed_per_plan`` itself. Nothing happens without a ready embedder."""
        embedder = self.embedder()
        strategy = strategy or self.source.settings(session_id).strategy
        if embedder is None or strategy not in EMBEDDING_STRATEGIES:
            return 0
        with self.source.connection() as conn, deriving_for(session_id):
            branch_id = session_store.active_branch(conn, session_id)
            visible, dropped = self.source.history_cache.branch_view(conn, session_id, branch_id)
        if strategy == "fused":
            vectors, share = self.message_vectors, self.config.planner.fused.speaker_share
        else:
            vectors, share = self.turn_vectors, 0.0
        stats = vectors.warm(visible, embedder, self.source.vectors, self.config.planner.semantic, progress,
                             skip_groups=dropped, speaker_share=share)
        return stats.embedded
