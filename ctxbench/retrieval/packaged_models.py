"""Encoders shipped inside ctxbench (``ctxbench/models/<name>/``), chosen by ``[embedding] model_name``.

A packaged model is a sentence-transformers folder whose ``model.safetensors`` is replaced by
``model.int8.safetensors``: every 2-D weight as int8 with one float32 scale per row (``<name>.__scale__``), every
other tensor as float32. Its sha256 is written in ``SHA256`` beside it and checked before anything is read; a
mismatch refuses to load. On first use the weights are expanded once to float32 into the user's data directory,
in a folder named by that sha256 (so two versions never share one), and from there every runtime loads the
folder as it loads the bundled MiniLM (onnx, numpy, sentence-transformers).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from ctxbench.records.errors import EmbedderError

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
PACKED_WEIGHTS = "model.int8.safetensors"
CHECKSUM_FILE = "SHA256"
SCALE_SUFFIX = ".__scale__"
EXPANDED_FOLDER = "models"  # under the user data directory


def packaged_names() -> list[str]:
    """The names of the encoders shipped in ``ctxbench/models`` (folders holding packed weights)."""
    if not MODELS_DIR.is_dir():
        return []
    return sorted(p.name for p in MODELS_DIR.iterdir() if (p / PACKED_WEIGHTS).is_file())


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read a MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def expected_sha256(folder: Path) -> str:
    """The sha256 the packed weights of ``folder`` must have (the first word of its ``SHA256`` file)."""
    try:
        return (folder / CHECKSUM_FILE).read_text(encoding="utf-8").split()[0]
    except (OSError, IndexError) as exc:
        raise EmbedderError(f"packaged model {folder.name!r} has no {CHECKSUM_FILE} file; refusing to load it") from exc


def verify_packed(folder: Path) -> str:
    """The packed weights' sha256 once it equals the expected one; ``EmbedderError`` otherwise."""
    weights = folder / PACKED_WEIGHTS
    if not weights.is_file():
        raise EmbedderError(f"packaged model weights not found: {weights}")
    expected = expected_sha256(folder)
    actual = file_sha256(weights)
    if actual != expected:
        raise EmbedderError(f"packaged model weights {weights} have sha256 {actual}, expected {expected}; "
                            "refusing to load them (reinstall ctxbench)")
    return actual


def quantize_rows(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per row: ``weight ≈ q * scale[:, None]`` with ``q`` in [-127, 127]."""
    peak = np.abs(weight).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def pack(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The packed form of float32 ``tensors``: 2-D ones as int8 rows plus scales, the rest unchanged."""
    out: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        value = np.asarray(value, dtype=np.float32)
        if value.ndim == 2:
            out[name], out[name + SCALE_SUFFIX] = quantize_rows(value)
        else:
            out[name] = value
    return out


def unpack(packed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float32 tensors from their packed form (the inverse of ``pack`` up to int8 rounding)."""
    out: dict[str, np.ndarray] = {}
    for name, value in packed.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = packed.get(name + SCALE_SUFFIX)
        if scale is not None:
            out[name] = (value.astype(np.float32) * scale[:, None]).astype(np.float32)
        else:
            out[name] = value.astype(np.float32)
    return out


def copy_model_files(source: Path, target: Path, leave_out: Callable[[str], bool]) -> None:
    """Copy a model folder's files and folders (the tokenizer, sentence-transformers' modules) into ``target``, but
    those whose name ``leave_out`` names (the weights a caller writes itself)."""
    for item in sorted(source.iterdir()):
        if leave_out(item.name):
            continue
        if item.is_dir():
            shutil.copytree(item, target / item.name, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target / item.name)


def expanded_dir(name: str, data_dir: Path | None = None) -> Path:
    """The float32 folder of packaged model ``name``, expanded now if it is not yet (checksum verified first)."""
    folder = MODELS_DIR / name
    if not (folder / PACKED_WEIGHTS).is_file():
        known = ", ".join(packaged_names()) or "none"
        raise EmbedderError(f"embedding.model_name {name!r} is not a packaged model (packaged: {known}); "
                            "set embedding.model_path to a local sentence-transformers folder for another model")
    sha = verify_packed(folder)
    if data_dir is None:
        import platformdirs

        data_dir = Path(platformdirs.user_data_dir("ctxbench"))
    target = data_dir / EXPANDED_FOLDER / f"{name}-{sha[:16]}"
    if (target / "model.safetensors").is_file():
        return target
    from safetensors.numpy import load_file, save_file

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        copy_model_files(folder, staging, lambda name: name in (PACKED_WEIGHTS, CHECKSUM_FILE) or name.startswith("__"))
        save_file(unpack(load_file(str(folder / PACKED_WEIGHTS))), str(staging / "model.safetensors"))
        try:
            os.replace(staging, target)
        except OSError:  # another process expanded it first: theirs is the same bytes
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
