"""The plain baselines of ``ctxbench bench locomo``: what a short script does without ctxbench.

Each ranks a conversation's turns (their ``[date] speaker: text`` as they are) for a question and packs
them best first into the budget, counting only the turns' text tokens (no system prompt, no message
framing, no question) and skipping a turn that does not fit:

* ``plain bm25+recency`` — seed 000's fusion over turns: BM25 (SQLite FTS5, exact words, the store's
  stop words) and recency, RRF with k = 60 and keyword weight 1.5, recency restricted to the BM25 hits
  when there are any (the subset rule);
* ``plain minilm`` — cosine similarity of all-MiniLM-L6-v2 vectors of the question and each turn;
* ``plain rrf minilm+bm25`` — RRF (k = 60, equal weights) of the two rankings.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ctxbench.store.search import MemoryTextIndex

BASELINES = ("plain bm25+recency", "plain minilm", "plain rrf minilm+bm25")
RRF_K = 60
KEYWORD_WEIGHT = 1.5


class TurnIndex:
    """One conversation's turns for the baselines: FTS5 over their texts, their vectors and token counts."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray, tokens: Sequence[int]) -> None:
        self.texts = list(texts)
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.tokens = list(tokens)
        self.index = MemoryTextIndex((i + 1, t) for i, t in enumerate(self.texts))

    def bm25(self, question: str) -> list[int]:
        """Turn indices matching the question's words, best first."""
        return [rowid - 1 for rowid, _score in self.index.ranking(question)]

    def rankings(self, question: str, question_vector: np.ndarray) -> dict[str, list[int]]:
        n = len(self.texts)
        keyword = self.bm25(question)
        recency = list(range(n - 1, -1, -1))
        if keyword:
            found = set(keyword)
            recency = [i for i in recency if i in found]
        cosine = self.vectors @ np.asarray(question_vector, dtype=np.float32)
        dense = sorted(range(n), key=lambda i: (-float(cosine[i]), -i))
        return {
            BASELINES[0]: _rrf([(keyword, KEYWORD_WEIGHT), (recency, 1.0)]),
            BASELINES[1]: dense,
            BASELINES[2]: _rrf([(dense, 1.0), (keyword, 1.0)]),
        }

    def pack(self, order: Sequence[int], budget: int) -> set[int]:
        used = 0
        chosen: set[int] = set()
        for i in order:
            if used + self.tokens[i] <= budget:
                chosen.add(i)
                used += self.tokens[i]
        return chosen


def _rrf(rankings: list[tuple[list[int], float]]) -> list[int]:
    scores: dict[int, float] = {}
    for ranking, weight in rankings:
        for rank, i in enumerate(ranking, 1):
            scores[i] = scores.get(i, 0.0) + weight / (RRF_K + rank)
    return sorted(scores, key=lambda i: (-scores[i], -i))
