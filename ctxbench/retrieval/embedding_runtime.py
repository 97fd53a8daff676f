"""The runtimes an ``Embedder`` runs its model by, and the keys its vectors are stored under.

Queries (and other calls of a few texts) run by onnxruntime over a graph written from the weights
(``minilm_onnx``) or by the same forward pass in numpy (``minilm_numpy``), so an interactive process never imports
torch; many texts run by that onnx graph too or by sentence-transformers over torch (``bulk_runtime``). This module
checks the configured names, builds each runtime's model from a verified folder, holds the thread limits, and
names what shapes a vector (:func:`vector_key`), which the vector cache is keyed by.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ctxbench.config import EmbeddingConfig
from ctxbench.records.errors import EmbedderError
from ctxbench.retrieval.model_dir import numpy_compatible, resolve_model_dir, verify_model_dir, weights_tag

QUERY_RUNTIMES = ("onnx", "numpy", "torch")
BULK_RUNTIMES = ("onnx", "torch")  # what embeds many texts at once (``EmbeddingConfig.bulk_runtime``)
QUERY_PRECISIONS = ("int8", "float32")  # of the onnx query encoder's weight products (queries only)
# of the onnx graph that embeds stored texts (``EmbeddingConfig.bulk_precision``)
BULK_PRECISIONS = ("int8-calibrated", "float32", "int8")


def vector_key(c: EmbeddingConfig) -> str:
    """Everything that shapes a stored text's vector (model, sequence length, precision, the int8 bulk graph):
    changing any of them re-embeds instead of mixing vectors."""
    name = c.model_name if not c.model_path else f"{c.model_name}@{Path(c.model_path).expanduser()}"
    name += weights_tag(c)  # retrained weights under the same name or folder never share vectors
    key = f"{name}|seq{c.max_seq_length}|{c.precision}"
    if bulk_calibrated(c):  # the calibration texts and scheme shape these vectors too
        from ctxbench.retrieval.minilm_calibration import calibration_tag

        return key + "|bulk-int8c-" + calibration_tag()
    return key + ("|bulk-int8" if bulk_int8(c) else "")


def query_int8(c: EmbeddingConfig) -> bool:
    """Queries run by the onnx encoder's int8 query graph."""
    return c.query_runtime == "onnx" and c.query_precision == "int8" and c.precision == "float32"


def bulk_int8(c: EmbeddingConfig) -> bool:
    """Stored texts (cards, messages) run by the int8 graph (``embedding.bulk_precision``)."""
    return c.bulk_precision == "int8"


def bulk_calibrated(c: EmbeddingConfig) -> bool:
    """Stored texts run by the calibrated int8 graph (fixed activation scales, batched): asked for, and the texts run
    by the onnx graph of the bundled model, whose activation ranges ship with ctxbench (``minilm_calibration``).
    Other weights or runtimes embed stored texts as they would in float32, under the float32 key."""
    return (c.bulk_precision == "int8-calibrated" and (c.query_runtime, c.bulk_runtime, c.precision) ==
            ("onnx", "onnx", "float32") and not c.model_path and c.model_name == EmbeddingConfig.model_name)


def check_runtimes(c: EmbeddingConfig) -> None:
    """Raise ``EmbedderError`` (one line) for a runtime or precision name ctxbench does not have, or a mix of
    them that cannot run."""
    if c.query_runtime not in QUERY_RUNTIMES:
        raise EmbedderError(f"embedding.query_runtime {c.query_runtime!r}: expected one of "
                            f"{', '.join(QUERY_RUNTIMES)}")
    if c.query_precision not in QUERY_PRECISIONS:
        raise EmbedderError(f"embedding.query_precision {c.query_precision!r}: expected one of "
                            f"{', '.join(QUERY_PRECISIONS)}")
    if c.bulk_runtime not in BULK_RUNTIMES:
        raise EmbedderError(f"embedding.bulk_runtime {c.bulk_runtime!r}: expected one of {', '.join(BULK_RUNTIMES)}")
    if c.bulk_precision not in BULK_PRECISIONS:
        raise EmbedderError(f"embedding.bulk_precision {c.bulk_precision!r}: expected one of "
                            f"{', '.join(BULK_PRECISIONS)}")
    if bulk_int8(c) and (c.query_runtime, c.bulk_runtime, c.precision) != ("onnx", "onnx", "float32"):
        raise EmbedderError("embedding.bulk_precision 'int8' runs by the onnx graph: it needs query_runtime and "
                            "bulk_runtime 'onnx' and precision 'float32'")


def load_query_model(c: EmbeddingConfig, expected_sha256: str) -> Any:
    """The encoder of queries (and other calls of a few texts) without torch, when the config asks for one and
    the model is one it computes exactly (float32, BERT, mean pooling, normalized); None otherwise (torch is
    loaded instead). ``onnx``: onnxruntime over a graph written from the weights (~5 ms per query here);
    ``numpy``: the same forward pass in numpy (~14 ms: its small products repack every weight matrix)."""
    check_runtimes(c)
    if c.query_runtime == "torch" or c.precision != "float32":
        return None
    path, bundled = resolve_model_dir(c)
    if not numpy_compatible(path):
        return None
    if bundled:
        verify_model_dir(path, expected_sha256)
    if c.query_runtime == "onnx":
        from ctxbench.retrieval.minilm_calibration import shipped_ranges
        from ctxbench.retrieval.minilm_onnx import OnnxMiniLM

        # both sessions made here, in the loader thread: a session made in a background thread after the model
        # was ready was still being built when a one-shot command exited, and onnxruntime aborted the process
        return OnnxMiniLM(path, threads=query_thread_count(c.query_threads), query_int8=query_int8(c),
                          stored_int8=bulk_int8(c), stored_ranges=shipped_ranges if bulk_calibrated(c) else None,
                          calibrated_batch_size=c.calibrated_batch_size)
    from ctxbench.retrieval.minilm_numpy import NumpyMiniLM

    return NumpyMiniLM(path)


def offline_environment() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def sentence_transformer(path: Path, c: EmbeddingConfig) -> tuple[Any, int]:
    """Import sentence-transformers (offline) and build the model from a verified local directory with the
    configured truncation, threads and precision: (the model, its vectors' dimension)."""
    offline_environment()
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # the "Loading weights" bar would land on the user's terminal

    if c.threads > 0:
        torch.set_num_threads(c.threads)
    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    model.max_seq_length = c.max_seq_length
    if c.precision == "qint8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    elif c.precision != "float32":
        raise EmbedderError(f"embedding.precision {c.precision!r}: expected float32 or qint8")
    dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return model, int(dimension() or 0)


def query_thread_count(wanted: int) -> int:
    """onnxruntime's intra-op threads for ``embedding.query_threads``: at most the machine's cores (0 stays 0:
    onnxruntime's own default)."""
    if wanted <= 0:
        return 0
    return max(1, min(wanted, os.cpu_count() or 1))


def limit_blas_threads(threads: int) -> None:
    """Hold numpy's BLAS to ``threads`` threads (0: leave it), as ``embedding.threads`` holds torch's: the numpy
    query encoder's small products with two BLAS threads took 650 ms per query with the other core busy, against
    36 ms with one (measured at load average 6); the planner's array work is single-threaded anyway. Without
    threadpoolctl (installed with sentence-transformers) nothing changes."""
    if threads <= 0:
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=threads, user_api="blas")
