"""Card vectors: what text of a card is embedded, the vector cache, and the FAISS index.

Vectors are cached in SQLite keyed by (card hash, embedder key): an unchanged card is never
embedded twice, and changing the model, its sequence length or precision re-embeds instead of
mixing vectors. The FAISS index (inner product over unit vectors = cosine) is saved beside the
database as ``<db stem>.<repo key>.faiss`` and rebuilt when the set of cards changes. Below
``EmbeddingConfig.flat_index_max`` vectors it is exact (``IndexFlatIP``); above, HNSW.
"""
from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from ctxbench.records.code import SymbolCard
from ctxbench.config import EmbeddingConfig
from ctxbench.store.vectors import (database_file, index_row, load_vectors, prune_card_vectors, save_index_row,
                                    save_vectors)

# Bump when embed_text changes: cached vectors of the old text are then not reused.
EMBED_TEXT_VERSION = "t1"

Progress = Callable[[int, int], None]
SAVE_EVERY = EmbeddingConfig().save_every  # for embedders without an EmbeddingConfig (tests' small ones)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
NON_WORD = re.compile(r"[^A-Za-z0-9]+")


def split_identifier(text: str) -> list[str]:
    """``_render_line`` -> [render, line]; ``TableRenderer.add_row`` -> [table, renderer, add, row]."""
    words: list[str] = []
    for token in NON_WORD.split(text):
        if token:
            words.extend(p.lower() for p in _CAMEL.split(token) if p)
    return words


def _first_sentence(doc: str) -> str:
    doc = " ".join(doc.split())
    cut = doc.find(". ")
    return doc[: cut + 1] if cut >= 0 else doc


def embed_text(card: SymbolCard) -> str:
    """The compact text embedded for a card: the symbol id as words, its kind, signature and doc's first sentence.

    Not the snippet: a short text embeds several times faster and the id, signature and doc
    carry most of what a developer's question matches (see benchmarks/README.md).
    """
    words = " ".join(split_identifier(card.symbol_id))
    parts = [f"{words} ({card.kind})"]
    if card.signature:
        parts.append(" ".join(card.signature.split()))
    if card.doc:
        parts.append(_first_sentence(card.doc))
    return ". ".join(parts)


def model_key(embedder_key: str) -> str:
    return f"{embedder_key}|{EMBED_TEXT_VERSION}"


