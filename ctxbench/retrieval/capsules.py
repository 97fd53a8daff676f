"""Capsules in retrieval: which capsules a query is about, and (optionally) what they add to the symbol ranking.

A capsule is ranked by three signals fused by RRF (weights in ``[capsules]``): BM25 of the query's words
over its title and text (FTS5, the same identifier-aware words as the cards), the cosine of the query to
its text (when the embedder is ready; vectors cached like card vectors, under a key of their own), and
*support*: how strongly the first ``support_hits`` symbol hits sit in the files it covers. A capsule with
none of these (no keyword hit, a cosine under the relevance floor, no supporting hit) is not offered.

``member_ranking`` is the optional symbol component: the symbols in the files of the capsules the query is
most about (keyword and semantic only, never support, so it cannot feed on itself), in the order the other
components ranked them. Its weight, ``[capsules] retrieval_weight``, is 0 by default (benchmarks/README.md).
Stale capsules never feed it: a stale summary is not evidence of where code lives.
"""
from __future__ import annotations

import hashlib
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ctxbench.config import CapsuleConfig, RetrievalConfig
from ctxbench.records.capsules import Capsule, CapsuleHit
from ctxbench.records.code import SymbolCard
from ctxbench.retrieval.areas import area_of, area_weight, asks_for
from ctxbench.retrieval.fuse import fuse, rrf_unit
from ctxbench.retrieval.keyword import identifier_tokens, query_terms
from ctxbench.store import capsules as capsule_store
from ctxbench.store.vectors import CAPSULE_KEY_MARK, load_vectors, save_vectors

TEXT_VERSION = "c1"  # bump when the keyword rows or the embedded text of a capsule change


def vector_key(embedder_key: str) -> str:
    return f"{embedder_key}{CAPSULE_KEY_MARK}{TEXT_VERSION}"


def text_hash(capsule: Capsule) -> str:
    return hashlib.sha256(f"{capsule.title}\n{capsule.text}".encode("utf-8", "surrogatepass")).hexdigest()[:24]


def sync_keyword(conn: sqlite3.Connection, repo: str, capsules: Sequence[Capsule]) -> bool:
    """Make the repository's capsule keyword rows match ``capsules``; True when they had to be rewritten."""
    digest = hashlib.sha256(TEXT_VERSION.encode())
    for c in sorted(capsules, key=lambda c: c.id):
        digest.update(f"{c.id}\x00{text_hash(c)}\x01".encode())
    wanted = digest.hexdigest()[:24]
    capsule_store.ensure_schema(conn)
    if capsule_store.fts_digest(conn, repo) == wanted:
        return False
    capsule_store.replace_fts(conn, repo, [(c.id, identifier_tokens(c.title), identifier_tokens(c.text))
                                           for c in capsules], wanted)
    return True


@dataclass
class _Ranked:
    capsule: Capsule
    scores: dict[str, float] = field(default_factory=dict)  # keyword / semantic / support: the raw signal
    ranks: dict[str, int] = field(default_factory=dict)
    score: float = 0.0


