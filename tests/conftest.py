"""Fixtures shared by several test files."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

# Property tests check behaviour, never speed: on a loaded machine (CI, a laptop building something) generating
# inputs or running an example can take longer than hypothesis' wall-clock guards, which then fail a correct test.
settings.register_profile("ctxbench", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ctxbench")


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
