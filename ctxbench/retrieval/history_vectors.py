"""Earlier turns ranked by meaning: the similarity input of the ``semantic`` history strategy (seed 003).

Each earlier turn (group) is embedded as one text — its user message, then the first
``embed_reply_chars`` of the assistant's replies — with the same embedder the code retriever
uses. Vectors are cached in the card vector cache (``retrieval/vectors.py``) keyed by the sha256 of that text and a model key naming the model, the
sequence length and the text version, so a turn is embedded once per model and an edited turn is
embedded again. The query is embedded the same way and compared with every turn by cosine
similarity; the most similar turns above ``min_similarity`` (at most ``candidates``, 0 = all) are the
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
from ctxbench.records.speakers import body, speaker_label, without_names
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
    if not texts or not query.strip():
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
    if config.candidates > 0:
        scored = scored[: config.candidates]
    return tuple(scored), HistoryRankingStats(len(texts), len(todo))


# -- single messages (the fused strategy) ----------------------------------------------------------------------

# Bump when message_text changes: cached vectors of the old text are then not reused.
MESSAGE_TEXT_VERSION = "m1"
MEMORY_MAX_VECTORS = 100_000  # vectors kept in the process (about 150 MB at 384 dimensions)
WARM_CHUNK = 32  # messages per encode call while warming up, so a plan's query waits at most one chunk


@dataclass(frozen=True)
class MessageRankingStats:
    messages: int  # messages with a text to compare
    embedded: int  # embedded by this call
    pending: int  # still without a vector (left for the warm-up)


def message_text(message: Message, config: SemanticHistoryConfig, speakers: frozenset[str] = frozenset()) -> str:
    """The text embedded for one message: its words (whitespace folded) without a leading date stamp or the
    label of one of ``speakers`` (``records.speakers.body``), cut to ``embed_max_chars``; tool calls and results
    are not embedded (their words reach the fused strategy through keyword search)."""
    if message.role == "tool" or not message.content:
        return ""
    return " ".join(body(message.content, speakers).split())[: config.embed_max_chars]


def transcript_speakers(labels: Sequence[str], share: float) -> frozenset[str]:
    """The speakers of a history that reads as a transcript: when at least ``share`` (> 0) of its messages
    with a text open with a speaker label (``labels``, "" for none), those labels; else none."""
    if share <= 0 or not labels:
        return frozenset()
    named = [label for label in labels if label]
    return frozenset(named) if len(named) >= share * len(labels) else frozenset()


def message_cache_key(embedder_key: str, config: SemanticHistoryConfig) -> str:
    return f"{embedder_key}|msg-{MESSAGE_TEXT_VERSION}|seq{config.embed_max_seq_length}"


class MessageVectors:
    """Vectors of messages by content hash: in the process first, then the store's vector cache; a matrix of
    a session's vectors is kept between plans and extended when turns are added (an append-only history
    never re-stacks)."""

    def __init__(self) -> None:
        self._memory: dict[tuple[str, str], np.ndarray] = {}
        # message id -> (its content, the speakers its text was made for, text, hash)
        self._texts: dict[int, tuple[str, frozenset[str], str, str]] = {}
        self._labels: dict[int, tuple[str, str]] = {}  # message id -> (its content, its speaker label or "")
        self._matrix: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}

    def texts(self, history: Sequence[Message], config: SemanticHistoryConfig,
              skip_groups: Iterable[int] = (), speaker_share: float = 0.0) -> list[tuple[int, str, str]]:
        """(message id, text, hash) of the active messages that have a text, oldest first; when at least
        ``speaker_share`` of them open with a speaker label, the history is a transcript of those speakers
        and their labels are left out of the texts."""
        return self._read(history, config, skip_groups, speaker_share)[0]

    def _read(self, history: Sequence[Message], config: SemanticHistoryConfig, skip_groups: Iterable[int],
              speaker_share: float) -> tuple[list[tuple[int, str, str]], frozenset[str]]:
        """(:meth:`texts`, the history's speakers)."""
        skip = set(skip_groups)
        live = [m for m in history if m.status == "active" and m.group_id not in skip and m.role != "tool"
                and m.content]
        speakers = transcript_speakers([self._label(m) for m in live], speaker_share)
        out = []
        for m in live:
            known = self._texts.get(m.id)
            if known is None or (known[0] is not m.content and known[0] != m.content) or known[1] != speakers:
                text = message_text(m, config, speakers)
                known = (m.content, speakers, text, text_hash(f"{MESSAGE_TEXT_VERSION}\x00{text}"))
                self._texts[m.id] = known
            if known[2]:
                out.append((m.id, known[2], known[3]))
        return out, speakers

    def _label(self, message: Message) -> str:
        known = self._labels.get(message.id)
        if known is None or (known[0] is not message.content and known[0] != message.content):
            known = self._labels[message.id] = (message.content, speaker_label(message.content))
        return known[1]

    def missing(self, rows: Sequence[tuple[int, str, str]], key: str, cache: VectorCache) -> list[tuple[int, str, str]]:
        absent = [r for r in rows if (key, r[2]) not in self._memory]
        if absent:
            found = cache.load([r[2] for r in absent], key)
            self._remember(key, found.items())
            absent = [r for r in absent if r[2] not in found]
        return absent

    def embed(self, rows: Sequence[tuple[int, str, str]], key: str, embedder, cache: VectorCache,
              config: SemanticHistoryConfig) -> int:
        todo = list({r[2]: r[1] for r in rows}.items())
        if not todo:
            return 0
        vectors = embedder.encode([t for _h, t in todo], max_seq_length=config.embed_max_seq_length)
        fresh = [(h, np.asarray(v, dtype=np.float32)) for (h, _t), v in zip(todo, vectors)]
        cache.save(fresh, key)
        self._remember(key, fresh)
        return len(fresh)

    def _remember(self, key: str, items) -> None:
        if len(self._memory) > MEMORY_MAX_VECTORS:
            self._memory.clear()
            self._matrix.clear()
        for h, v in items:
            self._memory[(key, h)] = np.asarray(v, dtype=np.float32)

    def matrix(self, key: str, hashes: tuple[str, ...]) -> np.ndarray:
        hit = self._matrix.get(key)
        if hit is not None and hit[0] == hashes:
            return hit[1]
        if hit is not None and len(hit[0]) < len(hashes) and hashes[: len(hit[0])] == hit[0]:
            extra = np.vstack([self._memory[(key, h)] for h in hashes[len(hit[0]):]])
            matrix = np.vstack([hit[1], extra])
        else:
            matrix = np.vstack([self._memory[(key, h)] for h in hashes])
        self._matrix[key] = (hashes, matrix)
        return matrix

    def similarity(self, history: Sequence[Message], query: str, embedder, cache: VectorCache,
                   config: SemanticHistoryConfig, *, embed_limit: int, skip_groups: Iterable[int] = (),
                   speaker_share: float = 0.0) -> tuple[tuple[tuple[int, float], ...], MessageRankingStats]:
        """(message id, cosine with ``query``) of every message that has a vector, in history order.

        Messages without one are embedded here, newest first, ``embed_limit`` at most (a plan never embeds a
        whole session); the rest stay without a similarity until :meth:`warm` has embedded them. In a transcript
        of speakers (``speaker_share``, :meth:`texts`) the query is compared without the speakers' names: the
        messages' texts have no labels, and the fused strategy weighs the speaker a query names on its own.
        """
        rows, speakers = self._read(history, config, skip_groups, speaker_share)
        if not rows or not query.strip():
            return (), MessageRankingStats(len(rows), 0, 0)
        key = message_cache_key(embedder.key, config)
        absent = self.missing(rows, key, cache)
        embedded = self.embed(absent[::-1][: max(0, embed_limit)], key, embedder, cache, config) if absent else 0
        ready = [r for r in rows if (key, r[2]) in self._memory]
        pending = len(rows) - len(ready)
        if not ready:
            return (), MessageRankingStats(len(rows), embedded, pending)
        matrix = self.matrix(key, tuple(r[2] for r in ready))
        query_text = without_names(query, speakers) if speakers else query
        query_vector = embedder.encode([query_text], max_seq_length=config.embed_max_seq_length)[0]
        sims = matrix @ np.asarray(query_vector, dtype=np.float32)
        return (tuple((r[0], round(float(s), 6)) for r, s in zip(ready, sims)),
                MessageRankingStats(len(rows), embedded, pending))

    def warm(self, history: Sequence[Message], embedder, cache: VectorCache, config: SemanticHistoryConfig,
             progress=None, speaker_share: float = 0.0) -> MessageRankingStats:
        """Embed every message of ``history`` that has no vector yet, in small chunks (newest first)."""
        rows = self.texts(history, config, speaker_share=speaker_share)
        key = message_cache_key(embedder.key, config)
        absent = self.missing(rows, key, cache)[::-1]
        done = 0
        for start in range(0, len(absent), WARM_CHUNK):
            done += self.embed(absent[start:start + WARM_CHUNK], key, embedder, cache, config)
            if progress is not None:
                progress(min(start + WARM_CHUNK, len(absent)), len(absent))
        return MessageRankingStats(len(rows), done, 0)
