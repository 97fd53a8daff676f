"""Pack a trained encoder folder into ``ctxbench/models/<name>/``: int8 rows + scales, its sha256, the small files.

    python -m training.pack --model training/out/full/model --name code-minilm

What ships is what ``ctxbench.retrieval.packaged_models`` loads: ``model.int8.safetensors`` (every 2-D weight as int8
with a float32 scale per row, the rest float32), ``SHA256`` (checked at load), and the tokenizer and
sentence-transformers configuration files copied as they are. The model card (``MODEL_CARD.md``) is kept if the
folder has one. Prints the packed size and the largest difference the int8 rounding makes to a weight.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ctxbench.retrieval.packaged_models import (CHECKSUM_FILE, MODELS_DIR, PACKED_WEIGHTS, copy_model_files,
                                                file_sha256, pack, unpack)

LEFT_OUT = {"model.safetensors", "README.md", "checkpoint.pt"}  # the weights ship packed; the card is ours


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a sentence-transformers folder (training's output)")
    parser.add_argument("--name", default="code-minilm", help="the packaged model's name (its folder under ctxbench/models)")
    args = parser.parse_args(argv)
    from safetensors.numpy import load_file, save_file

    source = args.model / "model.safetensors"
    if not source.is_file():
        parser.error(f"{source} not found: --model must be a folder written by training.train")
    tensors = load_file(str(source))
    buffers = sorted(k for k, v in tensors.items() if not np.issubdtype(v.dtype, np.floating))
    if buffers:  # an index buffer (position_ids, 0..511) packed as int8 rows would be rounded by up to 2
        raise SystemExit(f"error: {source} holds non-float tensors ({', '.join(buffers)}): only weights are packed; "
                         "save the model without them (training.interpolate leaves them out)")
    packed = pack(tensors)
    back = unpack(packed)
    worst = max(float(np.abs(back[k] - tensors[k].astype(np.float32)).max()) for k in tensors)

    target = MODELS_DIR / args.name
    target.mkdir(parents=True, exist_ok=True)
    copy_model_files(args.model, target, LEFT_OUT.__contains__)  # the tokenizer and module files, as saved
    weights = target / PACKED_WEIGHTS
    save_file(packed, str(weights), metadata={"format": "ctxbench-int8-rows"})
    sha = file_sha256(weights)
    (target / CHECKSUM_FILE).write_text(f"{sha}  {PACKED_WEIGHTS}\n", encoding="utf-8")
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"{target}: {size / 1e6:.1f} MB in all, weights {weights.stat().st_size / 1e6:.1f} MB, sha256 {sha}, "
          f"largest weight change from int8 rounding {worst:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
