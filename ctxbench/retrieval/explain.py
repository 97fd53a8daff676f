"""The explainer: what each retrieval hit says about itself, apart from how it was found.

``explain`` turns the ranked fused entries into ``RetrievalHit`` records: the hit's fused score and its scale
first in its why, then the words and figures of each component that found it (``components.COMPONENTS``, in table
order) and of each stage that moved it (``STAGE_WORDS``: kept in the feedback head, near pinned code, supported by,
neighbour of, pinned, mentioned, recently active), its provenance, its excerpt chosen for the query's words, and
why it is below the relevance floor when it is (``below_floor``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ctxbench.config import IndexConfig, RetrievalConfig
from ctxbench.records.code import SymbolCard
from ctxbench.records.retrieval import RetrievalHit
from ctxbench.retrieval.components import COMPONENTS, EVIDENCE, KEYWORD, PROVENANCE, SEMANTIC, short_name
from ctxbench.retrieval.fuse import Fused, rrf_unit
from ctxbench.retrieval.keyword import query_terms


@dataclass(frozen=True)
class HitNotes:
    """What the fusion stages said about the hits beyond their scores."""

    support: Mapping[str, str] = field(default_factory=dict)  # symbol -> the link that supports it, in words
    graph: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # symbol -> (relation in words, its seed)
    near: str = ""  # the personalized hits' words: "near pinned/mentioned/active code"


# the stages' keys in a hit's scores, in the order its why tells them: (key, digits of its figure, its words)
STAGE_WORDS: tuple[tuple[str, int, Callable[[float, str, HitNotes, Any], str]], ...] = (
    ("feedback_head", 6, lambda v, sid, notes, rc: f"kept among the first {rc.feedback_head} "
                                                   f"(+{v:.3f} over the hits the feedback lifted)"),
    ("personalized", 4, lambda v, sid, notes, rc: f"{notes.near} {v:.2f}"),
    ("support", 4, lambda v, sid, notes, rc: f"supported: {notes.support.get(sid, '')}"),
    ("graph", 6, lambda v, sid, notes, rc: notes.graph.get(sid, ("", ""))[0]),
    ("pin", 4, lambda v, sid, notes, rc: "pinned"),
    ("mentioned", 4, lambda v, sid, notes, rc: "mentioned"),
    ("activation", 4, lambda v, sid, notes, rc: "recently active"),
)


def score_words(score: float, rc: Any) -> str:
    """The hit's fused score and its scale, first in its why: the number the overlay's score column shows."""
    if rc.fusion == "rrf":
        return f"score {score:.3f} (RRF: a first place in one source = {rrf_unit(rc.rrf_k):.3f})"
    return f"score {score:.3f} (sum of per-source scores, each at most its weight)"


def provenance_of(f: Fused) -> str:
    """The strongest source of a hit: its best-ranked direct component, else graph, pin or activation."""
    direct = [(name, given) for name, given in PROVENANCE if name in f.scores]
    if direct:
        return max(direct, key=lambda c: (f.ranks.get(c[0], 10**9) * -1, c[0]))[1]
    if "graph" in f.scores:
        return "graph"
    if "pin" in f.scores:
        return "pin"
    return "activation"


def reasons(f: Fused, notes: HitNotes, rc: Any) -> tuple[tuple[tuple[str, float], ...], str]:
    """A hit's ``components`` (figures) and its ``why`` (words)."""
    figures: list[tuple[str, float]] = []
    why = [score_words(f.score, rc)]
    for c in COMPONENTS:
        if c.name in f.scores:
            score, rank = f.scores[c.name], f.ranks.get(c.name, 0)
            figures.extend(c.shown(score, rank))
            why.append(c.why(score, rank, f.symbol))
    for key, digits, words in STAGE_WORDS:
        if key in f.scores:
            figures.append((key, round(f.scores[key], digits)))
            why.append(words(f.scores[key], f.symbol, notes, rc))
    return tuple(figures), " · ".join(why)


