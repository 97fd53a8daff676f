"""The embedder's safety checks and laziness, and the hashing stand-in (no model load here)."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from ctxbench.config import EmbeddingConfig
from ctxbench.retrieval import embedder as embedder_mod
from ctxbench.retrieval.embedder import (
    BUNDLED_MODEL_SHA256,
    Embedder,
    EmbedderError,
    HashingEmbedder,
    bundled_model_path,
    file_sha256,
    verify_model_dir,
)


@pytest.fixture
def fake_model(tmp_path):
    """A copy of the bundled model's small files with weights that are not the real ones."""
    src = bundled_model_path()
    dst = tmp_path / "model"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
    (dst / "model.safetensors").write_bytes(b"not the weights you are looking for")
    return dst


def test_bundled_weights_have_the_known_hash():
    weights = bundled_model_path() / "model.safetensors"
    assert file_sha256(weights) == BUNDLED_MODEL_SHA256
    verify_model_dir(bundled_model_path())  # does not raise


def test_file_sha256(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc" * 1_000_000)
    assert file_sha256(p) == hashlib.sha256(b"abc" * 1_000_000).hexdigest()


def test_tampered_bundled_weights_are_refused_before_loading(fake_model, monkeypatch):
    monkeypatch.setattr(embedder_mod, "bundled_model_path", lambda: fake_model)
    loaded = []
    monkeypatch.setattr(Embedder, "_construct", lambda self, path: loaded.append(path))
    emb = Embedder(EmbeddingConfig())
    with pytest.raises(EmbedderError, match="sha256"):
        emb.wait(timeout=60)
    assert not emb.ready and isinstance(emb.error, EmbedderError)
    assert loaded == []
    with pytest.raises(EmbedderError):
        emb.encode(["x"])


def test_verify_model_dir_missing_weights(tmp_path):
    with pytest.raises(EmbedderError, match="not found"):
        verify_model_dir(tmp_path)


def test_configured_model_path_must_exist_locally(tmp_path):
    emb = Embedder(EmbeddingConfig(model_path=str(tmp_path / "nowhere")))
    with pytest.raises(EmbedderError, match="not a local directory"):
        emb.wait(timeout=60)


def test_configured_model_skips_the_bundled_hash_check(fake_model):
    """A user's own model is not the bundled one: no sha256 refusal (this fake then fails to load, clearly)."""
    emb = Embedder(EmbeddingConfig(model_path=str(fake_model)))
    with pytest.raises(EmbedderError) as info:
        emb.wait(timeout=120)
    assert "sha256" not in str(info.value)
    assert "failed to load" in str(info.value)


def test_key_names_what_shapes_a_vector():
    a = Embedder(EmbeddingConfig()).key
    assert a != Embedder(EmbeddingConfig(max_seq_length=32)).key
    assert a != Embedder(EmbeddingConfig(precision="qint8")).key
    assert a != Embedder(EmbeddingConfig(model_path="/x/y")).key


def test_importing_retrieval_does_not_import_torch_or_sentence_transformers():
    code = ("import sys, ctxbench.retrieval.embedder, ctxbench.retrieval.retriever, ctxbench.retrieval.vectors, "
            "ctxbench.retrieval.keyword\n"
            "bad = [m for m in ('sentence_transformers', 'torch', 'transformers') if m in sys.modules]\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_hashing_embedder_is_deterministic_and_normalized():
    emb = HashingEmbedder(dimension=64)
    a = emb.encode(["render a table line", "fetch a url", ""])
    b = emb.encode(["render a table line", "fetch a url", ""])
    assert a.dtype == np.float32 and a.shape == (3, 64)
    assert np.array_equal(a, b)
    assert np.linalg.norm(a[0]) == pytest.approx(1.0) and np.linalg.norm(a[2]) == 0.0
    same_words = emb.encode(["TableRenderer render_line"])[0]
    assert float(same_words @ emb.encode(["table renderer render line"])[0]) == pytest.approx(1.0)
    assert emb.ready and emb.wait() and emb.key == "hashing-64"
