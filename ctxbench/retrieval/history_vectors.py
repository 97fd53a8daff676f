"""Earlier turns ranked by meaning: the similarity input of the ``semantic`` history strategy (seed 003).

Each earlier turn (group) is embedded as one text — its user message, then the first
``embed_reply_chars`` of the assistant's replies — with the same embedder the code retriever
uses. Vectors are cached in the card vector cache (``retrieval/vectors.py``) keyed by the sha256 of that text and a model key naming the model, the
sequence length and the text version, so a turn is embedded once per model and an edited turn is
embedded again. The query is embedded the same way and compared with every turn by cosine
similarity; the most similar turns above ``min_similarity`` (at most ``candidates``) are the
ranking ``PlanInputs.semantic_ranking`` carries.

The work is split so a caller holding a lock over its database connection only needs it for the
cache reads and writes (:class:`VectorCache`), not for the encoding.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence

import numpy as np

from ctxbench.config import SemanticHistoryConfig
from ctxbench.records.messages import Message
from ctxbench.store.vectors import TURN_KEY_MARK

# Bump when turn_text changes: cached vectors of the old text are then not reused.
TURN_TEXT_VERSION = "h2"


class VectorCache(Protocol):
    """Where vectors are cached: ``load`` the known ones by content hash, ``save`` new ones."""

    def load(self, hashes: Iterable[str], key: str) -> Mapping[str, np.ndarray]: ...

    def save(self, rows: Sequence[tuple[str, np.ndarray]], key: str) -> None: ...


@dataclass(frozen=True)
class HistoryRankingStats:
    turns: int  # earlier turns compared with the query
    embedded: int  # of which embedded now (the rest came from the cache)


def turn_text(messages: Sequence[Message], config: SemanticHistoryConfig) -> str:
    """The text embedded for one turn: its user message(s), then the start of the assistant's replies.

    Tool calls and tool results are left out: on the bundled long session they drowned the user's
    words (a turn that set a rule ranked far below turns whose file reads matched the question).
    """
    users = " ".join(" ".join(m.content.split()) for m in messages if m.role in ("user", "system") and m.content)
    replies = " ".join(" ".join(m.content.split()) for m in messages if m.role == "assistant" and m.content)
    text = users
    if replies and config.embed_reply_chars > 0:
        text = (text + "\n" if text else "") + replies[: config.embed_reply_chars]
    return text[: config.embed_max_chars]


def text_hash(text: str) -> str:
    return hashlib.sha256(f"{TURN_TEXT_VERSION}\x00{text}".encode("utf-8", "surrogatepass")).hexdigest()


def cache_key(embedder_key: str, config: SemanticHistoryConfig) -> str:
    """What shapes a turn's vector: the embedder (model, precision), the sequence length, the text version."""
    return f"{embedder_key}{TURN_KEY_MARK}{TURN_TEXT_VERSION}|seq{config.embed_max_seq_length}"


def group_messages(history: Sequence[Message], skip_groups: Iterable[int] = ()) -> dict[int, list[Message]]:
    """Active messages of each earlier turn, by group id, oldest turn first (``skip_groups`` left out)."""
    skip = set(skip_groups)
    groups: dict[int, list[Message]] = {}
    for m in history:
        if m.status != "active" or m.group_id in skip:
            continue
        groups.setdefault(m.group_id, []).append(m)
    return groups


def rank_turns(history: Sequence[Message], query: str, embedder, cache: VectorCache,
               config: SemanticHistoryConfig, *, skip_groups: Iterable[int] = ()
               ) -> tuple[tuple[tuple[int, float], ...], HistoryRankingStats]:
    """(group id, cosine similarity) of the turns most similar to ``query``, most similar first.

    Turns less similar than ``config.min_similarity`` are left out, and at most ``config.candidates``
    are returned; ties go to the newer turn. ``embedder`` must be ready (``encode`` waits otherwise).
    """
    groups = group_messages(history, skip_groups)
    texts = {gid: turn_text(msgs, config) for gid, msgs in groups.items()}
    texts = {gid: t for gid, t in texts.items() if t.strip()}
    if not texts or not query.strip() or config.candidates <= 0:
        return (), HistoryRankingStats(len(texts), 0)
    key = cache_key(embedder.key, config)
    hashes = {gid: text_hash(t) for gid, t in texts.items()}
    cached = dict(cache.load(hashes.values(), key))
    todo = {h: texts[gid] for gid, h in hashes.items() if h not in cached}
    if todo:
        order = list(todo)
        vectors = embedder.encode([todo[h] for h in order], max_seq_length=config.embed_max_seq_length)
        fresh = list(zip(order, vectors))
        cache.save(fresh, key)
        cached.update(fresh)
    query_vector = embedder.encode([query], max_seq_length=config.embed_max_seq_length)[0]
    gids = list(texts)
    matrix = np.vstack([np.asarray(cached[hashes[g]], dtype=np.float32) for g in gids])
    sims = matrix @ np.asarray(query_vector, dtype=np.float32)
    scored = [(g, round(float(s), 6)) for g, s in zip(gids, sims) if float(s) >= config.min_similarity]
    scored.sort(key=lambda gs: (-gs[1], -gs[0]))
    return tuple(scored[: config.candidates]), HistoryRankingStats(len(texts), len(todo))
