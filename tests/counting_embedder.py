"""A HashingEmbedder that keeps every text it is asked to embed (``texts``), for tests of what gets embedded."""
from __future__ import annotations

from ctxbench.records.errors import EmbedderError
from ctxbench.retrieval.embedder import HashingEmbedder


class CountingEmbedder(HashingEmbedder):
    """Hashing vectors, keeping every text it embedded; after ``fail_after`` encode calls it raises."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.calls = 0
        self.fail_after = fail_after

    def encode(self, texts, progress=None, *, max_seq_length=None):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise EmbedderError("the model went away")
        self.texts.extend(texts)
        return super().encode(texts, progress, max_seq_length=max_seq_length)
