"""Index the repository and plug code retrieval into the session, off the UI thread.

Reports progress through ``status(slot, text, progress)``; slots are ``index`` and
``embedder``. Plans are keyword-only until the embedder is warm.
"""
from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pragma: no cover
    from ctxbench.tui.bridge import Bridge

Status = Callable[[str, str, "float | None"], None]


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def prepare_retrieval(bridge: "Bridge", status: Status) -> bool:
    """Build or refresh the index of the session's repository and set ``workbench.retriever``."""
    repo = bridge.wb.repo
    if repo is None or not bridge.options.index_repo:
        return False
    if not (_available("ctxbench.codegraph.index") and _available("ctxbench.retrieval.retriever")):
        status("index", "code retrieval not installed", None)
        return False
    status("index", "code retrieval pending integration", None)
    return False
