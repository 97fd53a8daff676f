"""``bulk_precision = "int8-calibrated"``: stored texts (cards, messages) by the int8 graph with fixed activation
scales (``retrieval/minilm_int8.py``, ``retrieval/minilm_calibration.py``): near the float32 vectors, independent of
their batch, under a key of their own, from ranges that are the bundled weights' calibration."""
from __future__ import annotations

import numpy as np
import pytest

from ctxbench.config import EmbeddingConfig
from ctxbench.retrieval.embedder import Embedder

CALIBRATED = EmbeddingConfig(bulk_precision="int8-calibrated")  # the default
PLAIN = EmbeddingConfig(bulk_precision="float32")
CARD_TEXTS = [
    "textual widget DataTable class DataTable(ScrollView) A widget to display text in a table.",
    "textual app App run def run(self, *, headless: bool = False) -> ReturnType | None Run the app.",
    "ctxbench planner plan def plan(request: PlanRequest) -> Plan Choose what fits the budget.",
    "trio _core _run CancelScope cancel def cancel(self) -> None Cancels this scope immediately.",
    "click core Context invoke def invoke(self, callback, *args, **kwargs) Invokes a command callback.",
]
TINY_TEXTS = ["x", "ok", "yes"]  # [CLS], a word, [SEP]: the special tokens' large activations weigh most in the mean
MESSAGES = ["How does the compositor repaint after a style change? It walks the dirty regions first " * 4,
            "def fold(total, amount): return total + amount", "Thanks, that fixed the failing test."]
# cosine to float32 over 600 of textual's card texts: 0.99855 min, 0.99933 mean (max |diff| 0.0102); the
# per-run int8 graph (``bulk_precision = "int8"``): 0.985 min, 0.995 mean
CALIBRATED_COSINE_FLOOR = 0.997
CALIBRATED_MAX_DIFF = 0.02
# "ok" 0.9953, "thanks" 0.9949 (calibrated on cards alone: "ok" 0.928; the per-run int8 graph: 0.970)
TINY_COSINE_FLOOR = 0.99


def test_stored_texts_are_calibrated_int8_by_default():
    assert EmbeddingConfig() == CALIBRATED


def test_calibrated_vectors_have_a_key_of_their_own():
    plain, calibrated = Embedder(EmbeddingConfig(bulk_precision="float32")), Embedder(CALIBRATED)
    per_run = Embedder(EmbeddingConfig(bulk_precision="int8"))
    assert len({plain.key, calibrated.key, per_run.key}) == 3
    assert calibrated.key.startswith(plain.key + "|bulk-int8c-")


def test_other_weights_and_runtimes_keep_float32_cards_under_the_float32_key(tmp_path):
    """The ranges ship for the bundled model's onnx graph only: elsewhere stored texts embed as float32 would, and
    their key says so (no calibrated vector is ever filed for weights it was not calibrated on)."""
    from ctxbench.retrieval.embedding_runtime import bulk_calibrated

    for other in ({"bulk_runtime": "torch"}, {"query_runtime": "numpy"}, {"model_path": str(tmp_path)},
                  {"model_name": "code-minilm"}):
        calibrated = EmbeddingConfig(bulk_precision="int8-calibrated", **other)
        plain = EmbeddingConfig(bulk_precision="float32", **other)
        assert not bulk_calibrated(calibrated)
        assert Embedder(calibrated).key == Embedder(plain).key
    assert bulk_calibrated(CALIBRATED)


def test_the_calibrated_key_names_the_quantization_scheme(monkeypatch):
    from ctxbench.retrieval import minilm_calibration, minilm_int8

    before = Embedder(CALIBRATED).key
    minilm_calibration.calibration_tag.cache_clear()
    monkeypatch.setitem(minilm_int8.CALIBRATED_SCHEME, "alpha", 0.5)
    try:
        assert Embedder(CALIBRATED).key != before
    finally:
        minilm_calibration.calibration_tag.cache_clear()


@pytest.mark.model
def test_calibrated_vectors_are_near_float32_and_independent_of_their_batch():
    plain, calibrated = Embedder(PLAIN), Embedder(CALIBRATED)
    texts = (CARD_TEXTS + TINY_TEXTS) * 3  # more than a query call's few texts: the bulk path, in padded batches
    exact, quick = plain.encode(texts), calibrated.encode(texts)
    assert calibrated.bulk_onnx and not np.array_equal(quick, exact)
    cosines = np.sum(quick * exact, axis=1)
    cards = np.array([t in CARD_TEXTS for t in texts])
    assert cosines[cards].min() >= CALIBRATED_COSINE_FLOOR, cosines
    assert cosines[~cards].min() >= TINY_COSINE_FLOOR, cosines
    assert np.abs(quick[cards] - exact[cards]).max() <= CALIBRATED_MAX_DIFF
    assert np.allclose(np.linalg.norm(quick, axis=1), 1.0, atol=1e-5)
    model = calibrated._query_model
    model.calibrated_batch_size = 4  # batches of other sizes and other batch-mates
    regrouped = calibrated.encode(texts[::-1])[::-1]
    alone = np.vstack([calibrated.encode([t]) for t in texts])
    assert np.abs(regrouped - quick).max() < 1e-5 and np.abs(alone - quick).max() < 1e-5
    for text, row in zip(texts, quick):  # a text's vector, whatever ran beside it, is the one it gets alone
        assert float(row @ calibrated.encode([text])[0]) > 0.99999


@pytest.mark.model
def test_messages_by_the_calibrated_graph_are_near_float32_at_the_history_length():
    plain, calibrated = Embedder(PLAIN), Embedder(CALIBRATED)
    exact, quick = plain.encode(MESSAGES, max_seq_length=256), calibrated.encode(MESSAGES, max_seq_length=256)
    assert np.sum(quick * exact, axis=1).min() >= CALIBRATED_COSINE_FLOOR


@pytest.mark.model
def test_queries_stay_on_the_query_graph_with_calibrated_cards():
    default, calibrated = Embedder(PLAIN), Embedder(CALIBRATED)
    question = "where does the app decide which widget has focus"
    assert np.array_equal(calibrated.encode_query(question), default.encode_query(question))


@pytest.mark.model
@pytest.mark.slow
def test_the_shipped_ranges_are_the_bundled_weights_calibration():
    """The ranges shipped for the bundled model are what ``activation_ranges`` measures on the calibration texts
    (other weights are calibrated that way when their graph is first built)."""
    from ctxbench.retrieval.minilm_calibration import activation_ranges, shipped_ranges
    from ctxbench.retrieval.minilm_onnx import OnnxMiniLM
    from ctxbench.retrieval.model_dir import bundled_model_path

    shipped = shipped_ranges()
    measured = activation_ranges(OnnxMiniLM(bundled_model_path(), threads=1))
    assert set(shipped) == set(measured) and len(shipped) == 48
    for name, values in shipped.items():
        assert np.allclose(measured[name], values, rtol=1e-5, atol=1e-5), name
