"""Standing instructions recognised by what they say: a rule, a constraint or a fact the user gives for the
whole session ("the staging API listens on port 8443", "we use Postgres 15, not MySQL", "answer in German"),
told apart from questions, chit-chat and one-off requests.

Pure: text (and, where the caller has it, the message's unit vector and the prototypes' vectors) in, a verdict
out. The cues and their weights are named in ``config.InstructionConfig``; each family of cues counts once:

    score = sum of the weights of the cue families found
            + semantic_weight * (best cosine to the prototypes - best cosine to the counter-prototypes)

A message is a standing instruction when ``score >= threshold``. The user's own word wins: the ``instruction``
flag marks one, the ``not_instruction`` flag unmarks one the detector found.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from ctxbench.config import InstructionConfig

MARK_FLAG = "instruction"  # the user marked the message a standing instruction
UNMARK_FLAG = "not_instruction"  # the user said it is none, whatever the detector finds
MAX_CHARS = 600  # a longer message is a task description or a paste, judged by its first sentences only
CACHE = 65536

FAMILIES = ("scope", "norm", "notice", "setup", "style", "question", "chat", "once", "past")


@dataclass(frozen=True)
class Verdict:
    instruction: bool
    score: float
    cues: tuple[str, ...]  # the cue families found, e.g. ("scope", "setup")
    semantic: float = 0.0  # the semantic term (0 without vectors)

    def describe(self) -> str:
        parts = list(self.cues) + ([f"meaning {self.semantic:+.2f}"] if self.semantic else [])
        return f"score {self.score:.2f} ({', '.join(parts) or 'no cue'})"


@lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    parts = [p for p in patterns if p]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE | re.MULTILINE) if parts else None


def _lead(text: str) -> str:
    """The text judged: its first ``MAX_CHARS`` characters, code fences left out, whitespace folded per line."""
    text = re.sub(r"```.*?(```|$)", " ", text, flags=re.DOTALL)[:MAX_CHARS]
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


def cue_score(text: str, config: InstructionConfig) -> tuple[float, tuple[str, ...]]:
    """(the cue part of the score, the families found) of a user's message."""
    return _cue_score(_lead(text), config)


@lru_cache(maxsize=CACHE)
def _cue_score(lead: str, config: InstructionConfig) -> tuple[float, tuple[str, ...]]:
    if not lead:
        return 0.0, ()
    score = 0.0
    found: list[str] = []
    for family in FAMILIES:
        pattern = _compiled(getattr(config, f"{family}_patterns"))
        if pattern is not None and pattern.search(lead):
            score += getattr(config, f"{family}_weight")
            found.append(family)
    return score, tuple(found)


def semantic_term(vector: Any, prototypes: Any, counter: Any, config: InstructionConfig) -> float:
    """``semantic_weight`` * (best cosine to the prototypes - best to the counter-prototypes); vectors unit-length
    (rows of ``prototypes`` / ``counter``)."""
    if vector is None or prototypes is None or counter is None or not config.semantic_weight:
        return 0.0
    best = max(sum(a * b for a, b in zip(vector, p)) for p in prototypes)
    worst = max(sum(a * b for a, b in zip(vector, p)) for p in counter)
    return config.semantic_weight * (float(best) - float(worst))


def judge(text: str, flags: Sequence[str], config: InstructionConfig, *, vector: Any = None, prototypes: Any = None,
          counter: Any = None) -> Verdict:
    """Whether a user's message states a standing instruction, and why (see the module's docstring)."""
    if UNMARK_FLAG in flags:
        return Verdict(False, 0.0, ("unmarked by you",))
    if MARK_FLAG in flags:
        return Verdict(True, config.threshold, ("marked by you",))
    score, cues = cue_score(text, config)
    semantic = semantic_term(vector, prototypes, counter, config)
    total = score + semantic
    return Verdict(total >= config.threshold, round(total, 4), cues, round(semantic, 4))


def is_standing_instruction(text: str, flags: Sequence[str], config: InstructionConfig) -> bool:
    """The verdict by cues alone (what a plan can decide without vectors)."""
    return judge(text, flags, config).instruction


class Prototypes:
    """The prototype sentences' vectors, encoded once per encoder and config."""

    def __init__(self, encode: Any, config: InstructionConfig) -> None:
        self.positive = encode(list(config.prototypes)) if config.prototypes else None
        self.negative = encode(list(config.counter_prototypes)) if config.counter_prototypes else None

    def judge(self, text: str, flags: Sequence[str], vector: Any, config: InstructionConfig) -> Verdict:
        return judge(text, flags, config, vector=vector, prototypes=self.positive, counter=self.negative)


def judge_all(texts: Sequence[str], flags: Sequence[Sequence[str]], config: InstructionConfig,
              encode: Any = None) -> list[Verdict]:
    """A verdict per message; by meaning too when ``encode`` (texts -> unit rows) is given."""
    if encode is None or not config.semantic_weight:
        return [judge(t, f, config) for t, f in zip(texts, flags)]
    protos = Prototypes(encode, config)
    vectors = encode([_lead(t) or " " for t in texts]) if texts else []
    return [protos.judge(t, f, v, config) for t, f, v in zip(texts, flags, vectors)]


__all__ = ["MARK_FLAG", "UNMARK_FLAG", "Prototypes", "Verdict", "cue_score", "is_standing_instruction", "judge",
           "judge_all", "semantic_term"]