def below_floor(query: str, ranked: Sequence[Fused], fused: Mapping[str, Fused], notes: HitNotes,
                semantic_available: bool, semantic_off: str,
                matching: Callable[[Sequence[str], Sequence[str]], set[str]], rc: Any) -> dict[str, str]:
    """Symbol -> why it is below the relevance floor, for the ranked hits that are (see RetrievalConfig).

    Evidence that a hit is about the query: named in it (or a member of a class named there), pinned or
    mentioned, a semantic similarity of at least ``min_semantic_similarity``, or a keyword hit on a word
    that is neither a stop word nor a chat word (``matching(terms, symbol ids)``: which of the ids match one of the
    words). A graph neighbour has the evidence of the hit it neighbours.
    """
    minimum = rc.min_semantic_similarity
    keyword_ids = sorted(sid for sid, f in fused.items() if KEYWORD in f.scores)
    stop = tuple(rc.keyword_stopwords)
    content_terms = query_terms(query, stop + tuple(rc.chat_words))
    if keyword_ids and len(content_terms) < len(query_terms(query, stop)):
        # some words of the query are chat words: which keyword hits match one of the others?
        keyword_evidence = matching(content_terms, keyword_ids)
    else:
        keyword_evidence = set(keyword_ids)

    def direct(entry: Fused) -> bool:
        if any(c in entry.scores for c in (*EVIDENCE, "pin", "mentioned")):
            return True
        if entry.scores.get(SEMANTIC, float("-inf")) >= minimum:
            return True
        return entry.symbol in keyword_evidence

    def missing(entry: Fused) -> str:
        if not semantic_available:
            semantic = "semantic search off" if semantic_off else "semantic search not available"
        elif SEMANTIC in entry.scores:
            semantic = f"semantic {entry.scores[SEMANTIC]:.2f} < {minimum:.2f}"
        else:
            semantic = f"semantic < {minimum:.2f}"
        keyword = "keyword hits only on chat words" if KEYWORD in entry.scores else "no keyword hit"
        return f"{semantic}, {keyword}, not named in the query"

    out: dict[str, str] = {}
    for entry in ranked:
        if direct(entry):
            continue
        seed = notes.graph.get(entry.symbol, ("", ""))[1]
        seed_entry = fused.get(seed) if seed else None
        if seed_entry is not None:
            if direct(seed_entry):
                continue
            out[entry.symbol] = f"below the relevance floor: neighbour of {short_name(seed)}, itself below it"
        else:
            out[entry.symbol] = f"below the relevance floor: {missing(entry)}"
    return out


def excerpt_words(query: str, rc: Any) -> Any:
    """The query's words for choosing excerpts, as the ``excerpts.WordMatcher`` every hit of the query shares
    (None when excerpts are the stored heads)."""
    if not rc.query_excerpts:
        return None
    from ctxbench.retrieval.excerpts import WordMatcher, query_words

    return WordMatcher(query_words(query_terms(query, tuple(rc.keyword_stopwords) + tuple(rc.chat_words))))


def _excerpt(card: SymbolCard, source: Any, words: Any, width: int, rc: RetrievalConfig, icfg: IndexConfig) -> Any:
    if words is None:
        return None
    from ctxbench.retrieval.excerpts import query_excerpt

    width = width or rc.excerpt_lines or icfg.excerpt_lines
    return query_excerpt(card, source, words.words, width, rc.excerpt_context_lines, icfg.card_line_max_chars, words,
                         slack=rc.excerpt_whole_slack, statement_lines=rc.excerpt_statement_lines,
                         blank=rc.excerpt_blank_lines, occurrence=rc.excerpt_occurrence_share)


def explain(query: str, cards: Mapping[str, SymbolCard], ranked: Sequence[Fused], notes: HitNotes,
            below: Mapping[str, str], retrieval: RetrievalConfig, index_config: IndexConfig,
            source: Any) -> tuple[RetrievalHit, ...]:
    """The hits of ``ranked`` (best first), each with its reasons, its excerpt for the query (``source``: the
    repository's ``excerpts.SourceLines``; the first ``excerpt_top_hits`` get ``excerpt_top_lines``) and its floor
    note; excerpts are as wide as ``retrieval`` says, else as ``index_config`` makes cards)."""
    rc = retrieval
    words = excerpt_words(query, rc)
    top_lines, top_hits = (rc.excerpt_top_lines, rc.excerpt_top_hits) if rc.excerpt_top_lines > 0 else (0, 0)
    out: list[RetrievalHit] = []
    for rank, f in enumerate(ranked):
        card = cards[f.symbol]
        chosen = _excerpt(card, source, words, top_lines if rank < top_hits else 0, rc, index_config)
        figures, why = reasons(f, notes, rc)
        provenance = provenance_of(f)
        out.append(RetrievalHit(
            symbol=f.symbol,
            path=card.path,
            line=card.line,
            score=round(f.score, 8),
            components=figures,
            why=why,
            provenance=provenance,
            card_text=card.render(with_excerpt=False),
            excerpt=chosen.text if chosen is not None else card.excerpt,
            excerpt_lines=((chosen.first, chosen.last) if chosen is not None
                           else (card.line, card.line + card.excerpt.count("\n")) if card.excerpt else (0, 0)),
            card_head=card.head() if chosen is not None else "",
            card_hash=card.card_hash,
            neighbour_of=notes.graph.get(f.symbol, ("", ""))[1] if provenance == "graph" else "",
            below_threshold=below.get(f.symbol, ""),
        ))
    return tuple(out)
