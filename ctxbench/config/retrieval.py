"""The code retriever's section (``[retrieval]``): fusion, components, graph, excerpts, floor, query clusters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from ctxbench.config.constraints import PositiveInt
from ctxbench.validation import Range


@dataclass(frozen=True)
class RetrievalConfig:
    rrf_k: int = 10
    """the RRF constant: a hit ranked r-th by a component adds the component's weight / (rrf_k + r)"""
    semantic_weight: float = 1.0
    """weight of the semantic (embedding) component in the fusion"""
    keyword_weight: float = 1.0
    """weight of the keyword (BM25) component in the fusion"""
    graph_weight: float = 0.5
    """weight of the graph-neighbour component in the fusion"""
    pin_boost: float = 0.1
    """added to a pinned symbol's fused score; boosts are in RRF units: a first place in one component is 1/(rrf_k+1)"""
    activation_boost: float = 0.05
    """times the symbol's activation score, added to its fused score (RRF units)"""
    candidate_pool: PositiveInt = 50
    """hits each component offers the fusion"""
    default_k: PositiveInt = 20
    """hits a retrieval returns unless asked for another number"""
    fusion: str = "rrf"
    """how the components' rankings are fused: rrf (reciprocal rank fusion) | score (weighted sum of normalized
    component scores)"""
    name_weight: float = 1.0
    """weight of the exact-identifier component (a code identifier in the query)"""
    name_generic_max: int = 8
    """a bare identifier of the query (``__init__``, ``get``) that names more symbols than this is a word of low
    information: the exact-identifier component leaves it out (a dotted one, ``Factory.__init__``, still counts), so it
    cannot outrank the question's domain words (0 = every name counts; 8 changed nothing on the tune pool)"""
    scope_weight: float = 1.0
    """members of a class named in the query, in the order the other components gave"""
    class_scope_weight: float = 0.5
    """members of the classes the semantic or keyword component ranks among its first class_scope_top (the class is the
    clue to a generically named method: "the sorted list's add"), in the order those components found them, then by
    cosine to the query; one RRF component of this weight (0 = off)"""
    class_scope_top: int = 3
    """the semantic and keyword components' first N hits whose classes lend their members (``class_scope_weight``)"""
    prf_keyword_weight: float = 0.0
    """pseudo-relevance feedback for the keyword component (retriever.feedback_ranking): the first feedback_hits symbols
    of a first fusion lend the feedback_terms most distinctive words of their ids and signatures (not in the query; IDF
    over the repository's cards, 1 / rank), searched as a second keyword query whose RRF share (this weight, 0 = off) is
    added last to the hits the keyword, name, scope or phrase components found (it adds none), below the first
    feedback_head hits, which keep their places. Off by default for its cost (one more FTS5 query per retrieval); 0.5 is
    the tuned weight"""
    feedback_hits: int = 3
    """first hits of the first fusion that lend feedback words (``prf_keyword_weight``)"""
    feedback_terms: int = 4
    """feedback words searched as the second keyword query"""
    feedback_head: int = 5
    """first hits that keep their places when the feedback query's share is added"""
    phrase_weight: float = 1.0
    """weight of the phrase component: symbols whose source lines hold text the query quotes ('duplicated mapping key';
    retrieval/phrases.py)"""
    kind_weights: tuple[tuple[str, float], ...] = (("module", 0.5), ("class", 0.6), ("nested", 0.5))
    """fused score multiplier per symbol kind (1.0 if absent); "nested" = a function inside a function"""
    area_weights: tuple[tuple[str, float], ...] = (
        ("generated", 0.5), ("platform", 0.5), ("test", 0.5), ("vendored", 0.5),
    )
    """fused score multiplier for code in an area questions rarely ask about (retrieval/areas.py: tests, platform shims,
    generated and vendored code), unless the question names the area; a named symbol is never demoted"""
    areas_last_in_components: bool = True
    """the semantic and keyword rankings list the symbols of a demoted area (area_weights, unless asked for) after the
    others before they are fused, so tests and shims stop taking the ranks of the code a question is about"""
    graph_relation_weights: tuple[tuple[str, float], ...] = (
        ("calls", 1.0), ("inherits", 0.8), ("contains", 0.7), ("references", 0.5), ("imports", 0.2),
    )
    """graph expansion: weight of each edge kind between a seed and its neighbour"""
    graph_seeds: int = 8
    """the strongest fused hits whose graph neighbours are considered"""
    graph_hop_relevance: float = 0.0
    """a neighbour's hop score: relation weight x ((1 - b) + b x its own relevance to the query, 0..1); 0 = by relation
    weight alone (then ties by name)"""
    graph_neighbours: int = 6
    """neighbours taken per seed"""
    graph_support_weight: float = 0.5
    """graph support: direct hits (found by the semantic/keyword/name components) linked in the code graph to the
    graph_support_seeds strongest hits gain this x relation weight x the seed's relative strength (RRF units); nothing
    is added, so Light (no graph neighbours) gets it too when graph_support_light"""
    graph_support_seeds: int = 3
    """the strongest hits whose graph links lend support (``graph_support_weight``)"""
    graph_support_light: bool = True
    """in retrieval without graph neighbours (Light)"""
    graph_support_heavy: bool = False
    """in retrieval with graph neighbours (Heavy)"""
    mention_boost: float = 0.05
    """a symbol mentioned in the turn (a path, or an id the name component missed)"""
    mention_max_symbols: int = 8
    """a bare name mentioned that names more symbols than this personalizes none"""
    personalized_weight: float = 0.5
    """personalized PageRank from the pinned, mentioned and active symbols: hits whose closeness (0-1, relative to the
    closest symbol) is at least personalized_min gain personalized_weight x closeness (RRF units)"""
    personalized_min: float = 0.05
    """hits less close than this (0-1) gain nothing from personalized PageRank"""
    personalize_mentions_alone: bool = False
    """names in the query personalize the walk on their own (false: the name and scope components cover them; with a pin
    or activation they join the walk)"""
    keyword_column_weights: tuple[float, ...] = (4.0, 2.0, 1.0, 1.0, 0.5, 2.0)
    """BM25 column weights: name, identifier words, signature, doc, path, body (the card's excerpt)"""
    keyword_stopwords: tuple[str, ...] = (
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "could", "do", "does", "done", "for", "from",
        "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "so", "that", "the",
        "their", "then", "there", "this", "to", "too", "was", "what", "when", "where", "which", "who", "why",
        "will", "with", "would", "you", "your",
    )
    """words left out of a keyword query"""
    query_excerpts: bool = True
    """Heavy excerpts chosen by the query (retrieval/excerpts.py): the window of index.excerpt_lines lines of a symbol's
    body (after its signature and doc) that best matches the query's words, with file line numbers; off: the stored head
    of the symbol (its first lines)"""
    keyword_body_lines: int = 0
    """lines of a function's or method's body (read from its file) in the keyword index's body column; 0 = the card's
    excerpt (its first index.excerpt_lines lines)"""
    excerpt_context_lines: int = 3
    """lines kept above the first matching line of a chosen window"""
    excerpt_lines: int = 40
    """lines of a query-chosen excerpt (0 = index.excerpt_lines, the stored head's length)"""
    excerpt_top_lines: int = 60
    """lines of the excerpts of the ``excerpt_top_hits`` best hits (0: as ``excerpt_lines``)"""
    excerpt_top_hits: int = 2
    """the best hits whose excerpts get ``excerpt_top_lines`` lines"""
    excerpt_statement_lines: int = 12
    """a window that starts inside a nested block moves up, by at most this many lines, to the line opening the
    body-level statement that holds it (0 = off)"""
    excerpt_whole_slack: int = 16
    """a body at most this many lines longer than its window is sent whole (0 = off)"""
    excerpt_blank_lines: bool = False
    """blank lines of an excerpt are sent (their line numbers alone) or left out (the numbers show the gap); the lines a
    window covers do not change, only its tokens"""
    excerpt_occurrence_share: float = 0.5
    """a window's score is its distinct query words by weight plus this share of every matching line's weight: dense
    runs of matching lines outweigh one rare word"""
    excerpt_files_cached: int = 256
    """masked source files kept in memory for excerpts, with their lines' words"""
    min_semantic_similarity: float = 0.35
    """relevance floor: a hit is listed in the RetrievalSet but marked below it (the planner excludes its card with
    reason below_threshold) unless something says it is about the turn: named in the query (or a member of a class named
    there), a semantic similarity of at least this, a keyword hit on a word that is neither a stop word nor a chat word,
    a pin, or a graph neighbour of a hit above the floor"""
    query_clusters: bool = True
    """query clusters ("phases"; retrieval/query_clusters.py): each retrieval query of a session joins the current
    cluster when the cosine of its embedding to the cluster's centroid is at least cluster_threshold, else starts a new
    one (plans record the QueryClusterId; the overlay shows it). Off: queries are not clustered"""
    cluster_threshold: Annotated[float, Range(ge=-1, le=1)] = 0.2
    """a query joins the current cluster when its cosine to the cluster's centroid is at least this"""
    activation_scope: Literal["session", "cluster"] = "session"
    """"session": activation counts every use in the session (today's behaviour); "cluster": a query that starts a new
    cluster clears the activation scores, so only uses within the current cluster boost retrieval"""
    leases_end_with_cluster: bool = False
    """a lease (scope turn) created before a new cluster starts ends with it (off: leases count down as usual)"""
    chat_words: tuple[str, ...] = (
        "again", "ahead", "all", "awesome", "bye", "cheers", "continue", "cool", "evening", "excellent", "fine",
        "go", "good", "goodbye", "great", "hello", "hey", "hi", "just", "later", "let", "lets", "ll", "lol", "lot",
        "morning", "much", "nice", "night", "no", "nope", "now", "ok", "okay", "perfect", "please", "pls",
        "proceed", "really", "sorry", "sounds", "sure", "thank", "thanks", "thx", "today", "tomorrow", "tonight",
        "very", "yeah", "yep", "yes", "yup",
    )
    """words that do not say a keyword hit is about the turn (the relevance floor's chat words)"""
