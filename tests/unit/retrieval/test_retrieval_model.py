"""The real all-MiniLM-L6-v2 (bundled, offline; ``real_embedder`` in conftest.py, loaded once per test session)
and a real FAISS index."""
from __future__ import annotations

import numpy as np
import pytest

from ctxbench.config import Config
from ctxbench.service.index_views import retriever_for
from ctxbench.store.db import connect

from retrieval_fixture import index_repo, view, write_repo


@pytest.mark.model
def test_real_model_gives_unit_vectors_that_rank_meaning(real_embedder):
    vecs = real_embedder.encode([
        "evict the least recently used entry from the cache",
        "LRU cache: drop the oldest item when full",
        "download a web page over HTTP",
    ])
    assert vecs.dtype == np.float32 and vecs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2]) + 0.2
    assert real_embedder.ready and real_embedder.dimension == 384


@pytest.mark.model
def test_semantic_retrieval_with_the_real_model_and_faiss(real_embedder, tmp_path):
    repo = write_repo(tmp_path / "repo")
    conn = connect(tmp_path / "store.db")
    index = index_repo(repo, conn)
    r = retriever_for(conn, None, Config(), real_embedder, index=view(index))
    r.prepare()
    assert list(tmp_path.glob("store.*.faiss"))
    assert r.last_embed_stats.embedded == len(index.cards)
    rs = r.retrieve("throw away the oldest item once the store has no room left", k=3, sources=("semantic",))
    assert rs.semantic_available and rs.notes == ()
    assert "store.cache.LRUCache.set" in [h.symbol for h in rs.hits]
    assert rs.hits[0].why.split(" · ")[1].startswith("semantic 0.")
    fused = r.retrieve("how do I get a web page's body?", k=3)
    assert fused.hits[0].symbol == "net.http.fetch_url"
    # a second retriever on the same store reads the FAISS file back and embeds nothing
    again = retriever_for(conn, None, Config(), real_embedder, index=view(index))
    again.prepare()
    assert again.last_embed_stats.embedded == 0
    conn.close()


@pytest.mark.model
def test_longer_truncation_for_one_call_then_back_to_the_card_length(real_embedder):
    long_text = "the query starts with words about caches " + " ".join(f"word{i}" for i in range(200)) + " http"
    short_cut = real_embedder.encode([long_text])[0]
    long_cut = real_embedder.encode([long_text], max_seq_length=256)[0]
    assert float(short_cut @ long_cut) < 0.999  # more of the text was read
    assert np.allclose(real_embedder.encode([long_text])[0], short_cut, atol=1e-5)  # default restored
