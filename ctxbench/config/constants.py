"""Named constants that are part of a definition, not settings: the app's name, BM25's parameters, caches."""
from __future__ import annotations

APP_NAME = "ctxbench"

# BM25 as SQLite FTS5's bm25() defines it, computed over a planned history's own statistics by
# retrieval/history_keywords.py (the fused strategy's keyword scores). Part of the definition, not settings.
BM25_K1 = 1.2  # how fast repeats of a word stop adding relevance
BM25_B = 0.75  # how much a long message's length discounts its words
# sessions whose messages and keyword index a workbench keeps in memory between plans (service/history_cache.py)
CACHED_SESSIONS = 8
# a session with at least this many messages is kept as planned when the workbench closes, so a fresh process
# plans it without reading, masking and laying it out again (service/history_snapshot.py); smaller ones read fast
SNAPSHOT_MIN_MESSAGES = 2000
