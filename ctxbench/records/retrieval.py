"""RetrievalSet: the ordered retrieval hits for a turn, each with score, provenance and why."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field, fields

from ctxbench.records.capsules import CapsuleHit


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
    excerpt_lines: tuple[int, int] = (0, 0)  # the file lines (first, last) the excerpt shows; (0, 0) without one
    # the card without its body (title, signature, doc): with an excerpt chosen for the query, what precedes it
    # (the excerpt then holds only body lines, so nothing is sent twice); empty: the excerpt follows card_text
    card_head: str = ""
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
    capsules: tuple[CapsuleHit, ...] = ()  # capsules of code offered beside the hits (best first)

    @staticmethod
    def make_id(query: str, hits: tuple[RetrievalHit, ...], index_version: str = "", *,
                semantic_available: bool = False, notes: tuple[str, ...] = (), scaffold: str = "",
                capsules: tuple[CapsuleHit, ...] = ()) -> str:
        """A stable id over every field of the set and of each hit: two sets that differ anywhere
        (a hit's card text or why, the scaffold, the notes, a capsule) never share an id, so a stored set is
        never mistaken for another one (sets are stored once per id). Capsules enter only when there are
        some, so the ids of sets without them stay what they were."""
        parts: list = [query, index_version, semantic_available, list(notes), scaffold, [_hit_row(h) for h in hits]]
        if capsules:
            parts.append([dataclasses.asdict(c) for c in capsules])
        payload = json.dumps(parts, ensure_ascii=False)
        return "rs_" + hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    @classmethod
    def create(cls, query: str, hits: tuple[RetrievalHit, ...] = (), index_version: str = "", *,
               semantic_available: bool = False, notes: tuple[str, ...] = (), scaffold: str = "",
               capsules: tuple[CapsuleHit, ...] = ()) -> "RetrievalSet":
        """A set whose id is :meth:`make_id` of all its fields."""
        rid = cls.make_id(query, hits, index_version, semantic_available=semantic_available, notes=notes,
                          scaffold=scaffold, capsules=tuple(capsules))
        return cls(rid, query, hits, semantic_available, tuple(notes), scaffold, tuple(capsules))

# fields added after ids were first stored: left out of a hit's id while they hold their default, so the
# ids of sets that do not use them stay what they were
_LATER_FIELDS = {"excerpt_lines": (0, 0), "card_head": ""}


def _hit_row(hit: RetrievalHit) -> list:
    return [getattr(hit, f.name) for f in fields(RetrievalHit)
            if f.name not in _LATER_FIELDS or getattr(hit, f.name) != _LATER_FIELDS[f.name]]


@dataclass(frozen=True)
class QueryClusterTag:
    """What a plan records of its query's cluster (``retrieval.query_clusters``): the QueryClusterId, how many
    queries the cluster holds with this one, whether this query started it, its cosine to the centroid it was
    compared with (None: the session's first clustered query) and the threshold it was compared against."""

    id: int
    queries: int
    started: bool
    similarity: float | None = None
    threshold: float = 0.0

    def describe(self) -> str:
        """One line for the plan's notes and the overlay: which cluster, how many queries, new or joined."""
        if not self.started:
            return (f"query cluster q{self.id}: {self.queries} queries (this one joined it: similarity "
                    f"{self.similarity:.2f} >= {self.threshold:.2f})")
        if self.similarity is None:
            return f"query cluster q{self.id}: started with this query (the session's first)"
        return (f"query cluster q{self.id}: started with this query (similarity {self.similarity:.2f} to the "
                f"previous cluster < {self.threshold:.2f})")


EMPTY_RETRIEVAL_SET = RetrievalSet(id="rs_empty", query="", hits=(), semantic_available=False, notes=("no repository",))
