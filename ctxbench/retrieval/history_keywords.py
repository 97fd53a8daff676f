"""Keyword relevance by BM25 over the planned history alone: the fused strategy's message scores and the
hybrid strategy's turn ranking.

SQLite's ``bm25()`` over the store's FTS5 tables takes its statistics (how many documents, their mean length,
how many hold a word) from the whole table: every branch and every session. A message added on a child
branch, or in another session, then changed a parent branch's scores and its PlanId; and ranking a 10,000-turn
session's turns in SQL took most of a plan's time. Here the statistics are those of the history being planned —
the active messages a branch sees — and nothing else:

    score(d) = Σ over the query's terms t found in d of  idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·|d| / avg|d|))
    idf(t)   = ln((N − n(t) + 0.5) / (n(t) + 0.5)), at least 1e-6 (as FTS5 has it)

with N the documents that have words, n(t) those holding t, |d| a document's words; k1 and b are FTS5's
(``config.BM25_K1``, ``BM25_B``). The words are FTS5's own (``retrieval.stemming``: unicode61, the tables'
tokenizer) of the text the store's search tables hold (``store.message_search.message_text``: content, tool
names and arguments). The query's words are those of the store's keyword search (``store.search.query_terms``:
stop words dropped), each split into FTS5 words the same way (a query word FTS5 reads as a phrase, ``foo_bar``,
counts as its words here).

* :meth:`HistoryKeywords.message_scores` — fused: a document is one message, words are Porter-stemmed (the
  ``message_search`` table's ``porter unicode61``: "painted" finds "painting").
* :meth:`HistoryKeywords.group_ranking` — hybrid: a document is one turn (its active messages), exact words
  (``group_search``'s ``unicode61``: seed 001 — stemming buried the one turn that used the word).

:class:`HistoryKeywords` is one session's index of unstemmed words (a stem's words are looked up when a query
needs them), kept in memory and extended as the history grows: a message is read once, a plan costs a few
array operations per query word. Branches share it: each plan masks it down to the messages its history holds.
"""
from __future__ import annotations

import math
import threading
from array import array
from typing import Sequence

import numpy as np

from ctxbench.records.messages import Message
from ctxbench.records.scored import ScoredIds
from ctxbench.retrieval.stemming import stem, word_counts, words
from ctxbench.store.message_search import message_text
from ctxbench.store.search import query_terms

MIN_IDF = 1e-6  # FTS5's floor for a word most documents hold
DIRECT_BINS_MAX = 4_000_000  # keys below this are summed by counting into bins (no sort)


def query_words(query: str, *, stemmed: bool) -> list[str]:
    """The query's terms: its content words (stop words dropped) as FTS5 words (Porter terms when ``stemmed``),
    each once."""
    found = (w for term in query_terms(query) for w in words(term))
    return list(dict.fromkeys(stem(w) for w in found) if stemmed else dict.fromkeys(found))


def _idf(n_docs: int, n: int) -> float:
    idf = math.log((n_docs - n + 0.5) / (n + 0.5))
    return idf if idf > 0 else MIN_IDF


def _bm25(tf: np.ndarray, lengths: np.ndarray, mean: float, n_docs: int, k1: float, b: float) -> np.ndarray:
    """One term's BM25 relevance in each document that holds it (``tf`` times, ``lengths`` long)."""
    return _idf(n_docs, len(tf)) * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * lengths / mean))


