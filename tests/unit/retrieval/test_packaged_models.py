"""Encoders shipped inside ctxbench: packed as int8 rows, checked by sha256 before loading, expanded once, and
their vectors keyed by the weights they came from."""
from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import save_file

from ctxbench.config import EmbeddingConfig
from ctxbench.records.errors import EmbedderError
from ctxbench.retrieval import packaged_models as pm
from ctxbench.retrieval.model_dir import file_sha256
from ctxbench.retrieval.embedder import Embedder
from ctxbench.retrieval.model_dir import resolve_model_dir


def _tensors(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"layer.weight": rng.normal(0, 0.05, (16, 8)).astype(np.float32),
            "layer.bias": rng.normal(0, 0.05, (16,)).astype(np.float32)}


def _ship(models_dir, name: str, tensors: dict[str, np.ndarray]) -> None:
    folder = models_dir / name
    folder.mkdir(parents=True)
    save_file(pm.pack(tensors), str(folder / pm.PACKED_WEIGHTS))
    (folder / pm.CHECKSUM_FILE).write_text(file_sha256(folder / pm.PACKED_WEIGHTS) + "  x\n")
    (folder / "config.json").write_text("{}")


def test_packing_keeps_every_weight_within_half_a_step_of_its_row_scale():
    tensors = _tensors()
    packed = pm.pack(tensors)
    assert packed["layer.weight"].dtype == np.int8 and packed["layer.bias"].dtype == np.float32
    back = pm.unpack(packed)
    step = packed["layer.weight" + pm.SCALE_SUFFIX][:, None]
    assert np.all(np.abs(back["layer.weight"] - tensors["layer.weight"]) <= step / 2 + 1e-7)
    assert np.array_equal(back["layer.bias"], tensors["layer.bias"])
    assert set(back) == set(tensors)


def test_a_packaged_model_is_expanded_once_and_loads_from_its_float32_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(pm, "MODELS_DIR", tmp_path / "models")
    _ship(tmp_path / "models", "tiny", _tensors())
    first = pm.expanded_dir("tiny", data_dir=tmp_path / "data")
    assert (first / "model.safetensors").is_file() and (first / "config.json").is_file()
    assert not (first / pm.PACKED_WEIGHTS).exists()
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert pm.expanded_dir("tiny", data_dir=tmp_path / "data") == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp


def test_packed_weights_that_do_not_match_their_checksum_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(pm, "MODELS_DIR", tmp_path / "models")
    _ship(tmp_path / "models", "tiny", _tensors())
    weights = tmp_path / "models" / "tiny" / pm.PACKED_WEIGHTS
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(EmbedderError, match="refusing to load"):
        pm.expanded_dir("tiny", data_dir=tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_an_unknown_model_name_says_which_models_are_packaged(tmp_path, monkeypatch):
    monkeypatch.setattr(pm, "MODELS_DIR", tmp_path / "models")
    _ship(tmp_path / "models", "tiny", _tensors())
    with pytest.raises(EmbedderError, match=r"'nope' is not a packaged model \(packaged: tiny\)"):
        resolve_model_dir(EmbeddingConfig(model_name="nope"))


def test_vectors_are_keyed_by_the_weights_so_retrained_weights_are_never_mixed(tmp_path, monkeypatch):
    monkeypatch.setattr(pm, "MODELS_DIR", tmp_path / "models")
    _ship(tmp_path / "models", "one", _tensors(1))
    _ship(tmp_path / "models", "two", _tensors(2))
    folder = tmp_path / "local"
    folder.mkdir()
    save_file(_tensors(3), str(folder / "model.safetensors"))
    keys = {Embedder(EmbeddingConfig(model_name="one")).key, Embedder(EmbeddingConfig(model_name="two")).key}
    before = Embedder(EmbeddingConfig(model_path=str(folder))).key
    save_file(_tensors(4), str(folder / "model.safetensors"))  # retrained in the same folder
    after = Embedder(EmbeddingConfig(model_path=str(folder))).key
    assert len(keys) == 2 and before != after
    assert Embedder(EmbeddingConfig(bulk_precision="float32")).key == "all-MiniLM-L6-v2|seq64|float32"
