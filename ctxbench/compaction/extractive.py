"""The extractive summariser: a deterministic summary of turns from their own sentences (no model, no network).

Candidate sentences come from each turn: the user's message, the assistant's replies (code blocks and the
``### STATE`` block left out: the STATE travels as its own layer), the first line and the error lines of
each tool result, and the tool calls made (their names and arguments hold the paths and symbols). Each is
scored by named signals (``config.CompactionConfig``):

- keyword: the weight of its terms in the covered turns (how often the span uses them, times how rare they
  are across its sentences), normalised to 0–1;
- semantic: its similarity to the centroid of all candidate sentences, when an embedder is given;
- cue bonuses: a decision ("we decided", "switch to", "instead", "from now on"), an error or its fix, code
  identifiers (CamelCase, snake_case, dotted names, paths; up to four), the user's own words.

The best sentences are taken while the summary stays within ``max_tokens`` (counted with the real
tokenizer), near-duplicates skipped, then printed per turn in the order they were said.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ctxbench.config import CompactionConfig
from ctxbench.records.messages import Message
from ctxbench.records.state import state_span
from ctxbench.tokens import Tokenizer

Encode = Callable[[list[str]], Any]  # texts -> unit-normalised vectors (rows), e.g. a sentence-transformer

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])|\n+")
_FENCE = re.compile(r"```.*?(```|$)|~~~.*?(~~~|$)", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_IDENTIFIER = re.compile(
    r"`[^`\n]{2,60}`"  # quoted code
    r"|\b[A-Za-z_][\w-]*(?:/[\w.-]+)+\.\w+\b"  # a path with a directory
    r"|\b[\w-]+\.(?:py|ts|js|tsx|jsx|rs|go|java|rb|toml|json|yaml|yml|md|cfg|ini|csv|sql|txt)\b"  # a file name
    r"|\b[A-Za-z_]\w*\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\b"  # dotted.name
    r"|\b[a-z]+(?:_[a-z0-9]+)+\b"  # snake_case
    r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b"  # CamelCase
)
_STOPWORDS = frozenset(
    "the and for that this with you your are was were have has had not but can will would could should "
    "what when where which who why how all any one its it's into from out about then than them they their "
    "there here just also more most some such only very over under again let lets i'm i've we're don't "
    "does did done doing make made use used using get got see now yes okay please thanks thank".split())
ROLE_LABELS = {"user": "user", "assistant": "assistant", "tool": "tool", "call": "called"}


@dataclass(frozen=True)
class Sentence:
    group_id: int
    position: int  # order within the covered turns
    role: str  # user | assistant | tool | call
    text: str


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _split(text: str) -> list[str]:
    return [p.strip(" -*•\t") for p in _SENTENCE_END.split(text) if p and p.strip(" -*•\t")]


def _assistant_text(content: str) -> str:
    span = state_span(content)
    if span is not None:
        content = content[: span[0]] + content[span[1]:]
    return _FENCE.sub(" ", content)


def sentences_of(groups: Sequence[Sequence[Message]], config: CompactionConfig) -> list[Sentence]:
    """The candidate sentences of turns (each a sequence of its active messages), in the order said."""
    out: list[Sentence] = []
    errors = tuple(w.lower() for w in config.error_words)
    limit = config.sentence_max_chars
    for messages in groups:
        for m in messages:
            gid = m.group_id
            if m.role == "user":
                for part in _split(m.content):
                    out.append(Sentence(gid, len(out), "user", _clip(part, limit)))
            elif m.role == "assistant":
                for part in _split(_assistant_text(m.content)):
                    out.append(Sentence(gid, len(out), "assistant", _clip(part, limit)))
                for call in m.tool_calls:
                    args = " ".join(str(v) for v in _arguments(call.arguments).values() if isinstance(v, (str, int)))
                    out.append(Sentence(gid, len(out), "call", _clip(f"{call.name} {args}".strip(), limit)))
            elif m.role == "tool":
                lines = [line.strip() for line in m.content.splitlines() if line.strip()]
                if not lines:
                    continue
                picked = [line for line in lines if any(e in line.lower() for e in errors)][: config.tool_lines]
                if len(picked) < config.tool_lines and lines[0] not in picked:
                    picked.insert(0, lines[0])
                name = m.tool_name or "tool"
                for line in picked[: config.tool_lines]:
                    out.append(Sentence(gid, len(out), "tool", _clip(f"{name}: {line}", limit)))
    return out


def _arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        import json

        try:
            data = json.loads(arguments)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
    return {}


def _terms(text: str) -> list[str]:
    return [w for w in (t.lower() for t in _WORD.findall(text)) if w not in _STOPWORDS]


def score_sentences(sentences: Sequence[Sentence], config: CompactionConfig, encode: Encode | None = None) -> list[float]:
    """One score per sentence (see the module's docstring); deterministic for the same input."""
    if not sentences:
        return []
    term_lists = [_terms(s.text) for s in sentences]
    span_tf: dict[str, int] = {}
    df: dict[str, int] = {}
    for terms in term_lists:
        for t in terms:
            span_tf[t] = span_tf.get(t, 0) + 1
        for t in set(terms):
            df[t] = df.get(t, 0) + 1
    n = len(sentences)
    raw = []
    for terms in term_lists:
        unique = set(terms)
        weight = sum(math.log1p(span_tf[t]) * math.log((n + 1) / (df[t] + 0.5)) for t in unique)
        raw.append(weight / math.sqrt(1 + len(unique)))
    top = max(raw) or 1.0
    keyword = [r / top for r in raw]
    semantic = [0.0] * n
    if encode is not None and config.semantic_weight:
        vectors = encode([s.text for s in sentences])
        centroid = [sum(col) / n for col in zip(*vectors)]
        norm = math.sqrt(sum(c * c for c in centroid)) or 1.0
        sims = [sum(a * b for a, b in zip(v, centroid)) / norm for v in vectors]
        low, high = min(sims), max(sims)
        spread = (high - low) or 1.0
        semantic = [(s - low) / spread for s in sims]
    decision = _cue_pattern(config.decision_words)
    error = _cue_pattern(config.error_words)
    scores = []
    for i, s in enumerate(sentences):
        bonus = 0.0
        if decision is not None and decision.search(s.text):
            bonus += config.decision_bonus
        if error is not None and error.search(s.text):
            bonus += config.error_bonus
        bonus += config.identifier_bonus * min(4, len(_IDENTIFIER.findall(s.text)))
        if s.role == "user":
            bonus += config.user_bonus
        scores.append(config.keyword_weight * keyword[i] + config.semantic_weight * semantic[i] + bonus)
    return scores


def _cue_pattern(words: Sequence[str]) -> re.Pattern[str] | None:
    parts = [r"\s+".join(re.escape(w) for w in word.split()) for word in words if word.strip()]
    return re.compile(r"\b(?:" + "|".join(parts) + r")\b", re.IGNORECASE) if parts else None


def _line(group_id: int, picked: Sequence[Sentence]) -> str:
    parts: list[str] = []
    role = ""
    for s in picked:
        if s.role != role:
            parts.append(f"{ROLE_LABELS[s.role]}: {s.text}")
            role = s.role
        else:
            parts[-1] += f" {s.text}"
    return f"- turn {group_id} — " + " | ".join(parts)


def render_summary(chosen: Sequence[Sentence]) -> str:
    by_turn: dict[int, list[Sentence]] = {}
    for s in sorted(chosen, key=lambda s: s.position):
        by_turn.setdefault(s.group_id, []).append(s)
    return "\n".join(_line(g, ss) for g, ss in by_turn.items())


def summarise(groups: Sequence[Sequence[Message]], max_tokens: int, tokenizer: Tokenizer, config: CompactionConfig,
              encode: Encode | None = None) -> str:
    """An extractive summary of ``groups`` (each turn's active messages) within ``max_tokens``."""
    sentences = sentences_of(groups, config)
    if not sentences or max_tokens <= 0:
        return ""
    scores = score_sentences(sentences, config, encode)
    order = sorted(range(len(sentences)), key=lambda i: (-scores[i], sentences[i].position))
    chosen: list[Sentence] = []
    seen: set[str] = set()
    used = 0
    turns: set[int] = set()
    for i in order:
        s = sentences[i]
        key = " ".join(_terms(s.text))
        if not key or key in seen:
            continue
        cost = tokenizer.count(s.text) + 2 + (0 if s.group_id in turns else 8)  # 8: a new turn's line prefix
        if used + cost > max_tokens:
            continue
        chosen.append(s)
        seen.add(key)
        turns.add(s.group_id)
        used += cost
    text = render_summary(chosen)
    while chosen and tokenizer.count(text) > max_tokens:  # the estimate ran over: drop the weakest
        weakest = min(chosen, key=lambda s: (scores[s.position], -s.position))
        chosen.remove(weakest)
        text = render_summary(chosen)
    return text
