#!/usr/bin/env python
"""cards/s of embed_cards on textual's cards, by bulk precision (embedding.bulk_precision; default float32 against
int8-calibrated), the precisions alternating in one process (twice each unless ROUNDS says), the vector table emptied
before each pass: the figures are from the same machine at the same time.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/bulk_precision_throughput.py [float32 int8-calibrated int8]
"""
import os, sys, time
from ctxbench.codegraph.index import build_index, load_index
from ctxbench.config import EmbeddingConfig
from ctxbench.retrieval.embedder import Embedder
from ctxbench.retrieval.vectors import embed_cards
from ctxbench.store.database import Database
import textual
precisions = sys.argv[1:] or ["float32", "int8-calibrated"]
repo = os.path.dirname(textual.__file__)  # the installed textual (what bench perf measures)
conn = Database(os.environ.get("CTXBENCH_DB", "/tmp/bulk_precision_throughput.db")).dedicated_connection()
build_index(repo, conn)
cards = list(load_index(repo, conn).cards.values())
print("load avg", os.getloadavg(), "cards", len({c.card_hash for c in cards}), flush=True)
embs = {p: Embedder(EmbeddingConfig(bulk_precision=p)) for p in precisions}
for e in embs.values():
    e.wait(); e.encode(["warm up"] * 20)
for _ in range(int(os.environ.get("ROUNDS", "2"))):
    for p in precisions:
        conn.execute("DELETE FROM card_vectors"); conn.commit()
        s = embed_cards(cards, conn, embs[p])
        print(f"{p}: {s.embedded} cards in {s.seconds:.1f}s = {s.cards_per_second:.1f} cards/s  load {os.getloadavg()[0]:.2f}"
              f"  ({time.strftime('%H:%M:%S', time.gmtime())} UTC)", flush=True)