@dataclass(frozen=True)
class EmbedStats:
    embedded: int
    reused: int
    seconds: float
    removed: int = 0  # cached vectors of cards that no longer exist, deleted after this run

    @property
    def cards_per_second(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0


def embed_cards(cards: Sequence[SymbolCard], conn: sqlite3.Connection, embedder, progress: Progress | None = None
                ) -> EmbedStats:
    """Embed the cards whose hash has no cached vector for this embedder; reuse the rest."""
    return _card_vectors(cards, conn, embedder, progress)[1]


def _card_vectors(cards: Sequence[SymbolCard], conn: sqlite3.Connection, embedder, progress: Progress | None
                  ) -> tuple[dict[str, np.ndarray], EmbedStats]:
    """``embed_cards``, also returning card hash -> vector for every card (cached and new), so a caller
    building an index need not read the vectors it just wrote back from the database."""
    started = time.perf_counter()
    key = model_key(embedder.key)
    unique: dict[str, SymbolCard] = {}
    for card in cards:
        unique.setdefault(card.card_hash, card)
    found = load_vectors(conn, unique, key)
    todo = [card for h, card in unique.items() if h not in found]
    if progress is not None:
        progress(0, len(todo))
    # saved batch by batch: a run killed (or failing) midway keeps what it embedded, the next one reuses it
    step = max(1, int(getattr(getattr(embedder, "config", None), "save_every", 0) or SAVE_EVERY))
    for start in range(0, len(todo), step):
        batch = todo[start:start + step]

        def batch_progress(done: int, total: int, offset: int = start) -> None:
            if progress is not None:
                progress(offset + done, len(todo))

        vectors = embedder.encode([embed_text(c) for c in batch], progress=batch_progress)
        rows = [(c.card_hash, np.asarray(v, dtype=np.float32)) for c, v in zip(batch, vectors)]
        save_vectors(conn, rows, key)
        found.update(rows)
    removed = prune_card_vectors(conn)
    stats = EmbedStats(embedded=len(todo), reused=len(unique) - len(todo), seconds=time.perf_counter() - started,
                       removed=removed)
    return found, stats


def card_set_digest(cards: Iterable[SymbolCard], key: str) -> str:
    h = hashlib.sha256(key.encode())
    for sid, chash in sorted((c.symbol_id, c.card_hash) for c in cards):
        h.update(f"{sid}\x00{chash}\x01".encode())
    return h.hexdigest()[:24]


class VectorIndex:
    """A FAISS inner-product index over unit vectors, with the symbol id of each row."""

    def __init__(self, index, symbol_ids: Sequence[str], kind: str):
        self.index = index
        self.symbol_ids = tuple(symbol_ids)
        self.kind = kind  # flat | hnsw

    def __len__(self) -> int:
        return len(self.symbol_ids)

    def similarity(self, query: np.ndarray, symbol_id: str) -> float:
        """The cosine of one symbol's vector to a unit query vector (0 for a symbol not in the index)."""
        rows = self.__dict__.get("_rows")
        if rows is None:
            rows = self.__dict__["_rows"] = {sid: i for i, sid in enumerate(self.symbol_ids)}
            self.__dict__["_matrix"] = self.index.reconstruct_n(0, len(self.symbol_ids)) if self.symbol_ids else None
        row = rows.get(symbol_id)
        if row is None:
            return 0.0
        return float(self.__dict__["_matrix"][row] @ np.asarray(query, dtype=np.float32))

    def search(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest symbols to one unit query vector, with cosine similarities, best first."""
        if not self.symbol_ids or k <= 0:
            return []
        q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        scores, rows = self.index.search(q, min(k, len(self.symbol_ids)))
        return [(self.symbol_ids[r], float(s)) for s, r in zip(scores[0], rows[0]) if r >= 0]


def build_faiss(vectors: np.ndarray, config: EmbeddingConfig):
    """Exact flat index up to ``flat_index_max`` rows, HNSW above. Returns (index, kind)."""
    import faiss

    n, dim = vectors.shape if vectors.size else (0, 0)
    if n > config.flat_index_max:
        index = faiss.IndexHNSWFlat(int(dim), config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config.hnsw_ef_construction
        index.hnsw.efSearch = config.hnsw_ef_search
        kind = "hnsw"
    else:
        index = faiss.IndexFlatIP(int(dim) or 1)
        kind = "flat"
    if n:
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index, kind


def index_file(db_file: Path, repo_key: str, key: str) -> Path:
    tag = hashlib.sha256(f"{repo_key}\x00{key}".encode()).hexdigest()[:12]
    return db_file.with_name(f"{db_file.stem}.{tag}.faiss")


def index_is_current(conn: sqlite3.Connection, repo_key: str, cards: Sequence[SymbolCard], embedder_key: str) -> bool:
    """True when the saved FAISS index of ``repo_key`` holds exactly these cards for this embedder (then no
    card needs embedding and the index loads from its file)."""
    key = model_key(embedder_key)
    row = index_row(conn, repo_key, key)
    if row is None or database_file(conn) is None or not row.file.is_file():
        return False
    return row.card_set == card_set_digest({c.symbol_id: c for c in cards}.values(), key)


def load_or_build_index(conn: sqlite3.Connection, repo_key: str, cards: Sequence[SymbolCard], embedder,
                        config: EmbeddingConfig, progress: Progress | None = None) -> tuple[VectorIndex, EmbedStats]:
    """The FAISS index for ``cards``: read from its file when the card set is unchanged, else rebuilt.

    Cards without a cached vector are embedded first (this waits for the model).
    """
    import faiss

    key = model_key(embedder.key)
    ordered = sorted({c.symbol_id: c for c in cards}.values(), key=lambda c: c.symbol_id)
    ids = [c.symbol_id for c in ordered]
    digest = card_set_digest(ordered, key)
    db_file = database_file(conn)
    path = index_file(db_file, repo_key, key) if db_file is not None else None
    row = index_row(conn, repo_key, key)
    if path is not None and row is not None and row.card_set == digest and row.file.is_file():
        try:
            index = faiss.read_index(str(row.file))
        except RuntimeError:
            index = None
        if index is not None and index.ntotal == len(ids):
            return VectorIndex(index, ids, row.kind), EmbedStats(0, len(ids), 0.0)
    cached, stats = _card_vectors(ordered, conn, embedder, progress)
    matrix = np.vstack([cached[c.card_hash] for c in ordered]) if ordered else np.zeros((0, 0), np.float32)
    index, kind = build_faiss(matrix, config)
    if path is not None:
        tmp = path.with_suffix(".faiss.tmp")
        faiss.write_index(index, str(tmp))
        tmp.replace(path)
        save_index_row(conn, repo_key, key, digest, kind, len(ids), path)
    return VectorIndex(index, ids, kind), stats