class CapsuleSearch:
    """Capsule ranking over one retriever's index view (caches keyword sync and vectors per view version)."""

    def __init__(self, conn: sqlite3.Connection, capsules: CapsuleConfig, retrieval: RetrievalConfig) -> None:
        """``capsules``: the capsules' own settings; ``retrieval``: the fusion (RRF constant, area weights, floor)."""
        self.conn = conn
        self.capsules = capsules
        self.retrieval = retrieval
        self._lock = threading.Lock()
        self._keyword_version: str | None = None
        self._vectors: tuple[str, dict[int, np.ndarray]] | None = None

    def _sync(self, repo: str, version: str, capsules: Sequence[Capsule]) -> None:
        with self._lock:
            if self._keyword_version != version:
                sync_keyword(self.conn, repo, capsules)
                self._keyword_version = version

    def vectors(self, version: str, capsules: Sequence[Capsule], embedder: Any) -> dict[int, np.ndarray]:
        """Capsule id -> unit vector of its text (cached in memory per index version and in the store; the missing
        ones embedded now)."""
        with self._lock:
            known = dict(self._vectors[1]) if self._vectors is not None and self._vectors[0] == version else {}
        missing = [c for c in capsules if c.id not in known]
        if missing:
            key = vector_key(embedder.key)
            hashes = {c.id: text_hash(c) for c in missing}
            found = load_vectors(self.conn, hashes.values(), key)
            todo = [c for c in missing if hashes[c.id] not in found]
            if todo:
                encoded = embedder.encode([f"{c.title}. {c.text}" for c in todo],
                                          max_seq_length=self.capsules.embed_max_seq_length)
                rows = [(hashes[c.id], np.asarray(v, dtype=np.float32)) for c, v in zip(todo, encoded)]
                save_vectors(self.conn, rows, key)
                found.update(rows)
            known.update({cid: found[h] for cid, h in hashes.items() if h in found})
            with self._lock:
                self._vectors = (version, known)
        return {c.id: known[c.id] for c in capsules if c.id in known}

    def prepare(self, repo: str, version: str, capsules: Sequence[Capsule], embedder: Any) -> None:
        """Keyword rows and (with a ready embedder) the vectors of ``capsules``, before the first query needs them."""
        self._sync(repo, version, capsules)
        if embedder is not None and getattr(embedder, "ready", False):
            self.vectors(version, [c for c in capsules if c.confidence >= self.capsules.min_confidence],
                         embedder)

    def _topical(self, repo: str, version: str, capsules: Sequence[Capsule], allowed: Sequence[Capsule], query: str,
                 query_vector: np.ndarray | None, embedder: Any) -> dict[int, _Ranked]:
        """Every capsule of ``allowed`` the query's words or meaning reach, with its keyword and semantic signals
        (ranks among ``allowed``); ``capsules``: all of the repository's, which the keyword rows hold."""
        self._sync(repo, version, capsules)
        rc = self.retrieval
        by_id = {c.id: c for c in allowed}
        ranked: dict[int, _Ranked] = {}
        terms = query_terms(query, tuple(rc.keyword_stopwords) + tuple(rc.chat_words))
        match = " OR ".join(f'"{t}"' for t in terms)
        found = [(cid, rel) for cid, rel in capsule_store.search_fts(self.conn, repo, match, len(capsules))
                 if cid in by_id]
        for rank, (cid, relevance) in enumerate(found, 1):
            entry = ranked.setdefault(cid, _Ranked(by_id[cid]))
            entry.scores["keyword"], entry.ranks["keyword"] = relevance, rank
        if query_vector is not None and embedder is not None:
            vectors = self.vectors(version, allowed, embedder)
            q = np.asarray(query_vector, dtype=np.float32)
            cosines = sorted(((float(v @ q), cid) for cid, v in vectors.items()), key=lambda x: (-x[0], x[1]))
            for rank, (cos, cid) in enumerate(cosines, 1):
                entry = ranked.setdefault(cid, _Ranked(by_id[cid]))
                entry.scores["semantic"], entry.ranks["semantic"] = cos, rank
        return ranked

    def member_ranking(self, repo: str, version: str, capsules: Sequence[Capsule], cards: Mapping[str, SymbolCard],
                       query: str, query_vector: np.ndarray | None, embedder: Any,
                       *rankings: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
        """Symbols in the files of the fresh capsules the query is most about, in the order ``rankings`` put them."""
        cc = self.capsules
        fresh = [c for c in capsules if not c.stale and c.confidence >= cc.min_confidence]
        if not fresh:
            return []
        topical = self._fused(self._topical(repo, version, capsules, fresh, query, query_vector, embedder),
                              ("keyword", "semantic"))
        seeds = [r for r in topical if self._evidence(r)][: cc.seed_capsules]
        paths = {p for r in seeds for p in r.capsule.paths}
        if not paths:
            return []
        best: dict[str, float] = {}
        for ranking in rankings:
            for rank, (sid, _) in enumerate(ranking, 1):
                card = cards.get(sid)
                if card is not None and card.path in paths:
                    best[sid] = max(best.get(sid, 0.0), 1.0 / rank)
        return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))

    def hits(self, repo: str, version: str, capsules: Sequence[Capsule], cards: Mapping[str, SymbolCard], query: str,
             query_vector: np.ndarray | None, embedder: Any, support: Sequence[tuple[str, float]]) -> tuple[CapsuleHit, ...]:
        """The capsules to offer for ``query``: at most ``max_hits``, each with evidence, best first.
        ``support``: the symbol hits above the relevance floor, best first, with their fused scores."""
        cc = self.capsules
        offered = [c for c in capsules if c.confidence >= cc.min_confidence]
        if cc.max_hits <= 0 or not offered:
            return ()
        ranked = self._topical(repo, version, capsules, offered, query, query_vector, embedder)
        by_path: dict[str, list[Capsule]] = {}
        for c in offered:
            for p in c.paths:
                by_path.setdefault(p, []).append(c)
        strength: dict[int, float] = {}
        for rank, (sid, _) in enumerate(support[: cc.support_hits], 1):
            card = cards.get(sid)
            for c in by_path.get(card.path, ()) if card is not None else ():
                strength[c.id] = strength.get(c.id, 0.0) + 1.0 / rank
        by_id = {c.id: c for c in offered}
        for rank, (cid, value) in enumerate(sorted(strength.items(), key=lambda kv: (-kv[1], kv[0])), 1):
            entry = ranked.setdefault(cid, _Ranked(by_id[cid]))
            entry.scores["support"], entry.ranks["support"] = value, rank
        asked = asks_for(query_terms(query))
        chosen = [r for r in self._fused(ranked, ("keyword", "semantic", "support"), asked) if self._evidence(r)]
        for r in chosen:
            if r.capsule.stale:
                r.score *= cc.stale_weight
        chosen = sorted(chosen, key=lambda r: (-r.score, r.capsule.id))[: cc.max_hits]
        out = []
        for r in sorted(chosen, key=lambda r: (r.capsule.stale, -r.score, r.capsule.id)):
            withheld = "" if cc.include_stale or not r.capsule.stale else (
                f"stale: {r.capsule.stale_note()}; [capsules] include_stale is off")
            out.append(CapsuleHit(r.capsule, round(r.score, 8), self._why(r, cc.support_hits), withheld))
        return tuple(out)

    def _fused(self, ranked: Mapping[int, _Ranked], sources: Sequence[str],
               asked: frozenset[str] | None = None) -> list[_Ranked]:
        """RRF of the signals; times the area weight of the capsule's code (tests, shims, generated, vendored
        code: ``[retrieval] area_weights``) unless the query asks for that area (``asked``; None: no weights)."""
        cc = self.capsules
        weights = {"keyword": cc.keyword_weight, "semantic": cc.semantic_weight, "support": cc.support_weight}
        rankings = {s: [(str(cid), r.scores[s]) for cid, r in sorted(ranked.items(), key=lambda kv: kv[1].ranks.get(s, 0))
                        if s in r.scores] for s in sources}
        k = self.retrieval.rrf_k
        area_weights = dict(self.retrieval.area_weights)
        for f in fuse(rankings, {s: weights[s] for s in sources}, method="rrf", rrf_k=k):
            entry = ranked[int(f.symbol)]
            entry.score = f.score
            if asked is not None and area_weights and entry.capsule.paths:
                entry.score *= area_weight(area_of(entry.capsule.paths[0]), asked, area_weights)
        return sorted((r for r in ranked.values() if r.score > 0), key=lambda r: (-r.score, r.capsule.id))

    def _evidence(self, r: _Ranked) -> bool:
        return ("keyword" in r.scores or "support" in r.scores
                or r.scores.get("semantic", float("-inf")) >= self.retrieval.min_semantic_similarity)

    def _why(self, r: _Ranked, support_hits: int) -> str:
        unit = rrf_unit(self.retrieval.rrf_k)
        bits = [f"capsule score {r.score:.3f} (RRF: a first place in one signal = {unit:.3f})"]
        if "keyword" in r.ranks:
            bits.append(f"keyword rank {r.ranks['keyword']}")
        if "semantic" in r.scores:
            bits.append(f"semantic {r.scores['semantic']:.2f}")
        if "support" in r.scores:
            bits.append(f"covers hits among the first {support_hits} (support rank {r.ranks['support']})")
        return " · ".join(bits)


