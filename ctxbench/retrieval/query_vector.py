"""A query's vector from any embedder: the one function every search and plan encodes its question with.

``Embedder.encode_query`` runs a query by the query graph (int8 by default, ``[embedding] query_precision``);
an embedder without one (a test's deterministic embedder) encodes it as any text."""
from __future__ import annotations

from typing import Any


def query_key(embedder: Any) -> str:
    """What shapes ``embedder``'s query vectors (``Embedder.query_key``; an embedder without one: its ``key``)."""
    return str(getattr(embedder, "query_key", None) or getattr(embedder, "key", ""))


def encode_query(embedder: Any, text: str, max_seq_length: int | None = None) -> Any:
    """``text``'s unit-length vector as a query: ``embedder.encode_query`` when it has one, else its ``encode``."""
    method = getattr(embedder, "encode_query", None)
    if method is not None:
        return method(text, max_seq_length=max_seq_length)
    return embedder.encode([text], max_seq_length=max_seq_length)[0]
