"""Earlier turns ranked by meaning: the similarity input of the ``semantic`` history strategy (seed 003).

Each earlier turn (group) is embedded as one text — its user message, then the first
``embed_reply_chars`` of the assistant's replies — with the same embedder the code retriever
uses. Vectors are cached in the card vector cache (``retrieval/vectors.py``) keyed by the sha256 of that text and a model key naming the model, the
sequence length and the text version, so a turn is embedded once per model and an edited turn is
embedded again. The query is embedded the same way and compared with every turn by cosine
similarity; the most similar turns above ``min_similarity`` (at most ``candidates``, 0 = all) are the
ranking ``PlanInputs.semantic_ranking`` carries (a :class:`~ctxbench.records.scored.ScoredIds`).

The fused strategy compares single messages the same way (:class:`MessageVectors`). Both keep, between plans,
each history's texts and hashes and the stacked matrix of its vectors, extended when turns are added, so an
append-only history embeds and stacks only its new turns; a plan embeds at most ``fused.embed_per_plan``
missing texts itself (newest first), and :meth:`_HistoryVectors.warm` embeds the rest in chunks, each saved
to the cache as it is made, reporting ``progress(done, total)``.

The texts embedded and the units holding them are in ``history_texts``.

The work is split so a caller holding a lock over its database connection only needs it for the
cache reads and writes (:class:`VectorCache`), not for the encoding.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence

import numpy as np

from ctxbench.config import SemanticHistoryConfig
from ctxbench.records.messages import Message
from ctxbench.retrieval.query_vector import encode_query
from ctxbench.records.scored import ScoredIds
from ctxbench.records.speakers import without_names
from ctxbench.store.vectors import MESSAGE_KEY_MARK, TURN_KEY_MARK
from ctxbench.retrieval.history_texts import MESSAGE_TEXT_VERSION, TURN_TEXT_VERSION, MessageUnits, TextUnits, TurnUnits


class VectorCache(Protocol):
    """Where vectors are cached: ``load`` the known ones by content hash, ``save`` new ones."""

    def load(self, hashes: Iterable[str], key: str) -> Mapping[str, np.ndarray]: ...

    def save(self, rows: Sequence[tuple[str, np.ndarray]], key: str) -> None: ...


@dataclass(frozen=True)
class HistoryRankingStats:
    turns: int  # earlier turns compared with the query
    embedded: int  # of which embedded now (the rest came from the cache)


def cache_key(embedder_key: str, config: SemanticHistoryConfig) -> str:
    """What shapes a turn's vector: the embedder (model, precision), the sequence length, the text version."""
    return f"{embedder_key}{TURN_KEY_MARK}{TURN_TEXT_VERSION}|seq{config.embed_max_seq_length}"


def rank_turns(history: Sequence[Message], query: str, embedder, cache: VectorCache,
               config: SemanticHistoryConfig, *, skip_groups: Iterable[int] = ()
               ) -> tuple[tuple[tuple[int, float], ...], HistoryRankingStats]:
    """(group id, cosine similarity) of the turns most similar to ``query``, most similar first, every turn embedded
    now if it has no vector yet (:class:`TurnVectors` keeps them between calls and embeds a few per plan).

    Turns less similar than ``config.min_similarity`` are left out, and at most ``config.candidates``
    are returned; ties go to the newer turn. ``embedder`` must be ready (``encode`` waits otherwise).
    """
    ranking, stats = TurnVectors().ranking(history, query, embedder, cache, config, embed_limit=None,
                                           skip_groups=skip_groups)
    return ranking, HistoryRankingStats(stats.units, stats.embedded)


# -- vectors kept between plans: single messages (fused) and turns (semantic) ------------------------------------

MEMORY_MAX_VECTORS = 200_000  # vectors kept in the process (about 300 MB at 384 dimensions)
WARM_CHUNK = 32  # texts per encode call while warming up, so a plan's query waits at most one chunk


@dataclass(frozen=True)
class MessageRankingStats:
    units: int  # messages (or turns) with a text to compare
    embedded: int  # embedded by this call
    pending: int  # still without a vector (left for the warm-up)


def message_cache_key(embedder_key: str, config: SemanticHistoryConfig) -> str:
    return f"{embedder_key}{MESSAGE_KEY_MARK}{MESSAGE_TEXT_VERSION}|seq{config.embed_max_seq_length}"


UNIT_SETS_KEPT = 4  # histories whose units are kept (the branch's view, the history before the current turn, ...)


