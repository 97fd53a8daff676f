"""The activation ranges the calibrated int8 graph of MiniLM quantizes with (``bulk_precision = "int8-calibrated"``).

The int8 graph of queries quantizes each run's activations with one scale taken from that run, so texts batched
together would change each other's vectors, and int8 cards ran one per run. The calibrated graph quantizes with
fixed scales instead: per product, the largest magnitude each input channel reached over a fixed set of texts
(ctxbench's own symbol cards and documentation and a few short messages, never a benchmark's repository), measured
by the float32 graph.
With fixed scales a text's vector depends on nothing but the text, so cards run in padded batches again.

The ranges ship for the bundled all-MiniLM-L6-v2 (``data/minilm_int8_ranges.npz``, computed from
``data/minilm_calibration.json`` by :func:`activation_ranges`, 16 s here; a test checks they match); other weights
(``model_path``, a packaged model) embed stored texts in float32 (``embedding_runtime.bulk_calibrated``).
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
TEXTS_FILE = DATA_DIR / "minilm_calibration.json"
RANGES_FILE = DATA_DIR / "minilm_int8_ranges.npz"
CARD_LENGTH = 64  # tokens of a card text (``EmbeddingConfig.max_seq_length``)
PROSE_LENGTH = 256  # tokens of a paragraph (a history message's length, ``HistoryConfig.embed_max_seq_length``)


def product_inputs(layers: int) -> dict[str, str]:
    """Each weight product's name in the graph -> the name of the tensor it multiplies (``minilm_onnx``)."""
    out: dict[str, str] = {}
    for i in range(layers):
        p = f"l{i}_"
        out.update({p + "qkv": "emb" if i == 0 else f"l{i - 1}_x2", p + "o1": p + "c", p + "u": p + "x1",
                    p + "d1": p + "g"})
    return out


def calibration_texts() -> tuple[list[str], list[str]]:
    """(card texts and short messages, paragraphs) the ranges are measured on: a one-word text's activations reach
    past any card's (with cards alone "ok" came out at cosine 0.928 to its float32 vector)."""
    data = json.loads(TEXTS_FILE.read_text(encoding="utf-8"))
    return list(data["cards"]) + list(data["short"]), list(data["prose"])


@lru_cache(maxsize=1)
def calibration_tag() -> str:
    """Names what the calibrated vectors depend on beyond the weights (the texts, the shipped ranges, the graph's
    quantization scheme): part of the vector key, so a change of any re-embeds."""
    from ctxbench.retrieval.minilm_int8 import CALIBRATED_SCHEME

    h = hashlib.sha256(TEXTS_FILE.read_bytes())
    h.update(RANGES_FILE.read_bytes())
    h.update(repr(CALIBRATED_SCHEME).encode())
    return h.hexdigest()[:10]


def activation_ranges(model) -> dict[str, np.ndarray]:
    """Per product (``l0_qkv`` ... ``l5_d1``) the largest value of each input channel over the calibration texts,
    and (``..._min``) the smallest, by ``model``'s (an ``OnnxMiniLM``) float32 graph, one text per run."""
    import onnx

    from ctxbench.retrieval.minilm_onnx import build_graph

    graph, weights = build_graph(model._reference)
    proto = onnx.load_from_string(graph)
    inputs = product_inputs(model._reference.layers)
    names = list(dict.fromkeys(inputs.values()))
    for name in names:
        proto.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = model._session(proto.SerializeToString(), weights, arena=False)
    high: dict[str, np.ndarray] = {}
    low: dict[str, np.ndarray] = {}
    cards, prose = calibration_texts()
    for texts, length in ((cards, CARD_LENGTH), (prose, PROSE_LENGTH)):
        tokenizer = model.tokenizer(min(length, model.max_positions))
        for text in texts:
            enc = tokenizer.encode(text)
            n = len(enc.ids)
            feeds = {"input_ids": np.asarray([enc.ids], dtype=np.int64),
                     "token_type_ids": np.asarray([enc.type_ids], dtype=np.int64),
                     "position_ids": np.arange(n, dtype=np.int64), "mask": np.ones((1, n), dtype=np.float32),
                     "mask_bias": np.zeros((1, 1, 1, n), dtype=np.float32)}
            values = dict(zip(names, session.run(names, feeds)))
            for product, tensor in inputs.items():
                rows = values[tensor][0]
                top, bottom = rows.max(axis=0), rows.min(axis=0)
                high[product] = top if product not in high else np.maximum(high[product], top)
                low[product] = bottom if product not in low else np.minimum(low[product], bottom)
    out = {k: v.astype(np.float32) for k, v in high.items()}
    out.update({k + "_min": v.astype(np.float32) for k, v in low.items()})
    return out


def shipped_ranges() -> dict[str, np.ndarray]:
    """The ranges of the bundled all-MiniLM-L6-v2, as shipped."""
    with np.load(RANGES_FILE) as data:
        return {k: np.asarray(data[k], dtype=np.float32) for k in data.files}
