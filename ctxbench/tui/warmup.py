"""Index the repository and plug code retrieval into the session, off the UI thread.

Runs in a worker: (1) the incremental code index (``build_index``), (2) keyword, name and graph
retrieval plugged into the Workbench's ``retriever`` seam — plans get cards from here on —
(3) the embedding model warming in its own thread, then the vector index, after which plans
use semantic search too. Progress goes through ``status(slot, text, progress, state)``; slots
are ``index`` and ``embedder``. Indexing and retrieval use a connection of their own, so the
session's plans never queue behind a long write.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from ctxbench.tui.bridge import Bridge

Status = Callable[..., None]  # (slot, text, progress, state="busy")

RETRIEVAL_CACHE_SIZE = 32  # retrieval sets kept per session: mode cycling on one query reuses them


class CachingRetriever:
    """Remembers the last retrieval sets by (query, mode, semantic on?): cycling the Context Mode on the
    same turn replans without searching again. A new index means a new CachingRetriever."""

    def __init__(self, inner: Any, size: int = RETRIEVAL_CACHE_SIZE) -> None:
        from collections import OrderedDict

        self.inner = inner
        self.size = size
        self._cache: "OrderedDict[tuple, Any]" = OrderedDict()

    @property
    def semantic_ready(self) -> bool:
        return bool(getattr(self.inner, "semantic_ready", False))

    @property
    def retriever(self) -> Any:
        return getattr(self.inner, "retriever", self.inner)

    def retrieve(self, query: str, *, mode: str, **context: Any) -> Any:
        from ctxbench.llm.wiring import context_key

        key = (query, mode, self.semantic_ready, context_key(context))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        result = self.inner.retrieve(query, mode=mode, **context)
        self._cache[key] = result
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return result


def prepare_retrieval(bridge: "Bridge", status: Status, *, on_keyword_ready: Callable[[], None] | None = None,
                      warm_embedder: bool = True) -> bool:
    """Build or refresh the index of the session's repository and set ``workbench.retriever``."""
    wb = bridge.wb
    repo = wb.repo
    if repo is None or not bridge.options.index_repo:
        return False
    try:
        from ctxbench.codegraph.index import build_index, load_index
        from ctxbench.llm.wiring import IndexCodeContext, ModeRetriever
        from ctxbench.retrieval.retriever import Retriever, view_of
        from ctxbench.store.db import connect
    except ImportError as exc:
        status("index", f"code retrieval unavailable: {exc}", None, "error")
        return False

    config = bridge.config
    conn = connect(wb.db_path)

    def progress(phase: str, done: int, total: int) -> None:
        status("index", f"indexing: {phase}", (done / total) if total else None)

    status("index", "indexing…", None)
    result = build_index(repo, conn, config, progress=progress)
    index = load_index(repo, conn, config)
    retriever = Retriever(conn, repo, config, index=view_of(index, config, wb.tokenizer))
    retriever.prepare()  # keyword index
    with bridge.lock:
        wb.retriever = CachingRetriever(ModeRetriever(retriever, config))
        bridge.code_context = IndexCodeContext(index, config)
        bridge.retrieval_ready = True
    files = getattr(result, "files", 0)
    status("index", f"{files} files · {len(index.cards)} symbols", None, "ready")
    if on_keyword_ready is not None:
        on_keyword_ready()
    if not warm_embedder:
        return True
    return warm_semantic(bridge, retriever, status)


def make_embedder(config: Any) -> Any:
    """The embedder the workbench warms (a seam tests replace)."""
    from ctxbench.retrieval.embedder import Embedder

    return Embedder(config)


def warm_semantic(bridge: "Bridge", retriever: Any, status: Status) -> bool:
    """Load the embedding model (in its own thread) and build the vector index; True when semantic is on."""
    try:
        from ctxbench.retrieval.embedder import EmbedderError
    except ImportError as exc:
        status("embedder", f"no embedder: {exc}", None, "error")
        return True
    embedder = make_embedder(bridge.config.embedding)
    status("embedder", "embedder warming…", None)
    embedder.start_loading()
    try:
        ready = embedder.wait()
    except EmbedderError as exc:  # a failed load (bad weights, missing model): keyword + graph carry on
        status("embedder", f"semantic search off: {exc}", None, "error")
        return True
    if not ready:
        status("embedder", f"semantic search off: {getattr(embedder, 'error', None)}", None, "error")
        return True
    retriever.embedder = embedder

    def progress(done: int, total: int) -> None:
        status("embedder", "embedding", (done / total) if total else None)

    retriever.prepare(progress)
    bridge.semantic_ready = True
    status("embedder", "semantic ready", None, "ready")
    return True
