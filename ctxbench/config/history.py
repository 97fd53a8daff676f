"""The history strategies' sections: truncation tiers, hybrid, levels, semantic and fused (``[planner.*]``)."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import PositiveFloat, PositiveInt, Share


@dataclass(frozen=True)
class TruncationConfig:
    """Tool-result truncation tiers (seed 001)."""

    active_recent_count: int = 5
    """tool results of the latest turns that count as active and recent"""
    active_recent_chars: int = 5000
    """characters an active, recent tool result is cut to"""
    active_older_chars: int = 1000
    """characters an active, older tool result is cut to"""
    inactive_chars: int = 300
    """characters a tool result of an inactive turn is cut to"""


@dataclass(frozen=True)
class HybridConfig:
    """Hybrid keyword + recency history strategy (seed 000)."""

    rrf_k: int = 60
    """the RRF constant fusing the keyword and recency rankings"""
    keyword_weight: float = 1.5
    """weight of the keyword (BM25) ranking in the fusion"""
    recency_weight: float = 1.0
    """weight of the recency ranking in the fusion"""
    subset_rule: bool = True
    """rank by recency only among the turns the keyword search found (when it found any)"""
    keyword_candidates: int = 100
    """groups ranked by BM25 for the query (store.search_groups limit)"""


@dataclass(frozen=True)
class LevelsConfig:
    """Hierarchical levels (seed 004); budgets are tokens at reference_budget, scaled to the plan's budget."""

    reference_budget: PositiveInt = 16000
    """the plan budget at which the level budgets below hold as written"""
    permanent_tokens: int = 2000
    """tokens of the permanent level (standing instructions)"""
    session_tokens: int = 4000
    """tokens of the session level (atoms flagged with ``session_flags``)"""
    working_tokens: int = 8000
    """tokens of the working level (the latest ``working_groups`` turns); the volatile level gets whatever remains"""
    working_groups: int = 6
    """the latest turns whose every atom is in the working level"""
    instruction_flag: str = "instruction"
    """importance flag that makes a user message permanent"""
    instruction_phrases: tuple[str, ...] = ("always", "never", "must", "from now on", "remember")
    """a user message containing one of these (whole words, any case) is a standing instruction"""
    session_flags: tuple[str, ...] = ("error", "solution", "decision")
    """atoms kept at the session level"""


@dataclass(frozen=True)
class SemanticHistoryConfig:
    """Semantic sliding window (seed 003): similarity + recency + importance flags."""

    similarity_weight: float = 1.0
    """weight of a turn's similarity to the query (it outweighs recency)"""
    recency_weight: float = 0.15
    """weight of a turn's recency beside its similarity"""
    recency_half_life_groups: PositiveFloat = 20.0
    """turns after which a turn's recency score halves"""
    importance_weights: tuple[tuple[str, float], ...] = (
        ("user_starred", 0.8),
        ("solution", 0.7),
        ("error", 0.6),
        ("instruction", 0.6),
        ("question", 0.5),
        ("code", 0.4),
    )
    """importance flag and the score it adds to a turn"""
    candidates: int = 0
    """earlier turns offered to the strategy, most similar to the query first (each turn's text embedded with the code
    retriever's model: retrieval/history_vectors.py); 0 = every one"""
    summarised_min_z: float = 1.0
    """a turn a summary stands in for competes only when its similarity is at least the ranking's mean plus this many
    standard deviations (the query points at it); the summary stands in for the rest"""
    min_similarity: float = 0.0
    """turns less similar than this are not offered"""
    embed_reply_chars: int = 300
    """characters of the assistant's replies in a turn's embedded text (its user message, then the start of the replies;
    tool calls and results are left out: they drown the user's words)"""
    embed_max_chars: PositiveInt = 2000
    """characters of a turn's embedded text"""
    embed_max_seq_length: PositiveInt = 256
    """model tokens of a turn's text and of the query"""


