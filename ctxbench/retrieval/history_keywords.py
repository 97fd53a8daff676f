"""Keyword relevance of single messages, by BM25 over the plan's own history: the fused strategy's keyword input.

SQLite's ``bm25()`` over the store's ``message_search`` table takes its statistics (how many messages, their
mean length, how many hold a word) from the whole table: every branch and every session. A message added on
a child branch, or in another session, then changed a parent branch's scores and its PlanId. Here the
statistics are those of the history being planned — the active messages a branch sees — and nothing else:

    score(m) = Σ over the query's terms t found in m of  idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·|m| / avg|m|))
    idf(t)   = ln((N − n(t) + 0.5) / (n(t) + 0.5)), at least 1e-6 (as FTS5 has it)

with N the history's messages that have words, n(t) those holding t, |m| a message's words. The words are
FTS5's own (``retrieval.stemming``: unicode61 + Porter, the message index's tokenizer) of the text the message
index holds (``store.message_search.message_text``: content, tool names and arguments); the query's words are
those of the store's keyword search (``store.search.query_terms``: stop words dropped), each split into
FTS5 words the same way (a query word FTS5 reads as a phrase, ``foo_bar``, counts as its words).

:class:`MessageKeywords` is one session's index, kept in memory and extended as the history grows: a
message is tokenised once, a plan costs a few array operations per query word. Branches share it: each plan
masks the index down to the messages its history holds.
"""
from __future__ import annotations

import math
import threading
from array import array
from typing import Sequence

import numpy as np

from ctxbench.records.messages import Message
from ctxbench.retrieval.stemming import term_counts, tokens
from ctxbench.store.message_search import message_text
from ctxbench.store.search import query_terms

MIN_IDF = 1e-6  # FTS5's floor for a word most messages hold
REBUILD_DEAD_SHARE = 0.5  # rebuild when more than this share of the rows belong to edited or gone messages


def query_words(query: str) -> list[str]:
    """The query's terms: its content words (stop words dropped), as FTS5 words, each once."""
    return list(dict.fromkeys(t for word in query_terms(query) for t in tokens(word)))


class MessageKeywords:
    """An inverted index of one session's messages (any branch), and BM25 over the part a history sees."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._messages: list[Message] = []  # row -> the message indexed there
        self._row_of: dict[int, int] = {}  # message id -> its current row
        self._ids = array("q")  # row -> message id
        self._lengths = array("i")  # row -> words
        self._postings: dict[str, tuple[array, array]] = {}  # term -> (rows, term frequencies)
        self._synced: tuple[Message, ...] = ()
        self._visible: list[int] = []  # rows of the active messages of ``_synced``
        self._mask_for: tuple[Message, ...] | None = None
        self._mask: np.ndarray = np.zeros(0, dtype=bool)
        self._stats = (0, 0.0)

    @property
    def rows(self) -> int:
        return len(self._messages)

    # -- keeping up with the history -------------------------------------------------------------------
    def _add(self, message: Message) -> int:
        row = len(self._messages)
        length, counts = term_counts(message_text(message))
        self._messages.append(message)
        self._ids.append(message.id)
        self._lengths.append(length)
        self._row_of[message.id] = row
        for term, tf in counts.items():
            posting = self._postings.get(term)
            if posting is None:
                posting = self._postings[term] = (array("i"), array("i"))
            posting[0].append(row)
            posting[1].append(tf)
        return row

    def _row(self, message: Message) -> int:
        row = self._row_of.get(message.id)
        if row is not None:
            known = self._messages[row]
            if known is message or (known.content == message.content and known.tool_calls == message.tool_calls
                                    and known.tool_name == message.tool_name):
                self._messages[row] = message
                return row
        return self._add(message)

    def sync(self, history: Sequence[Message]) -> None:
        """Index the messages of ``history`` not indexed yet (a message whose text changed gets a new row)."""
        with self._lock:
            self._sync(tuple(history))

    def _sync(self, history: tuple[Message, ...]) -> None:
        last = self._synced
        if history is last:
            return
        if len(history) >= len(last) and history[: len(last)] == last:  # the usual case: turns were added
            visible = list(self._visible)
            new = history[len(last):]
        else:
            if len(self._messages) > 2 * max(len(self._row_of), 1) or (
                    len(self._messages) - len(self._row_of)) > REBUILD_DEAD_SHARE * max(len(self._messages), 1):
                self._clear()
            visible, new = [], history
        for m in new:
            row = self._row(m)
            if m.status == "active":
                visible.append(row)
        self._synced = history
        self._visible = visible

    # -- scoring ------------------------------------------------------------------------------------------
    def _visible_mask(self) -> tuple[np.ndarray, int, float]:
        if self._mask_for is not self._synced or len(self._mask) != len(self._messages):
            lengths = np.frombuffer(self._lengths, dtype=np.int32) if len(self._lengths) else np.zeros(0, np.int32)
            mask = np.zeros(len(self._messages), dtype=bool)
            if self._visible:
                mask[np.asarray(self._visible, dtype=np.int64)] = True
            mask &= lengths > 0
            n = int(mask.sum())
            self._stats = (n, float(lengths[mask].sum()) / n if n else 0.0)
            self._mask, self._mask_for = mask, self._synced
        return self._mask, self._stats[0], self._stats[1]

    def scores(self, history: Sequence[Message], query: str, limit: int, *, k1: float, b: float
               ) -> tuple[tuple[int, float], ...]:
        """(message id, BM25 relevance > 0) of the active messages of ``history`` for ``query``, best first (ties:
        the older message first), ``limit`` at most; the statistics are those of ``history`` alone."""
        words = query_words(query)
        if not words or limit <= 0:
            return ()
        with self._lock:
            self._sync(tuple(history))
            mask, n_docs, mean_length = self._visible_mask()
            if not n_docs:
                return ()
            lengths = np.frombuffer(self._lengths, dtype=np.int32)
            hit_rows: list[np.ndarray] = []
            hit_scores: list[np.ndarray] = []
            for term in words:
                posting = self._postings.get(term)
                if posting is None:
                    continue
                rows = np.frombuffer(posting[0], dtype=np.int32)
                keep = mask[rows]
                rows = rows[keep]
                if not len(rows):
                    continue
                tf = np.frombuffer(posting[1], dtype=np.int32)[keep].astype(np.float64)
                n = len(rows)
                idf = math.log((n_docs - n + 0.5) / (n + 0.5))
                idf = idf if idf > 0 else MIN_IDF
                norm = k1 * (1.0 - b + b * lengths[rows] / mean_length)
                hit_rows.append(rows)
                hit_scores.append(idf * tf * (k1 + 1.0) / (tf + norm))
            if not hit_rows:
                return ()
            rows = np.concatenate(hit_rows)
            total = np.bincount(rows, weights=np.concatenate(hit_scores), minlength=len(self._messages))
            found = np.flatnonzero(total > 0)
            values = total[found]
            if len(found) > limit:  # everything scoring at least the limit-th best, then the exact order
                floor = np.partition(values, len(values) - limit)[len(values) - limit]
                keep = values >= floor
                found, values = found[keep], values[keep]
            ids = np.frombuffer(self._ids, dtype=np.int64)[found]
            order = np.lexsort((ids, -values))[:limit]
            return tuple((int(ids[i]), round(float(values[i]), 6)) for i in order)
