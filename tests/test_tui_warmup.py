"""Warm-up of the embedding model in the workbench: a failed load is reported in the embedder's slot."""
from types import SimpleNamespace

from ctxbench.config import Config
from ctxbench.retrieval.embedder import EmbedderError
from ctxbench.tui import warmup


class _BrokenEmbedder:
    ready = False
    error = None

    def start_loading(self):
        pass

    def wait(self, timeout=None):
        raise EmbedderError("bundled model.safetensors sha256 mismatch")


def test_failed_model_load_turns_semantic_off_in_the_embedder_slot(monkeypatch):
    monkeypatch.setattr(warmup, "make_embedder", lambda config: _BrokenEmbedder())
    seen = []
    retriever = SimpleNamespace(embedder=None)
    bridge = SimpleNamespace(config=Config(), semantic_ready=False)
    result = warmup.warm_semantic(bridge, retriever, lambda slot, text, frac, state=None: seen.append((slot, text, state)))
    assert result is True
    assert retriever.embedder is None
    assert bridge.semantic_ready is False
    assert seen[-1][0] == "embedder"
    assert seen[-1][2] == "error"
    assert "sha256 mismatch" in seen[-1][1]