@dataclass(frozen=True)
class FusedConfig:
    """The default history strategy ``fused``: single messages (atoms) ranked by meaning, keywords, their
    neighbours, their episode and the speaker the query names; the latest turn and standing instructions first.

    Weights were chosen on the LoCoMo tune conversations (26, 30, 41-44) only; benchmarks/README.md has
    the measurements and the held-out figures."""

    keyword_weight: float = 4.0
    """BM25 / the query's best BM25, times this, beside the z-scored similarity"""
    neighbour_weight: float = 0.4
    """share of the better chronological neighbour's relevance an atom gains"""
    episode_weight: float = 0.8
    """times the mean relevance of the best ``episode_top`` atoms of its episode"""
    episode_top: int = 3
    """atoms of an episode whose mean relevance ``episode_weight`` multiplies"""
    episode_gap_hours: float = 3.0
    """a pause this long between two turns starts a new episode (a sitting)"""
    speaker_weight: float = 4.0
    """atoms whose speaker label ("Name: ...") the query names, when it names one and the history reads as a transcript
    (``speaker_share``)"""
    temporal_weight: float = 1.5
    """"when" questions (``temporal_query_patterns``): atoms that say when something happened ("yesterday", "last week",
    "in May") gain this; a message's leading "[date]" stamp does not count (it says when it was written)"""
    temporal_query_patterns: tuple[str, ...] = (
        r"^\s*when\b", r"\b(what|which) (year|month|day|date|week|weekend|time)\b", r"\bhow long ago\b",
    )
    """a query matching any of these (regular expressions, any case) is a "when" question"""
    temporal_text_patterns: tuple[str, ...] = (
        r"\b(yesterday|today|tonight|tomorrow|ago|recently|lately|soon|earlier|later)\b",
        r"\b(last|next|this|past|coming|previous|few|couple of|other) (night|morning|evening|day|days|week|weeks|"
        r"weekend|month|months|year|years|summer|winter|spring|fall|autumn|time)\b",
        r"\b(mon|tues|wednes|thurs|fri|satur|sun)days?\b",
        r"(?-i:\b(January|February|March|April|May|June|July|August|September|October|November|December)\b)",
        r"\b(19|20)\d\d\b",
    )
    """an atom matching any of these (regular expressions, any case) says when something happened"""
    summarised_min_base: float = 1.0
    """an atom of a turn a summary stands in for competes only when the query points at it: a keyword match, or a base
    relevance (z-scored similarity + keyword part) of at least this; the summary stands in for the rest"""
    recent_groups: int = 1
    """the latest turns, carried first (continuity)"""
    recent_share: float = 0.05
    """the latest turns (``recent_groups``) are carried within this share of the history budget (a longer turn: its user
    message first)"""
    instruction_share: float = 0.15
    """standing instructions (user messages that set a rule), within this share"""
    instruction_patterns: tuple[str, ...] = (
        r"\bfrom now on\b", r"\bground rules?\b", r"\bgoing forward\b", r"\bfor the rest of (this|the) session\b",
        # a sentence that opens with always / never and an instruction verb ("Never commit to main."); chat like
        # "Never give up!" is not a rule
        r"(^|[.!?:;—–]\s*)(always|never|do not ever|don't ever)\s+(use|run|write|commit|push|add|call|keep|put|"
        r"check|test|touch|edit|change|delete|remove|import|return|format|name|prefer|avoid|include|make|store|"
        r"log|print|mock|merge|rebase|deploy|hard-?code|rely|assume|catch|raise|throw|ask|read)\b",
    )
    """a user message setting a standing rule: any of these (case-insensitive regular expressions)"""
    speaker_share: Share = 0.5
    """a history whose messages with a text open with a speaker label ("Caroline: ...") at least this often is a
    transcript of speakers: their labels (and a leading "[date]" stamp) are left out of the texts compared by meaning,
    and their names out of the query's (``speaker_weight`` weighs the speaker a query names); 0: never"""
    keyword_candidates: int = 500
    """messages ranked by BM25 for a query"""
    embed_per_plan: int = 64
    """messages (turns, for the semantic strategy) a plan embeds itself when their vectors are missing; the rest are
    embedded by the warm-up (HistoryRanker.warm: in the background in the workbench, with progress in the CLI)"""
