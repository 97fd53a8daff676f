"""Precision and recall of the standing-instruction detector on benchmarks/instructions.jsonl.

    PYTHONPATH=. python benchmarks/instruction_bench.py --split tune      # tuning: figures and every miss
    PYTHONPATH=. python benchmarks/instruction_bench.py --split heldout   # the held-out third: figures only

Both by cues alone (what a plan decides) and by cues and meaning (the embedder's vectors against the
prototype sentences: what compaction decides when the embedder is ready).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def figures(truth: list[bool], said: list[bool]) -> tuple[float, float, int, int, int]:
    tp = sum(1 for t, s in zip(truth, said) if t and s)
    fp = sum(1 for t, s in zip(truth, said) if s and not t)
    fn = sum(1 for t, s in zip(truth, said) if t and not s)
    return tp / max(tp + fp, 1), tp / max(tp + fn, 1), tp, fp, fn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("tune", "heldout"), default="tune")
    parser.add_argument("--set", type=Path, default=HERE / "instructions.jsonl")
    parser.add_argument("--no-embedder", action="store_true", help="cues only")
    args = parser.parse_args()
    from ctxbench.config import Config
    from ctxbench.planner.instructions import judge_all

    config = Config()
    rows = [json.loads(line) for line in args.set.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r["split"] == args.split]
    texts = [r["text"] for r in rows]
    truth = [bool(r["instruction"]) for r in rows]
    runs = [("cues", None)]
    if not args.no_embedder:
        from ctxbench.service.attach import load_embedder

        embedder = load_embedder(config)
        runs.append(("cues+meaning", lambda texts: embedder.encode(list(texts)).tolist()))
    print(f"{args.set.name}, split {args.split}: {len(rows)} messages, {sum(truth)} instructions")
    for name, encode in runs:
        verdicts = judge_all(texts, [()] * len(texts), config.planner.instructions, encode)
        p, r, tp, fp, fn = figures(truth, [v.instruction for v in verdicts])
        print(f"{name:<14} precision {p:.3f}  recall {r:.3f}  (tp {tp}, fp {fp}, fn {fn})")
        if args.split == "tune":
            for row, v in zip(rows, verdicts):
                if v.instruction != row["instruction"]:
                    print(f"   {'FN' if row['instruction'] else 'FP'} {v.describe()}: {row['text']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
