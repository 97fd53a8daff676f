"""Fixtures shared by several test files."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def real_embedder():
    """The bundled all-MiniLM-L6-v2, loaded once per test session (tests using it are marked ``model``)."""
    from ctxbench.config import EmbeddingConfig
    from ctxbench.retrieval.embedder import Embedder

    emb = Embedder(EmbeddingConfig())
    assert emb.wait(timeout=600), emb.error
    return emb


@pytest.fixture
def wb(tmp_path):
    """A workbench on a fresh database file with the default config (a test file may define its own)."""
    from ctxbench.config import Config
    from ctxbench.service.workbench import Workbench

    with Workbench(tmp_path / "ctx.db", Config()) as workbench:
        yield workbench
