#!/usr/bin/env python
"""cards/s of embed_cards on textual's cards, float32 and int8 (embedding.bulk_precision) alternating twice in one
process, the vector table emptied before each pass: the two figures are from the same machine at the same time."""
import os, time
from ctxbench.codegraph.index import build_index, load_index
from ctxbench.config import EmbeddingConfig
from ctxbench.retrieval.embedder import Embedder
from ctxbench.retrieval.vectors import embed_cards
from ctxbench.store.database import Database
import textual
repo = os.path.dirname(textual.__file__)  # the installed textual (what bench perf measures)
conn = Database(os.environ.get("CTXBENCH_DB", "/tmp/bulk_precision_throughput.db")).dedicated_connection()
build_index(repo, conn)
cards = list(load_index(repo, conn).cards.values())
print("load avg", os.getloadavg(), "cards", len({c.card_hash for c in cards}), flush=True)
embs = {p: Embedder(EmbeddingConfig(bulk_precision=p)) for p in ("float32", "int8")}
for e in embs.values():
    e.wait(); e.encode(["warm up"] * 20)
for p in ("float32", "int8", "float32", "int8"):
    conn.execute("DELETE FROM card_vectors"); conn.commit()
    s = embed_cards(cards, conn, embs[p])
    print(f"{p}: {s.embedded} cards in {s.seconds:.1f}s = {s.cards_per_second:.1f} cards/s  load {os.getloadavg()[0]:.2f}", flush=True)
