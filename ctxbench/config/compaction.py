"""Summaries of history (``[compaction]``)."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import PositiveFloat, PositiveInt, Share


@dataclass(frozen=True)
class CompactionConfig:
    """Summaries of history (``/compact``, ``ctxbench compact``) and the auto-compact warning (seed 004)."""

    auto_threshold: Share = 0.8
    """warn (meter, notice) when sending the whole remaining history would take this share of the budget; per session:
    ``/compact auto 80%``; 0 turns the warning off. Nothing is ever compacted silently."""
    auto_target: Share = 0.5
    """``bench compaction --auto``: also compact to this share of the plan budget"""
    target_ratio: Share = 0.5
    """the one default target: /compact without TOKENS, compact without --target-tokens, and the preview the
    auto-compact warning offers compact the history (as plans send it) to this share of its tokens"""
    keep_recent_turns: int = 4
    """the newest turns are kept verbatim (the user may still summarise them)"""
    summary_ratio: Share = 0.12
    """a summary's length: this share of the tokens it replaces (never more than the target leaves after the kept turns)
    ..."""
    summary_min_tokens: PositiveInt = 60
    """a summary is at least this many tokens (``summary_ratio``)"""
    summary_max_tokens: PositiveInt = 1500
    """a summary is at most this many tokens (``summary_ratio``)"""
    squeeze_warning: PositiveFloat = 50.0
    """a summary more than this many times smaller than the turns it replaces is flagged in the preview, with the turns
    it keeps no line of (their originals stay findable by the retrieval strategies)"""
    first_words_chars: PositiveInt = 60
    """characters of a turn's user message shown in a preview row"""
    keyword_weight: float = 1.0
    """the extractive summariser scores sentences by named signals: the keyword weight of their terms, times this"""
    semantic_weight: float = 0.5
    """a sentence's similarity to the covered turns' centroid, times this (when an embedder is ready)"""
    decision_bonus: float = 0.8
    """a sentence's bonus for a decision (``decision_words``: "we decided", "switch to", "instead", "use X")"""
    error_bonus: float = 0.8
    """a sentence's bonus for an error, a failure, a traceback or its fix (``error_words``)"""
    identifier_bonus: float = 0.15
    """a sentence's bonus per code identifier (CamelCase, snake_case, dotted names, paths), up to 4"""
    user_bonus: float = 0.3
    """a sentence's bonus for being the user's own words"""
    sentence_max_chars: PositiveInt = 280
    """a longer sentence is cut to this many characters"""
    tool_lines: int = 2
    """lines of a tool result considered (its first line, error lines first)"""
    decision_words: tuple[str, ...] = (
        "decided", "decide", "decision", "agreed", "chose", "choose", "switch to", "instead", "we will", "we'll",
        "let's", "plan is", "going with", "from now on", "always", "never", "must", "should", "rule")
    """words that mark a sentence as a decision (``decision_bonus``)"""
    error_words: tuple[str, ...] = (
        "error", "exception", "traceback", "failed", "failing", "fails", "failure", "bug", "broken", "crash",
        "fixed", "fix", "regression", "assert")
    """words that mark a sentence as about an error or its fix (``error_bonus``)"""
    prompt: str = (
        "Summarise the conversation above for the assistant that will continue it. Keep: the user's "
        "standing instructions and decisions, what was done and why, errors met and how they were fixed, "
        "file paths, symbol names and commands, and open questions. Plain sentences, no preamble; at most "
        "{max_tokens} tokens.")
    """with a model configured, it writes the summary; this is its instruction"""
    model_reply_tokens: PositiveInt = 1500
    """max_tokens of the model's summary call"""
