"""RetrievalSet: the ordered retrieval hits for a turn, each with score, provenance and why."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetrievalHit:
    symbol: str  # symbol id, e.g. pkg.mod.Class.method
    path: str  # file path relative to the indexed root
    line: int
    score: float  # fused score
    components: tuple[tuple[str, float], ...] = ()  # e.g. (("semantic", 0.61), ("keyword_rank", 2.0))
    why: str = ""  # "semantic 0.61 · keyword rank 2 · called by Table._render"
    provenance: str = ""  # semantic | keyword | graph | pin | activation (the strongest source)
    card_text: str = ""  # the thin card as it would be shown to the model
    excerpt: str = ""  # Heavy mode excerpt (<= 30 lines)
    card_hash: str = ""
    neighbour_of: str = ""  # set when the hit came from graph expansion
    # why the hit is under the relevance floor (RetrievalConfig.min_semantic_similarity, chat words):
    # listed, but its card is not auto-included; empty when it is relevant enough
    below_threshold: str = ""


@dataclass(frozen=True)
class RetrievalSet:
    id: str
    query: str
    hits: tuple[RetrievalHit, ...] = ()
    semantic_available: bool = False
    notes: tuple[str, ...] = field(default=())  # e.g. "semantic search not available: model warming"
    scaffold: str = ""  # orientation scaffold text, empty when no repository

    @staticmethod
    def make_id(query: str, hits: tuple[RetrievalHit, ...], index_version: str = "") -> str:
        payload = json.dumps(
            [query, index_version,
             [(h.symbol, h.card_hash, round(h.score, 6), *((h.below_threshold,) if h.below_threshold else ()))
              for h in hits]],
            ensure_ascii=False,
        )
        return "rs_" + hashlib.sha256(payload.encode()).hexdigest()[:16]


EMPTY_RETRIEVAL_SET = RetrievalSet(id="rs_empty", query="", hits=(), semantic_available=False, notes=("no repository",))
