#!/usr/bin/env python3
"""The check behind ``[retrieval] cluster_threshold``: five short conversations written before any threshold
was tried (each a topic; a user's follow-ups), asked one after another with the bundled MiniLM.

Prints each follow-up's cosine to its conversation's centroid so far ("within"), each conversation's first
question's cosine to the centroid of every other conversation ("across"), and the cluster ids
``retrieval.query_clusters.assign_all`` gives the 14 questions in order at a few thresholds (the intended
answer: 1 1 1 1 2 2 2 3 3 3 4 4 5 5).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/query_clusters_check.py
"""
from __future__ import annotations

import numpy as np

from ctxbench.config import Config
from ctxbench.retrieval.embedder import Embedder
from ctxbench.retrieval.query_clusters import assign_all

CONVERSATIONS = [
    ["how does the DataTable sort its rows?", "can it sort by two columns at once?",
     "why is sorting slow with 10k rows", "what key function does sort_rows use"],
    ["how do I push a new screen?", "what happens to the old screen when I push one",
     "how do I pop back to the previous screen and get a result"],
    ["where is CSS parsed?", "how are selectors matched against widgets",
     "why does my style not apply to a nested widget"],
    ["thanks, that works", "ok"],
    ["how does the worker API cancel a thread worker", "is exclusive=True cancelling the older worker"],
]
THRESHOLDS = (0.2, 0.25, 0.3, 0.35, 0.4)


def main() -> None:
    config = Config()
    embedder = Embedder(config.embedding)
    embedder.wait()
    vectors = [embedder.encode(c, max_seq_length=config.embedding.query_max_seq_length) for c in CONVERSATIONS]
    within = [float(np.dot(v[:i].mean(0), v[i]) / np.linalg.norm(v[:i].mean(0)))
              for v in vectors for i in range(1, len(v))]
    across = [float(np.dot(a.mean(0), b[0]) / np.linalg.norm(a.mean(0)))
              for n, a in enumerate(vectors) for m, b in enumerate(vectors) if n != m]
    print("within", " ".join(f"{x:.2f}" for x in sorted(within)))
    print("across", " ".join(f"{x:.2f}" for x in sorted(across)))
    flat = [q for v in vectors for q in v]
    for threshold in THRESHOLDS:
        print(f"threshold {threshold:.2f}:", " ".join(str(a.cluster.id) for a in assign_all(flat, threshold)))


if __name__ == "__main__":
    main()
