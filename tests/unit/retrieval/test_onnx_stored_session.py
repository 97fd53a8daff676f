"""The onnx encoder's float32 graph for stored texts is made when a text is first stored: a start that only asks
queries (every stored vector already cached, as on the demo's second start) never builds it, and a stored text's
vector is the same whether the graph was made at once or later."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from ctxbench.config import EmbeddingConfig
from ctxbench.retrieval.embedder import Embedder
from ctxbench.retrieval.model_dir import bundled_model_path

TEXTS = ["How does the compositor repaint after a style change?", "def fold(total, amount): return total + amount"]


@pytest.mark.model
def test_queries_alone_never_build_the_stored_texts_graph():
    embedder = Embedder(EmbeddingConfig())  # the defaults: queries by the int8 graph, stored texts by the calibrated one
    assert embedder.wait()
    model = embedder._query_model
    embedder.encode_query(TEXTS[0])
    assert not model.stored_session_built
    embedder.encode(TEXTS)  # stored texts (cards, messages): the float32 graph is made now
    assert model.stored_session_built


@pytest.mark.model
def test_a_stored_text_gets_the_same_vector_from_a_graph_made_later():
    from ctxbench.retrieval.minilm_onnx import OnnxMiniLM

    eager = OnnxMiniLM(bundled_model_path(), threads=1)  # float32 queries: the stored graph is made at once
    lazy = OnnxMiniLM(bundled_model_path(), threads=1, query_int8=True)
    assert eager.stored_session_built and not lazy.stored_session_built
    assert np.array_equal(lazy.encode(TEXTS, 64), eager.encode(TEXTS, 64))


@pytest.mark.model
def test_threads_storing_texts_at_once_share_one_stored_graph():
    from ctxbench.retrieval.minilm_onnx import OnnxMiniLM

    lazy = OnnxMiniLM(bundled_model_path(), threads=1, query_int8=True)
    seen = []
    start = threading.Barrier(3)

    def store() -> None:
        start.wait()
        seen.append(lazy.session)

    threads = [threading.Thread(target=store) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in seen}) == 1