def _summed(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys, ascending, the sum of ``values`` per key, added in their order)."""
    top = int(keys.max()) + 1 if len(keys) else 0
    if len(keys) and keys.min() >= 0 and top <= DIRECT_BINS_MAX:  # row and group numbers: counted in place, no sort
        unique = np.flatnonzero(np.bincount(keys, minlength=top))
        return unique.astype(keys.dtype, copy=False), np.bincount(keys, weights=values, minlength=top)[unique]
    unique, inverse = np.unique(keys, return_inverse=True)
    return unique, np.bincount(inverse, weights=values, minlength=len(unique))


class HistoryKeywords:
    """An inverted index of one session's messages (any branch), and BM25 over the part a history sees."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clear()

    def __getstate__(self) -> dict[str, object]:  # kept with a long session (``service.history_snapshot``)
        with self._lock:
            return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_masked")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, _lock=threading.Lock(), _masked={})

    def _clear(self) -> None:
        self._messages: list[Message] = []  # row -> the message indexed there
        self._row_of: dict[int, int] = {}  # message id -> its current row
        self._ids = array("q")  # row -> message id
        self._groups = array("q")  # row -> group id
        self._lengths = array("i")  # row -> words
        self._postings: dict[str, tuple[array, array]] = {}  # word -> (rows, occurrences)
        self._by_stem: dict[str, list[str]] = {}  # Porter term -> the words that stem to it
        self._synced: tuple[Message, ...] = ()
        self._visible: list[int] = []  # rows of the active messages of ``_synced``
        self._masked: dict[str, object] = {}  # what is derived from ``_synced``: the mask, the turn statistics

    # -- keeping up with the history -------------------------------------------------------------------
    def _add(self, message: Message) -> int:
        row = len(self._messages)
        length, counts = word_counts(message_text(message))
        self._messages.append(message)
        self._ids.append(message.id)
        self._groups.append(message.group_id)
        self._lengths.append(length)
        self._row_of[message.id] = row
        for word, tf in counts.items():
            posting = self._postings.get(word)
            if posting is None:
                posting = self._postings[word] = (array("i"), array("i"))
                self._by_stem.setdefault(stem(word), []).append(word)
            posting[0].append(row)
            posting[1].append(tf)
        return row

    def _row(self, message: Message) -> int:
        row = self._row_of.get(message.id)
        if row is not None:
            known = self._messages[row]
            if known is message or (known.content == message.content and known.tool_calls == message.tool_calls
                                    and known.tool_name == message.tool_name and known.group_id == message.group_id):
                self._messages[row] = message
                return row
        return self._add(message)

    def _sync(self, history: tuple[Message, ...]) -> None:
        last = self._synced
        if history is last:
            return
        if len(history) >= len(last) and history[: len(last)] == last:  # the usual case: turns were added
            visible = list(self._visible)
            new = history[len(last):]
        else:
            dead = len(self._messages) - len(self._row_of)
            if dead > len(self._row_of):  # mostly rows of edited or deleted messages: start again
                self._clear()
            visible, new = [], history
        for m in new:
            row = self._row(m)
            if m.status == "active":
                visible.append(row)
        self._synced = history
        self._visible = visible
        self._masked = {}

    def _mask(self) -> tuple[np.ndarray, np.ndarray]:
        """(which rows the synced history sees as active messages with words, every row's length)."""
        lengths = np.frombuffer(self._lengths, dtype=np.int32) if len(self._lengths) else np.zeros(0, np.int32)
        mask = self._masked.get("mask")
        if mask is None:
            mask = np.zeros(len(self._messages), dtype=bool)
            if self._visible:
                mask[np.asarray(self._visible, dtype=np.int64)] = True
            mask &= lengths > 0
            self._masked["mask"] = mask
        return mask, lengths  # type: ignore[return-value]

    def _postings_of(self, words_: Sequence[str], mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, occurrences) of ``words_`` in the visible rows, one entry per row (several words summed)."""
        parts = [self._postings[w] for w in words_ if w in self._postings]
        if not parts:
            return np.zeros(0, np.int32), np.zeros(0)
        rows = np.concatenate([np.frombuffer(p[0], dtype=np.int32) for p in parts])
        tf = np.concatenate([np.frombuffer(p[1], dtype=np.int32) for p in parts]).astype(np.float64)
        keep = mask[rows]
        rows, tf = rows[keep], tf[keep]
        if len(parts) > 1 and len(rows):
            rows, tf = _summed(rows, tf)
        return rows, tf

    # -- fused: single messages, Porter terms ---------------------------------------------------------------
    def message_scores(self, history: Sequence[Message], query: str, limit: int, *, k1: float, b: float
                       ) -> ScoredIds | tuple[()]:
        """(message id, BM25 relevance > 0) of the active messages of ``history`` for ``query`` (Porter-stemmed
        words), best first (ties: the older message first), ``limit`` at most; the statistics are those of
        ``history`` alone. A ``ScoredIds`` (it reads as the tuple of pairs), or () when nothing is found."""
        terms = query_words(query, stemmed=True)
        if not terms or limit <= 0:
            return ()
        with self._lock:
            self._sync(tuple(history))
            mask, lengths = self._mask()
            n_docs = int(mask.sum())
            if not n_docs:
                return ()
            mean = float(lengths[mask].sum()) / n_docs
            hit_rows, hit_scores = [], []
            for term in terms:
                rows, tf = self._postings_of(self._by_stem.get(term, ()), mask)
                if not len(rows):
                    continue
                hit_rows.append(rows)
                hit_scores.append(_bm25(tf, lengths[rows], mean, n_docs, k1, b))
            if not hit_rows:
                return ()
            rows, values = _summed(np.concatenate(hit_rows), np.concatenate(hit_scores))
            ids = np.frombuffer(self._ids, dtype=np.int64)[rows]
            return _best(ids, values, limit)

    # -- hybrid: whole turns, exact words ----------------------------------------------------------------
    def group_ranking(self, history: Sequence[Message], query: str, limit: int, *, k1: float, b: float
                      ) -> tuple[int, ...]:
        """Group ids of ``history`` ranked by BM25 relevance to ``query`` (exact words; a turn is the text of its
        active messages), best first (ties: the older turn first), ``limit`` at most."""
        terms = query_words(query, stemmed=False)
        if not terms or limit <= 0:
            return ()
        with self._lock:
            self._sync(tuple(history))
            mask, lengths = self._mask()
            stats = self._masked.get("groups")
            if stats is None:
                groups = np.frombuffer(self._groups, dtype=np.int64)
                size = int(groups.max()) + 1 if len(groups) else 1
                group_lengths = np.bincount(groups[mask], weights=lengths[mask], minlength=size)
                n_groups = int((group_lengths > 0).sum())
                stats = self._masked["groups"] = (group_lengths, n_groups,
                                                  float(group_lengths.sum()) / n_groups if n_groups else 0.0)
            group_lengths, n_groups, mean = stats  # type: ignore[misc]
            if not n_groups:
                return ()
            groups = np.frombuffer(self._groups, dtype=np.int64)
            hit_groups, hit_scores = [], []
            for word in terms:
                rows, tf = self._postings_of((word,), mask)
                if not len(rows):
                    continue
                gids, tf = _summed(groups[rows], tf)
                hit_groups.append(gids)
                hit_scores.append(_bm25(tf, group_lengths[gids], mean, n_groups, k1, b))
            if not hit_groups:
                return ()
            gids, values = _summed(np.concatenate(hit_groups), np.concatenate(hit_scores))
            return tuple(_best_order(gids, values, limit)[0].tolist())


def _best_order(ids: np.ndarray, values: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, values) of the ``limit`` best values, best first, ties by ascending id."""
    if len(values) > limit:  # everything scoring at least the limit-th best, then the exact order
        floor = np.partition(values, len(values) - limit)[len(values) - limit]
        keep = values >= floor
        ids, values = ids[keep], values[keep]
    order = np.lexsort((ids, -values))[:limit]
    return ids[order], values[order]


def _best(ids: np.ndarray, values: np.ndarray, limit: int) -> ScoredIds:
    """(id, value rounded to 6 digits) of the ``limit`` best values, best first, ties by ascending id: as a
    ``ScoredIds`` (two flat arrays, no pair made; the planner reads the arrays, the PlanId the same pairs)."""
    best_ids, best_values = _best_order(ids, values, limit)
    return ScoredIds(array("q", best_ids.tolist()), array("d", [round(v, 6) for v in best_values.tolist()]))
