"""The code retriever's section (``[retrieval]``): fusion, components, graph, excerpts, floor, query clusters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from ctxbench.config.constraints import PositiveInt
from ctxbench.validation import Range


@dataclass(frozen=True)
class RetrievalConfig:
    rrf_k: int = 10  # measured on the tune split: 10 beats 5/20/30/60 (benchmarks/README.md)
    semantic_weight: float = 1.0
    keyword_weight: float = 1.0
    graph_weight: float = 0.5
    pin_boost: float = 0.1  # boosts are in RRF units: a first place in one component is 1/(rrf_k+1)
    activation_boost: float = 0.05  # times the symbol's activation score
    candidate_pool: PositiveInt = 50
    default_k: PositiveInt = 20
    fusion: str = "rrf"  # rrf | score (weighted sum of normalized component scores); see benchmarks/README.md
    name_weight: float = 1.0  # weight of the exact-identifier component (a code identifier in the query)
    scope_weight: float = 1.0  # members of a class named in the query, in the order the other components gave
    # members of the classes the semantic or keyword component ranks among its first class_scope_top (the class is
    # the clue to a generically named method: "the sorted list's add"), in the order those components found them,
    # then by cosine to the query; one RRF component of weight class_scope_weight (0 = off). Round 4, ten seen
    # repositories: 0.5 x top 3 over 1.0 / 0.4 / 0.75 and top 2 / 4 / 5 / 10 (benchmarks/README.md)
    class_scope_weight: float = 0.5
    class_scope_top: int = 3
    # pseudo-relevance feedback for the keyword component (round 5, retriever.feedback_ranking): the first
    # feedback_hits symbols of a first fusion lend the feedback_terms most distinctive words of their ids and
    # signatures (not in the query; IDF over the repository's cards, 1 / rank), searched as a second keyword query
    # whose RRF share (weight prf_keyword_weight, 0 = off) is added last to the hits the keyword, name, scope or
    # phrase components found (it adds none), below the first feedback_head hits, which keep their places.
    # Round 5, twelve seen repositories (373 questions, on class x 0.6): R@10 0.752 -> 0.765, Heavy all gold
    # 0.684 -> 0.697, Light 0.542 -> 0.552, R@5 unchanged (0.653); weight 0.5 over 0.25 / 0.4 / 0.6 / 1.0, 3 hits
    # over 2 / 5, 4 words over 2 / 6; as a component fused with the others (no head) R@5 fell 0.644 -> 0.625.
    # Off by default for its cost: warm retrieval on textual (idle, bench perf --only retrieve) median / p95 22.9 /
    # 30.6 ms with it against 19.7 / 24.3 without, over the Light p95 target of 30 ms, and its extra FTS5 query is as
    # dear as the question's own keyword search (benchmarks/README.md, round 5; unseen code: R@10 0.733 with it,
    # 0.742 without). 0.5 is the tuned weight for whoever makes it cheaper
    prf_keyword_weight: float = 0.0
    feedback_hits: int = 3
    feedback_terms: int = 4
    feedback_head: int = 5
    # symbols whose source lines hold text the query quotes ('duplicated mapping key'): retrieval/phrases.py
    phrase_weight: float = 1.0  # (tune: 1.0 over 2.0)
    # fused score multiplier per symbol kind (1.0 if absent); "nested" = a function inside a function. class 0.6
    # (round 5, twelve seen repositories, 373 questions: R@5 0.644 -> 0.653, R@10 and Heavy all gold unchanged; 0.8
    # was tuned on textual alone; 0.5 / 0.7 lowered R@10 or Heavy; nested 0.75 / 1.0 and module 0.4 did not pay)
    kind_weights: tuple[tuple[str, float], ...] = (("module", 0.5), ("class", 0.6), ("nested", 0.5))
    # fused score multiplier for code in an area questions rarely ask about (retrieval/areas.py: tests, platform
    # shims, generated and vendored code), unless the question names the area; a named symbol is never demoted
    area_weights: tuple[tuple[str, float], ...] = (
        ("generated", 0.5), ("platform", 0.5), ("test", 0.5), ("vendored", 0.5),
    )
    # the semantic and keyword rankings list the symbols of a demoted area (area_weights, unless asked for) after the
    # others before they are fused, so tests and shims stop taking the ranks of the code a question is about
    # (round 4, ten seen repositories: R@5 +0.006, R@10 +0.004, Heavy all gold unchanged)
    areas_last_in_components: bool = True
    # graph expansion: weight of each edge kind between a seed and its neighbour
    graph_relation_weights: tuple[tuple[str, float], ...] = (
        ("calls", 1.0), ("inherits", 0.8), ("contains", 0.7), ("references", 0.5), ("imports", 0.2),
    )
    graph_seeds: int = 8  # the strongest fused hits whose graph neighbours are considered (tune: 8 over 5)
    # a neighbour's hop score: relation weight x ((1 - b) + b x its own relevance to the query, 0..1); 0 = by
    # relation weight alone (then ties by name)
    graph_hop_relevance: float = 0.0
    graph_neighbours: int = 6  # neighbours taken per seed (tune: 6 over 12 and 4)
    # graph support: direct hits (found by the semantic/keyword/name components) linked in the code graph to the
    # graph_support_seeds strongest hits gain graph_support_weight x relation weight x the seed's relative
    # strength (RRF units); nothing is added, so Light (no graph neighbours) gets it too when graph_support_light
    # (tune, Light only: 0.5 over 0.25 / 0.75 / 1.0, 3 seeds over 2 / 5; in Heavy it lowered R@10 and Heavy all gold)
    graph_support_weight: float = 0.5
    graph_support_seeds: int = 3
    graph_support_light: bool = True  # in retrieval without graph neighbours (Light)
    graph_support_heavy: bool = False  # in retrieval with graph neighbours (Heavy)
    mention_boost: float = 0.05  # a symbol mentioned in the turn (a path, or an id the name component missed)
    mention_max_symbols: int = 8  # a bare name mentioned that names more symbols than this personalizes none
    # personalized PageRank from the pinned, mentioned and active symbols: hits whose closeness (0-1, relative
    # to the closest symbol) is at least personalized_min gain personalized_weight x closeness (RRF units)
    personalized_weight: float = 0.5
    personalized_min: float = 0.05
    # names in the query alone do not personalize (the name and scope components cover them: R@10 on tune
    # 0.919 without, 0.909 / 0.887 with at weight 0.25 / 1.0); with a pin or activation they join the walk
    personalize_mentions_alone: bool = False
    # BM25 column weights: name, identifier words, signature, doc, path, body (the card's excerpt)
    keyword_column_weights: tuple[float, ...] = (4.0, 2.0, 1.0, 1.0, 0.5, 2.0)
    keyword_stopwords: tuple[str, ...] = (
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "could", "do", "does", "done", "for", "from",
        "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "so", "that", "the",
        "their", "then", "there", "this", "to", "too", "was", "what", "when", "where", "which", "who", "why",
        "will", "with", "would", "you", "your",
    )
    # Heavy excerpts chosen by the query (retrieval/excerpts.py): the window of index.excerpt_lines lines of a
    # symbol's body (after its signature and doc) that best matches the query's words, with file line numbers;
    # off: the stored head of the symbol (its first lines)
    query_excerpts: bool = True
    # lines of a function's or method's body (read from its file) in the keyword index's body column; 0 = the
    # card's excerpt (its first index.excerpt_lines lines)
    keyword_body_lines: int = 0
    excerpt_context_lines: int = 3  # lines kept above the first matching line of a chosen window
    # lines of a query-chosen excerpt (0 = index.excerpt_lines, the stored head's length), and of the excerpts of
    # the excerpt_top_hits best hits (0: as the others); tune: 40 / 60 x 2 answered 0.694 of the how/bug
    # questions against 0.556 at 30, Heavy all gold unchanged (60 for every hit lost a Heavy question)
    excerpt_lines: int = 40
    excerpt_top_lines: int = 60
    excerpt_top_hits: int = 2
    # a window that starts inside a nested block moves up, by at most this many lines, to the line opening the
    # body-level statement that holds it (0 = off; round 5, twelve seen repositories, 189 how/bug questions with
    # marked lines: excerpt answers 0.609 -> 0.640 at 12, 16 and 24 (8: 0.635, 40: 0.635), Heavy all gold and
    # R@k unchanged; the windows it mends started one to seven lines below an ``except``/``if``/``for`` they hang on)
    excerpt_statement_lines: int = 12
    # a body at most this many lines longer than its window is sent whole (0 = off; round 5, with the statement
    # start above and blank lines kept: 0.640 -> 0.651 at 6, 0.656 at 8, 0.661 at 10 and 12 but Heavy all gold
    # 0.684 -> 0.681 there; with the two keys below: 12 0.682, 16 0.688, 20 0.688 but Heavy 0.681)
    excerpt_whole_slack: int = 16
    # blank lines of an excerpt are sent (their line numbers alone) or left out (the numbers show the gap); the
    # lines a window covers do not change, only its tokens (round 5: alone 0.656 / Heavy 0.684 -> 0.656 / 0.681;
    # with the occurrence share below it gives back the Heavy question the wider choices cost)
    excerpt_blank_lines: bool = False
    # a window's score is its distinct query words by weight plus this share of every matching line's weight
    # (excerpts.OCCURRENCE_SHARE, 0.05, before round 5). Round 5, blank lines out, slack 12: 0.3 / 0.5 / 1.0 answer
    # 0.677 / 0.682 / 0.677 against 0.656 at 0.05, Heavy all gold unchanged (slack 16: 0.3 0.682, 0.5 0.688); 0.3
    # with blank lines kept lost a Heavy question. Dense runs of matching lines now outweigh one rare word
    excerpt_occurrence_share: float = 0.5
    # masked source files kept in memory for excerpts, with their lines' words (textual's 247 files take ~23 MB; a
    # file read and masked again costs ~4 ms, and 64 made the files of a session's varied questions churn)
    excerpt_files_cached: int = 256
    # Relevance floor: a hit is listed in the RetrievalSet but marked below it (the planner excludes its card
    # with reason below_threshold) unless something says it is about the turn: named in the query (or a member
    # of a class named there), a semantic similarity of at least min_semantic_similarity, a keyword hit on a
    # word that is neither a stop word nor a chat word, a pin, or a graph neighbour of a hit above the floor.
    # Measured on the tune split and on chit-chat turns (benchmarks/README.md).
    min_semantic_similarity: float = 0.35
    # Query clusters ("phases", seed 002; retrieval/query_clusters.py): each retrieval query of a session joins the
    # current cluster when the cosine of its embedding to the cluster's centroid is at least cluster_threshold, else
    # starts a new one (plans record the QueryClusterId; the overlay shows it). Off: queries are not clustered.
    # 0.2: on five hand-written conversations (MiniLM, benchmarks/query_clusters_check.py) follow-ups scored 0.26-0.77
    # to their centroid and topic changes -0.05-0.17; 0.2 and 0.25 both split them right, 0.3 split a follow-up
    query_clusters: bool = True
    cluster_threshold: Annotated[float, Range(ge=-1, le=1)] = 0.2
    # "session": activation counts every use in the session (today's behaviour); "cluster": a query that starts a
    # new cluster clears the activation scores, so only uses within the current cluster boost retrieval
    activation_scope: Literal["session", "cluster"] = "session"
    # a lease (scope turn) created before a new cluster starts ends with it (off: leases count down as usual)
    leases_end_with_cluster: bool = False
    chat_words: tuple[str, ...] = (
        "again", "ahead", "all", "awesome", "bye", "cheers", "continue", "cool", "evening", "excellent", "fine",
        "go", "good", "goodbye", "great", "hello", "hey", "hi", "just", "later", "let", "lets", "ll", "lol", "lot",
        "morning", "much", "nice", "night", "no", "nope", "now", "ok", "okay", "perfect", "please", "pls",
        "proceed", "really", "sorry", "sounds", "sure", "thank", "thanks", "thx", "today", "tomorrow", "tonight",
        "very", "yeah", "yep", "yes", "yup",
    )
