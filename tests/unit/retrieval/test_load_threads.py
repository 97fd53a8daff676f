"""Under load a query's small matrix products must not wait for a second BLAS thread: once the embedding model
is loaded, numpy's BLAS runs on ``embedding.threads`` threads, like torch."""
from __future__ import annotations

from threadpoolctl import threadpool_info, threadpool_limits

from ctxbench.retrieval.embedding_runtime import limit_blas_threads


def _blas_threads() -> set[int]:
    """Threads of numpy's own BLAS (the one its matrix products use; faiss and scipy bring their own)."""
    return {pool["num_threads"] for pool in threadpool_info()
            if pool["user_api"] == "blas" and "numpy" in pool["filepath"]}


def test_the_embedders_thread_setting_holds_numpys_blas_too(real_embedder):
    import numpy as np

    np.ones((4, 4)) @ np.ones((4, 4))  # BLAS loaded
    assert _blas_threads()  # numpy's BLAS is found
    assert real_embedder.config.threads == 1 and _blas_threads() == {1}  # the model's load set it
    with threadpool_limits(limits=2, user_api="blas"):
        limit_blas_threads(0)  # 0: leave it as it is
        assert _blas_threads() == {2}
        limit_blas_threads(1)
        assert _blas_threads() == {1}
