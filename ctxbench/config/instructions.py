"""The standing-instruction detector's section (``[planner.instructions]``)."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import Penalty


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

    threshold: float = 0.5
    """a message is a standing instruction when its score is at least this"""
    # -- cues for (regular expressions, any case)
    scope_weight: float = 2.0
    """it says it holds beyond this message"""
    scope_patterns: tuple[str, ...] = (
        r"\bfrom (now|here) on\b", r"\bgoing forward\b", r"\bfor (the|this) (whole|entire|rest of (the|this)) "
        r"(session|conversation|project|chat)\b", r"\bfor this (whole |entire )?(session|conversation|project)\b",
        r"\bthroughout\b", r"\bwhenever\b", r"\bevery (time|new)\b", r"\bfor anything new\b", r"\bground rules?\b",
        r"\b(in|for|of) (this|the|our) (project|repo|repository|codebase|team)\b", r"\bunless I say\b",
    )
    """cues that a message holds beyond itself (``scope_weight``)"""
    norm_weight: float = 1.2
    """a rule's words: always, never, must, only, prefer, instead of, convention"""
    norm_patterns: tuple[str, ...] = (
        r"\b(always|never|must|mustn't|has to|have to|is required|are required|only)\b", r"\bprefer\b",
        r"\b(rather than|instead of)\b", r"\b(convention|rule of thumb|policy|minimum|maximum|max|default)\b",
        r"\b(do not|don't) (use|suggest|add|write|commit|touch|put|run|push|call|log|store)\b", r"\b\w+, not \w+",
        r"\bget rejected\b|\bnot allowed\b|\bforbidden\b",
    )
    """cues of a rule's words (``norm_weight``)"""
    notice_weight: float = 1.5
    """it announces something to keep: heads up, keep in mind, important, assume"""
    notice_patterns: tuple[str, ...] = (
        r"\bjust so you know\b", r"\bheads[- ]up\b", r"\bkeep in mind\b", r"^\s*remember\b", r"\bnote that\b",
        r"^\s*important\b", r"\bfyi\b", r"^\s*(assume|treat|consider)\b", r"\bfor (your|the) record\b",
    )
    """cues of an announcement to keep (``notice_weight``)"""
    setup_weight: float = 1.0
    """a present-tense fact about the setup: "our X", "we use / deploy / target", "the X is called / listens on\""""
    setup_patterns: tuple[str, ...] = (
        r"^\s*(our|we|all|every|any)\b", r"\bwe (use|deploy|run|target|support|host|ship|store|keep|build)\b",
        r"\b(is|are) (called|named|read-only|stored|kept|hosted|the only|on|in|at)\b",
        r"\b(lives?|listens?|runs?|accepts?|speaks?|targets?) (on|in|at|only|with|through)?\b",
        r"\bport \d+\b", r"\b(v|version )?\d+(\.\d+)* is the\b",
    )
    """cues of a present-tense fact about the setup (``setup_weight``)"""
    style_weight: float = 1.5
    """the way to answer: "answer in German", "keep replies short", "write commit messages in ...\""""
    style_patterns: tuple[str, ...] = (
        r"^\s*(please )?(answer|reply|respond|write|keep|use|show|give|put|format|name|spell)\b[^.?!]*\b(in|under|as|"
        r"short|brief|first|instead|rather|only|like)\b",
        r"\b(replies|answers|explanations|responses)\b",
    )
    """cues of the way to answer (``style_weight``)"""
    # -- cues against
    question_weight: Penalty = -3.0
    """it asks: a question mark, or it opens like a question"""
    question_patterns: tuple[str, ...] = (
        r"\?\s*$", r"^\s*(what|which|why|how|where|when|who|whose|is|are|was|were|do|does|did|can|could|would|should|"
        r"will|shall|may|have|has)\b",
    )
    """cues of a question (``question_weight``)"""
    chat_weight: Penalty = -2.5
    """chit-chat: thanks, haha, good morning, never mind"""
    chat_patterns: tuple[str, ...] = (
        r"^\s*(thanks|thank you|thx|haha|lol|hmm+|oh|ok|okay|sounds good|great|nice|cool|good (morning|night|evening)|"
        r"hi|hello|hey|never mind|nevermind|sorry|oops|wow|yes|no|sure)\b",
        r"\bI wonder\b", r"^\s*let me\b",
    )
    """cues of chit-chat (``chat_weight``)"""
    once_weight: Penalty = -1.5
    """a request for now: "now", "again", "this time", "for now", a definite object"""
    once_patterns: tuple[str, ...] = (
        r"\b(right )?now\b(?! on)", r"\bagain\b", r"\bthis time\b", r"\bso far\b", r"\bfor now\b",
        r"\bquick(ly)?\b", r"\bthe (last|previous|next) (step|change|one|commit|run)\b",
        r"^\s*(please )?(fix|rename|delete|remove|print|paste|run|try|move|add|create|open|check|explain|show|tell|"
        r"list|summari[sz]e|translate|refactor|update|undo|revert)\b(?![^.?!]*\b(always|every|whenever|from now)\b)",
        # a thing made once: "write me a ...", "put that on ...", "save a memo"
        r"^\s*(please )?(put|note|save|write|draft|make|send|give|create|build|generate)( me)? (that|it|this|a|an|one)\b",
    )
    """cues of a one-off request (``once_weight``)"""
    past_weight: Penalty = -1.5
    """it tells what happened: yesterday, took, was, broke"""
    past_patterns: tuple[str, ...] = (
        r"\b(yesterday|last (night|week|time)|earlier today|this morning)\b",
        r"\b(was|were|took|had|did|went|broke|found|tried|got|happened)\b",
    )
    """cues of a past event (``past_weight``)"""
    # -- by meaning (when the message's vector is at hand: compaction's preview, the detector bench)
    semantic_weight: float = 2.0
    """times (best cosine to ``prototypes`` - best cosine to ``counter_prototypes``), added to the score"""
    prototypes: tuple[str, ...] = (
        "From now on, always do it this way for the rest of the session.",
        "Our service runs on this server and listens on that port.",
        "We use this database version, not the other one.",
        "Keep every answer short and reply in a given language.",
        "Never do this in our codebase; the rule is to do that instead.",
        "Remember this constraint for the whole project.",
    )
    """messages that are standing instructions, compared by meaning"""
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
    """messages that are not (questions, thanks, one-off requests, past events), compared by meaning"""