class _HistoryVectors:
    """Vectors of a history's units by content hash: in the process first, then the store's vector cache; a
    matrix of the units' vectors is kept between plans and extended when turns are added (an append-only history
    never re-stacks). A plan embeds a few missing units itself (newest first); :meth:`warm` embeds the rest."""

    def __init__(self, units: type[TextUnits]) -> None:
        self._unit_type = units
        self._unit_sets: list[TextUnits] = []
        self._memory: dict[tuple[str, str], np.ndarray] = {}
        self._absent: set[tuple[str, str]] = set()  # hashes the store's cache did not have (asked once)
        self._lock = threading.RLock()

    def _key(self, embedder_key: str, config: SemanticHistoryConfig) -> str:
        raise NotImplementedError

    def missing(self, rows: Sequence[tuple[int, str, str]], key: str, cache: VectorCache
                ) -> list[tuple[int, str, str]]:
        memory, absent = self._memory, self._absent
        unknown = [r for r in rows if (key, r[2]) not in memory and (key, r[2]) not in absent]
        if unknown:
            found = cache.load([r[2] for r in unknown], key)
            self._remember(key, found.items())
            absent.update((key, r[2]) for r in unknown if r[2] not in found)
        return [r for r in rows if (key, r[2]) not in memory]

    def embed(self, rows: Sequence[tuple[int, str, str]], key: str, embedder, cache: VectorCache,
              config: SemanticHistoryConfig) -> int:
        todo = list({r[2]: r[1] for r in rows}.items())
        if not todo:
            return 0
        vectors = embedder.encode([t for _h, t in todo], max_seq_length=config.embed_max_seq_length)
        fresh = [(h, np.asarray(v, dtype=np.float32)) for (h, _t), v in zip(todo, vectors)]
        cache.save(fresh, key)
        self._remember(key, fresh)
        return len(fresh)

    def _remember(self, key: str, items) -> None:
        with self._lock:
            if len(self._memory) > MEMORY_MAX_VECTORS:
                self._memory.clear()
                self._absent.clear()
                self._unit_sets.clear()
            for h, v in items:
                self._memory[(key, h)] = np.asarray(v, dtype=np.float32)
                self._absent.discard((key, h))
            for units in self._unit_sets:
                units.ready = None

    def matrix(self, units: TextUnits, key: str, hashes: tuple[str, ...]) -> np.ndarray:
        """The vectors of ``hashes`` stacked (kept with the unit set). Rows live in a buffer with room to grow: when
        only hashes were added (a new turn) their rows are written after the others, nothing is copied — unless a
        set derived from the same one wrote there first."""
        hit = units.matrix.get(key)
        if hit is not None and hit[0] == hashes:
            return hit[1]
        n, old = len(hashes), (len(hit[0]) if hit is not None else 0)
        if hit is not None and old < n and hashes[:old] == hit[0]:
            extra = np.vstack([self._memory[(key, h)] for h in hashes[old:]])
            store = hit[2]  # [buffer, rows written], shared with the sets derived from this one
            if store[1] != old or len(store[0]) < n:
                buffer = np.empty((n + n // 4 + 64, extra.shape[1]), dtype=np.float32)
                buffer[:old] = hit[1]
                store = [buffer, old]
            store[0][old:n] = extra
        else:
            rows = np.vstack([self._memory[(key, h)] for h in hashes])
            store = [np.empty((n + n // 4 + 64, rows.shape[1]), dtype=np.float32), 0]
            store[0][:n] = rows
        store[1] = n
        matrix = store[0][:n]
        units.matrix[key] = (hashes, matrix, store)
        return matrix

    def _units(self, history: Sequence[Message], config: SemanticHistoryConfig, skip: Iterable[int],
               share: float = 0.0) -> TextUnits:
        """The unit set of ``history``: kept, extended from a kept one, or new (the last ``UNIT_SETS_KEPT`` kept)."""
        history, skip = tuple(history), frozenset(skip)
        sets = self._unit_sets
        found = next((u for u in sets if u.history is history and u.skip == skip and u.config == config
                      and u.share == share), None)
        if found is None:
            best, covered = None, -1
            for units in sets:
                n = units.extends_to(history, config, skip, share)
                if n > covered:
                    best, covered = units, n
            if best is not None and covered > 0:
                found = best.derived(history)
            else:
                found = self._unit_type(config, skip, share)
                found.extend(history)
        sets[:] = [u for u in sets if u is not found][-(UNIT_SETS_KEPT - 1):] + [found]
        return found

    def _rows(self, history: Sequence[Message], config: SemanticHistoryConfig, skip: Iterable[int], share: float
              ) -> list[tuple[int, str, str]]:
        return [(uid, text, h) for uid, (text, h) in self._units(history, config, skip, share).rows.items()]

    def similarity(self, history: Sequence[Message], query: str, embedder, cache: VectorCache,
                   config: SemanticHistoryConfig, *, embed_limit: int | None, skip_groups: Iterable[int] = (),
                   speaker_share: float = 0.0) -> tuple[list[int], np.ndarray, MessageRankingStats]:
        """(unit ids, their cosine with ``query``) of the units that have a vector, in history order.

        Units without one are embedded here, newest first, ``embed_limit`` at most (None: all of them); the rest
        stay without a similarity until :meth:`warm` has embedded them. In a transcript of speakers
        (``speaker_share``, :class:`MessageUnits`) the query is compared without the speakers' names: the
        messages' texts have no labels, and the fused strategy weighs the speaker a query names on its own.
        """
        with self._lock:
            key = self._key(embedder.key, config)
            units = self._units(history, config, skip_groups, speaker_share)
            if not query.strip():
                return [], np.zeros(0, dtype=np.float32), MessageRankingStats(len(units.rows), 0, 0)
            embedded = 0
            if units.ready is None or units.ready[0] != key:
                rows = [(uid, text, h) for uid, (text, h) in units.rows.items()]
                absent = self.missing(rows, key, cache) if rows else []
                if absent and (embed_limit is None or embed_limit > 0):
                    todo = absent[::-1] if embed_limit is None else absent[::-1][:embed_limit]
                    embedded = self.embed(todo, key, embedder, cache, config)
                    absent = [r for r in absent if (key, r[2]) not in self._memory]
                memory = self._memory
                ready = [r for r in rows if (key, r[2]) in memory]
                units.ready = (key, np.array([r[0] for r in ready], dtype=np.int64), tuple(r[2] for r in ready))
                units.counts = (len(rows), embedded, len(absent))
            _key, ids, hashes = units.ready
            stats = MessageRankingStats(units.counts[0], embedded, units.counts[2])
            if not len(ids):
                return ids, np.zeros(0, dtype=np.float32), stats
            matrix = self.matrix(units, key, hashes)
            speakers = units.speakers
        query_text = without_names(query, speakers) if speakers else query
        query_vector = encode_query(embedder, query_text, config.embed_max_seq_length)
        return ids, matrix @ np.asarray(query_vector, dtype=np.float32), stats

    def warm(self, history: Sequence[Message], embedder, cache: VectorCache, config: SemanticHistoryConfig,
             progress=None, *, skip_groups: Iterable[int] = (), speaker_share: float = 0.0) -> MessageRankingStats:
        """Embed every unit of ``history`` that has no vector yet, in small chunks (newest first), saving each
        chunk as it goes (a killed warm-up keeps what it embedded); ``progress(done, total)`` after each."""
        with self._lock:
            key = self._key(embedder.key, config)
            rows = self._rows(history, config, skip_groups, speaker_share)
            absent = self.missing(rows, key, cache)[::-1]
        done = 0
        if progress is not None:
            progress(0, len(absent))
        for start in range(0, len(absent), WARM_CHUNK):
            done += self.embed(absent[start:start + WARM_CHUNK], key, embedder, cache, config)
            if progress is not None:
                progress(min(start + WARM_CHUNK, len(absent)), len(absent))
        return MessageRankingStats(len(rows), done, 0)


class MessageVectors(_HistoryVectors):
    """Vectors of single messages (the fused strategy's similarity)."""

    def __init__(self) -> None:
        super().__init__(MessageUnits)

    def _key(self, embedder_key: str, config: SemanticHistoryConfig) -> str:
        return message_cache_key(embedder_key, config)

    def similarity(self, history: Sequence[Message], query: str, embedder, cache: VectorCache,  # type: ignore[override]
                   config: SemanticHistoryConfig, *, embed_limit: int | None, skip_groups: Iterable[int] = (),
                   speaker_share: float = 0.0) -> tuple[ScoredIds | tuple[()], MessageRankingStats]:
        """(message id, cosine with ``query``) of every message that has a vector, in history order."""
        ids, sims, stats = super().similarity(history, query, embedder, cache, config, embed_limit=embed_limit,
                                              skip_groups=skip_groups, speaker_share=speaker_share)
        if not len(ids):
            return (), stats
        return ScoredIds.from_buffers(ids, rounded(sims)), stats


class TurnVectors(_HistoryVectors):
    """Vectors of whole turns (the semantic strategy's ranking): ``turn_text`` of each earlier turn."""

    def __init__(self) -> None:
        super().__init__(TurnUnits)

    def _key(self, embedder_key: str, config: SemanticHistoryConfig) -> str:
        return cache_key(embedder_key, config)

    def ranking(self, history: Sequence[Message], query: str, embedder, cache: VectorCache,
                config: SemanticHistoryConfig, *, embed_limit: int | None, skip_groups: Iterable[int] = ()
                ) -> tuple[ScoredIds | tuple[()], MessageRankingStats]:
        """(group id, cosine similarity) of the turns most similar to ``query`` above ``min_similarity``, most
        similar first (ties: the newer turn), ``candidates`` at most (0: all)."""
        if not query.strip():
            return (), MessageRankingStats(0, 0, 0)
        ids, sims, stats = self.similarity(history, query, embedder, cache, config, embed_limit=embed_limit,
                                           skip_groups=skip_groups)
        if not len(ids):
            return (), stats
        keep = sims.astype(np.float64) >= config.min_similarity
        gids = ids[keep]
        values = rounded(sims[keep])
        order = np.lexsort((-gids, -values))
        if config.candidates > 0:
            order = order[: config.candidates]
        if not len(order):
            return (), stats
        return ScoredIds.from_buffers(np.ascontiguousarray(gids[order]), np.ascontiguousarray(values[order])), stats


def rounded(similarities: np.ndarray) -> np.ndarray:
    """Cosine similarities as float64 rounded to 6 decimals (what plans see and their PlanId hashes: the last bits
    of a float32 product are not worth a different plan)."""
    return np.round(similarities.astype(np.float64), 6)
