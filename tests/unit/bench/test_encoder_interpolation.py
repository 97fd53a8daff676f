"""Weight-space interpolation of the fine-tuned encoder with its base (training/interpolate.py, never the product)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from training import interpolate as wise


def _weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "embeddings.word_embeddings.weight": rng.standard_normal((50, 8)).astype(np.float32),
        "encoder.layer.0.attention.self.query.weight": rng.standard_normal((8, 8)).astype(np.float32),
        "encoder.layer.0.attention.self.query.bias": rng.standard_normal(8).astype(np.float32),
        "embeddings.LayerNorm.weight": (1 + rng.standard_normal(8)).astype(np.float32),
    }


def _bitwise_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)


def test_interpolation_at_alpha_0_gives_the_base_weights_exactly():
    base, tuned = _weights(1), _weights(2)
    assert _bitwise_equal(wise.interpolate(base, tuned, 0.0), base)
    base["embeddings.position_ids"] = np.arange(12, dtype=np.int64)[None, :]  # an index buffer is no weight
    mixed = wise.interpolate(base, tuned, 0.0)
    assert _bitwise_equal(mixed, {k: v for k, v in base.items() if k != "embeddings.position_ids"})


def test_interpolation_at_alpha_1_gives_the_tuned_weights_exactly():
    base, tuned = _weights(1), _weights(2)
    assert _bitwise_equal(wise.interpolate(base, tuned, 1.0), tuned)


def test_interpolation_weighs_the_tuned_weights_by_alpha():
    base, tuned = _weights(1), _weights(2)
    mixed = wise.interpolate(base, tuned, 0.3)
    for name in base:
        assert mixed[name].dtype == np.float32 and mixed[name].shape == base[name].shape
        expected = 0.7 * base[name].astype(np.float64) + 0.3 * tuned[name].astype(np.float64)
        assert np.allclose(mixed[name], expected, rtol=0, atol=1e-6), name
        assert not np.array_equal(mixed[name], base[name]) and not np.array_equal(mixed[name], tuned[name])


def test_an_index_buffer_only_the_base_holds_is_left_out():
    # the installed all-MiniLM-L6-v2 saves embeddings.position_ids (int64); a sentence-transformers save of the
    # fine-tune does not, and the output folder is the fine-tune's with other weights (transformers rebuilds the buffer)
    base, tuned = _weights(1), _weights(2)
    base["embeddings.position_ids"] = np.arange(12, dtype=np.int64)[None, :]
    for alpha in (0.0, 0.5, 1.0):
        mixed = wise.interpolate(base, tuned, alpha)
        assert mixed.keys() == tuned.keys()


def test_an_index_buffer_both_hold_alike_is_kept_as_it_is():
    base, tuned = _weights(1), _weights(2)
    base["embeddings.position_ids"] = np.arange(12, dtype=np.int64)[None, :]
    tuned["embeddings.position_ids"] = np.arange(12, dtype=np.int64)[None, :]
    mixed = wise.interpolate(base, tuned, 0.5)
    assert mixed["embeddings.position_ids"].dtype == np.int64
    assert np.array_equal(mixed["embeddings.position_ids"], base["embeddings.position_ids"])


def test_integer_buffers_that_differ_are_refused():
    base, tuned = _weights(1), _weights(2)
    base["embeddings.position_ids"] = np.arange(12, dtype=np.int64)[None, :]
    tuned["embeddings.position_ids"] = np.arange(1, 13, dtype=np.int64)[None, :]
    with pytest.raises(wise.CheckpointMismatch, match="embeddings.position_ids"):
        wise.interpolate(base, tuned, 0.5)


def test_checkpoints_with_different_weights_are_refused_naming_them():
    base, tuned = _weights(1), _weights(2)
    del tuned["encoder.layer.0.attention.self.query.bias"]
    tuned["bert.pooler.dense.weight"] = np.zeros((8, 8), dtype=np.float32)
    with pytest.raises(wise.CheckpointMismatch) as caught:
        wise.interpolate(base, tuned, 0.5)
    message = str(caught.value)
    assert "encoder.layer.0.attention.self.query.bias" in message and "bert.pooler.dense.weight" in message
    assert "\n" not in message


def test_checkpoints_with_different_shapes_are_refused_naming_the_tensor():
    base, tuned = _weights(1), _weights(2)
    tuned["embeddings.word_embeddings.weight"] = np.zeros((51, 8), dtype=np.float32)
    with pytest.raises(wise.CheckpointMismatch, match=r"embeddings\.word_embeddings\.weight.*\(50, 8\).*\(51, 8\)"):
        wise.interpolate(base, tuned, 0.5)


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_an_alpha_outside_0_to_1_is_refused(alpha):
    with pytest.raises(wise.CheckpointMismatch, match="alpha"):
        wise.interpolate(_weights(1), _weights(2), alpha)


def _folder(path, tensors, extra=None):
    path.mkdir(parents=True)
    save_file(tensors, str(path / "model.safetensors"))
    (path / "modules.json").write_text("[]", encoding="utf-8")
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text("{}", encoding="utf-8")
    for name, text in (extra or {}).items():
        (path / name).write_text(text, encoding="utf-8")
    return path


def test_the_command_writes_a_model_folder_with_the_tuned_ones_files_and_its_provenance(tmp_path):
    base = _folder(tmp_path / "base", _weights(1))
    tuned = _folder(tmp_path / "tuned", _weights(2), {"README.md": "card", "tokenizer.json": "{}"})
    out = tmp_path / "out"
    assert wise.main(["--base", str(base), "--tuned", str(tuned), "--alpha", "0.5", "--out", str(out)]) == 0
    written = load_file(str(out / "model.safetensors"))
    assert _bitwise_equal(written, wise.interpolate(_weights(1), _weights(2), 0.5))
    assert (out / "tokenizer.json").is_file() and (out / "1_Pooling" / "config.json").is_file()
    assert not (out / "README.md").exists()
    record = json.loads((out / wise.PROVENANCE).read_text(encoding="utf-8"))
    assert record["alpha"] == 0.5
    assert record["base"]["sha256"] == wise.file_sha256(base / "model.safetensors")
    assert record["tuned"]["sha256"] == wise.file_sha256(tuned / "model.safetensors")


def test_the_command_refuses_mismatched_checkpoints_in_one_line(tmp_path, capsys):
    base = _folder(tmp_path / "base", _weights(1))
    other = _weights(2)
    other["embeddings.word_embeddings.weight"] = np.zeros((51, 8), dtype=np.float32)
    tuned = _folder(tmp_path / "tuned", other)
    with pytest.raises(SystemExit) as caught:
        wise.main(["--base", str(base), "--tuned", str(tuned), "--alpha", "0.5", "--out", str(tmp_path / "out")])
    assert "embeddings.word_embeddings.weight" in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_the_command_refuses_a_folder_without_weights(tmp_path):
    base = _folder(tmp_path / "base", _weights(1))
    with pytest.raises(SystemExit, match="model.safetensors"):
        wise.main(["--base", str(base), "--tuned", str(tmp_path / "nowhere"), "--alpha", "0.5",
                   "--out", str(tmp_path / "out")])


def test_packing_refuses_an_index_buffer_instead_of_rounding_it_to_int8(tmp_path, monkeypatch):
    from training import pack

    monkeypatch.setattr(pack, "MODELS_DIR", tmp_path / "models")
    tensors = _weights(1)
    tensors["embeddings.position_ids"] = np.arange(512, dtype=np.int64)[None, :]
    folder = _folder(tmp_path / "model", tensors)
    with pytest.raises(SystemExit) as caught:
        pack.main(["--model", str(folder), "--name", "probe"])
    assert "embeddings.position_ids" in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "models" / "probe").exists()
    del tensors["embeddings.position_ids"]
    folder = _folder(tmp_path / "model2", tensors)
    assert pack.main(["--model", str(folder), "--name", "probe"]) == 0
    assert (tmp_path / "models" / "probe" / "model.int8.safetensors").is_file()
