"""The history strategies' sections: truncation tiers, hybrid, levels, semantic and fused (``[planner.*]``)."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import PositiveFloat, PositiveInt, Share


@dataclass(frozen=True)
class TruncationConfig:
    """Tool-result truncation tiers (seed 001)."""

    active_recent_count: int = 5
    active_recent_chars: int = 5000
    active_older_chars: int = 1000
    inactive_chars: int = 300


@dataclass(frozen=True)
class HybridConfig:
    """Hybrid keyword + recency history strategy (seed 000)."""

    rrf_k: int = 60
    keyword_weight: float = 1.5
    recency_weight: float = 1.0
    subset_rule: bool = True
    keyword_candidates: int = 100  # groups ranked by BM25 for the query (store.search_groups limit)


@dataclass(frozen=True)
class LevelsConfig:
    """Hierarchical levels (seed 004); budgets are tokens at reference_budget, scaled to the plan's budget."""

    reference_budget: PositiveInt = 16000
    permanent_tokens: int = 2000
    session_tokens: int = 4000
    working_tokens: int = 8000
    working_groups: int = 6
    # volatile: whatever remains
    instruction_flag: str = "instruction"  # importance flag that makes a user message permanent
    # a user message containing one of these (whole words, any case) is a standing instruction
    instruction_phrases: tuple[str, ...] = ("always", "never", "must", "from now on", "remember")
    session_flags: tuple[str, ...] = ("error", "solution", "decision")  # atoms kept at the session level


@dataclass(frozen=True)
class SemanticHistoryConfig:
    """Semantic sliding window (seed 003): similarity + recency + importance flags."""

    # similarity outweighs recency (it was 0.4 against 0.3: on LoCoMo the recent turns filled every budget)
    similarity_weight: float = 1.0
    recency_weight: float = 0.15
    recency_half_life_groups: PositiveFloat = 20.0
    importance_weights: tuple[tuple[str, float], ...] = (
        ("user_starred", 0.8),
        ("solution", 0.7),
        ("error", 0.6),
        ("instruction", 0.6),
        ("question", 0.5),
        ("code", 0.4),
    )
    # the similarity ranking (retrieval/history_vectors.py): each earlier turn's text embedded with the
    # code retriever's model, compared with the query
    candidates: int = 0  # earlier turns offered to the strategy, most similar first (0 = every one; 20 capped it)
    # a turn a summary stands in for competes only when its similarity is at least the ranking's mean plus this
    # many standard deviations (the query points at it); the summary stands in for the rest
    summarised_min_z: float = 1.0
    min_similarity: float = 0.0  # turns less similar than this are not offered
    # a turn's embedded text: its user message, then the start of the assistant's replies; tool calls and
    # results are left out (measured on the long session: they drown the user's words; benchmarks/README.md)
    embed_reply_chars: int = 300  # characters of the assistant's replies in a turn's embedded text
    embed_max_chars: PositiveInt = 2000  # characters of a turn's embedded text
    embed_max_seq_length: PositiveInt = 256  # model tokens of a turn's text and of the query


@dataclass(frozen=True)
class FusedConfig:
    """The default history strategy ``fused``: single messages (atoms) ranked by meaning, keywords, their
    neighbours, their episode and the speaker the query names; the latest turn and standing instructions first.

    Weights were chosen on the LoCoMo tune conversations (26, 30, 41-44) only; benchmarks/README.md has
    the measurements and the held-out figures."""

    # tune conversations, evidence recall at 512 / 1,024 / 2,048 / 4,096 (benchmarks/README.md has every step)
    keyword_weight: float = 4.0  # BM25 / the query's best BM25, times this, beside the z-scored similarity
    neighbour_weight: float = 0.4  # share of the better chronological neighbour's relevance an atom gains
    episode_weight: float = 0.8  # times the mean relevance of the best ``episode_top`` atoms of its episode
    episode_top: int = 3
    episode_gap_hours: float = 3.0  # a pause this long between two turns starts a new episode (a sitting)
    # atoms whose speaker label ("Name: ...") the query names, when it names one and the history reads as a
    # transcript (``speaker_share``)
    speaker_weight: float = 4.0
    # "when" questions (``temporal_query_patterns``): atoms that say when something happened ("yesterday", "last
    # week", "in May") gain this; a message's leading "[date]" stamp does not count (it says when it was written)
    temporal_weight: float = 1.5
    temporal_query_patterns: tuple[str, ...] = (
        r"^\s*when\b", r"\b(what|which) (year|month|day|date|week|weekend|time)\b", r"\bhow long ago\b",
    )
    temporal_text_patterns: tuple[str, ...] = (
        r"\b(yesterday|today|tonight|tomorrow|ago|recently|lately|soon|earlier|later)\b",
        r"\b(last|next|this|past|coming|previous|few|couple of|other) (night|morning|evening|day|days|week|weeks|"
        r"weekend|month|months|year|years|summer|winter|spring|fall|autumn|time)\b",
        r"\b(mon|tues|wednes|thurs|fri|satur|sun)days?\b",
        r"(?-i:\b(January|February|March|April|May|June|July|August|September|October|November|December)\b)",
        r"\b(19|20)\d\d\b",
    )
    # an atom of a turn a summary stands in for competes only when the query points at it: a keyword match, or a
    # base relevance (z-scored similarity + keyword part) of at least this; the summary stands in for the rest
    summarised_min_base: float = 1.0
    recent_groups: int = 1  # the latest turns, carried first (continuity)
    recent_share: float = 0.05  # ... within this share of the history budget (a longer turn: its user message first)
    instruction_share: float = 0.15  # standing instructions (user messages that set a rule), within this share
    # a user message setting a standing rule: any of these (case-insensitive regular expressions)
    instruction_patterns: tuple[str, ...] = (
        r"\bfrom now on\b", r"\bground rules?\b", r"\bgoing forward\b", r"\bfor the rest of (this|the) session\b",
        # a sentence that opens with always / never and an instruction verb ("Never commit to main."); chat like
        # "Never give up!" is not a rule
        r"(^|[.!?:;—–]\s*)(always|never|do not ever|don't ever)\s+(use|run|write|commit|push|add|call|keep|put|"
        r"check|test|touch|edit|change|delete|remove|import|return|format|name|prefer|avoid|include|make|store|"
        r"log|print|mock|merge|rebase|deploy|hard-?code|rely|assume|catch|raise|throw|ask|read)\b",
    )
    # a history whose messages with a text open with a speaker label ("Caroline: ...") at least this often is a
    # transcript of speakers: their labels (and a leading "[date]" stamp) are left out of the texts compared by
    # meaning, and their names out of the query's (``speaker_weight`` weighs the speaker a query names); 0: never
    speaker_share: Share = 0.5
    keyword_candidates: int = 500  # messages ranked by BM25 for a query
    # messages (turns, for the semantic strategy) a plan embeds itself when their vectors are missing; the rest are
    # embedded by the warm-up (HistoryRanker.warm: in the background in the workbench, with progress in the CLI)
    embed_per_plan: int = 64
