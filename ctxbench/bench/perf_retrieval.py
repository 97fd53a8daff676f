"""Phase groups of ``ctxbench bench perf`` for the retrieval side: embedding throughput and warm query time.

``embed`` embeds every card of the measured repository into an empty vector cache (the cold cost a
user pays once) and then again with the cache full; ``retrieve`` times one query with the model and
the vector index warm. Both use the real model from the installed package.
"""
from __future__ import annotations

import statistics
import time

from ctxbench.bench.perf_records import PerfContext, PhaseTiming

EMBED_TARGET_CARDS_PER_S = 150.0  # issue 3: >= 150 cards/s on this 2-core CPU
RETRIEVE_TARGET_S = 0.030  # issue 3: <= 30 ms per query, model warm
RETRIEVE_ROUNDS = 5  # passes over the query list after one warm-up pass
PERF_QUERIES = (
    "where is the key binding for a screen resolved",
    "how does a widget compute its size from CSS",
    "render a table row with styles",
    "post a message to the parent widget",
    "parse a color string like #ff0000",
    "scroll to make a widget visible",
    "focus the next widget when tab is pressed",
    "load a stylesheet from a file",
    "run a worker in a thread and cancel it",
    "timer that fires every second",
)


def _load_embedder(ctx: PerfContext):
    embedder = ctx.shared.get("embedder")
    if embedder is None:
        from ctxbench.retrieval.embedder import Embedder

        embedder = Embedder(ctx.config.embedding)
        t0 = time.perf_counter()
        embedder.start_loading()
        embedder.wait()
        if embedder.error is not None:
            raise embedder.error
        ctx.shared["embedder_load_s"] = time.perf_counter() - t0
        ctx.shared["embedder"] = embedder
    return embedder


def embed_group(ctx: PerfContext) -> list[PhaseTiming]:
    """Cold embedding of every card (fresh vector cache), the reuse pass, and the plain library's encode of the
    same texts in the same run (the baseline the cold figure is read against)."""
    from ctxbench.codegraph.index import load_index
    from ctxbench.retrieval.vectors import embed_cards, embed_text
    from ctxbench.store.database import Database

    ctx.progress("loading the embedding model")
    embedder = _load_embedder(ctx)
    database = Database(ctx.shared["db_path"])
    conn = database.dedicated_connection()
    cards = list(load_index(ctx.repo, conn, ctx.config.index, ctx.config.capsules).cards.values())
    ctx.progress("loading the bulk encoder (torch)")
    bulk_load_s = embedder.load_bulk_model()  # its import is a load, reported apart, not embedding time
    per_card: list[float] = []
    cpu_per_card: list[float] = []
    rates: list[float] = []
    embedded = 0
    for i in range(ctx.repeat):
        ctx.progress(f"embedding {len(cards)} cards {i + 1}/{ctx.repeat}")
        if _has_vectors(conn):  # every cold run starts from an empty vector cache
            conn.execute("DELETE FROM card_vectors")
            conn.commit()
        c0 = time.process_time()
        stats = embed_cards(cards, conn, embedder)
        cpu_per_card.append((time.process_time() - c0) / max(1, stats.embedded))
        embedded = stats.embedded
        per_card.append(stats.seconds / max(1, stats.embedded))
        rates.append(stats.cards_per_second)
    ctx.progress("re-embedding with the cache full")
    reuse = embed_cards(cards, conn, embedder)
    database.close()
    texts = [embed_text(c) for c in {c.card_hash: c for c in cards}.values()]  # what a cold run embeds
    ctx.progress(f"plain sentence-transformers baseline: {len(texts)} cards")
    plain_runs, plain_cpu = plain_encode_runs(embedder.bulk_model(), texts, ctx.config.embedding.batch_size,
                                              ctx.repeat)
    plain_rate = len(texts) / statistics.median(plain_runs) if plain_runs else 0.0
    ctxbench_rate = statistics.median(rates)
    return [
        PhaseTiming("embed cold (seconds per card)", tuple(per_card), 1.0 / EMBED_TARGET_CARDS_PER_S,
                    (("cards_embedded", embedded), ("cards_per_s", round(ctxbench_rate, 1)),
                     ("target_cards_per_s", EMBED_TARGET_CARDS_PER_S),
                     ("model_load_s", round(ctx.shared.get("embedder_load_s", 0.0), 2)),
                     ("bulk_model_load_s", round(bulk_load_s, 2)),
                     ("max_seq_length", ctx.config.embedding.max_seq_length),
                     ("precision", ctx.config.embedding.precision),
                     ("bulk_precision", ctx.config.embedding.bulk_precision)), tuple(cpu_per_card)),
        PhaseTiming("embed unchanged (cache reuse)", (reuse.seconds,), None,
                    (("cards_reused", reuse.reused), ("cards_embedded", reuse.embedded))),
        # the plain baseline in the same run: the machine's own speed for this model and these texts, so the
        # cards/s above can be read against what the library alone gives here today
        PhaseTiming("embed cold, plain sentence-transformers (baseline, seconds per card)",
                    tuple(t / max(1, len(texts)) for t in plain_runs), None,
                    (("cards", len(texts)), ("cards_per_s", round(plain_rate, 1)),
                     ("ctxbench_vs_plain", round(ctxbench_rate / plain_rate, 3) if plain_rate else None)),
                    tuple(t / max(1, len(texts)) for t in plain_cpu)),
    ]


def plain_encode_runs(model, texts: list[str], batch_size: int, repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of one plain ``SentenceTransformer.encode`` call over ``texts`` per run, on the embedder's
    own model (same directory, truncation, threads and precision), none of ctxbench's work around it (hashing,
    chunking for progress, saving vectors)."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(max(1, repeat) if texts else 0):
        c0, t0 = time.process_time(), time.perf_counter()
        model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                     show_progress_bar=False)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return walls, cpus


def _has_vectors(conn) -> bool:
    return conn.execute("SELECT name FROM sqlite_master WHERE name = 'card_vectors'").fetchone() is not None


def retrieve_group(ctx: PerfContext) -> list[PhaseTiming]:
    """One query with the model and both indexes warm (fused semantic + keyword + graph)."""
    from ctxbench.service.index_views import retriever_for
    from ctxbench.store.database import Database

    embedder = _load_embedder(ctx)
    database = Database(ctx.shared["db_path"])
    conn = database.dedicated_connection()
    retriever = retriever_for(conn, ctx.repo, ctx.config, embedder)
    ctx.progress("warming the retriever (vector and keyword indexes)")
    retriever.prepare(wait_for_model=True)
    for query in PERF_QUERIES:  # warm-up pass
        retriever.retrieve(query)
    times: list[float] = []
    semantic = 0
    for _ in range(RETRIEVE_ROUNDS):
        for query in PERF_QUERIES:
            retriever.forget_query_vectors()  # each timed query pays its encoding, as a new question does
            t0 = time.perf_counter()
            result = retriever.retrieve(query)
            times.append(time.perf_counter() - t0)
            semantic += int(result.semantic_available)
    database.close()
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return [
        PhaseTiming("retrieve one query (model warm)", tuple(times), RETRIEVE_TARGET_S,
                    (("queries", len(times)), ("p95_ms", round(p95 * 1000, 2)),
                     ("semantic_answered", semantic))),
    ]
