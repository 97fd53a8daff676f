"""The texts of a history that are embedded, and the units that hold them between plans.

A turn (group) is embedded as ``turn_text`` (its user message, then the start of the assistant's replies), a single
message as ``message_text`` (without a transcript's speaker labels: ``transcript_speakers``); each text is keyed by
``text_hash``. A ``TextUnits`` set holds one history's units (id -> (text, hash)) and is extended, not rebuilt, when
the history grows; ``history_vectors`` keeps their vectors.
"""
from __future__ import annotations

import hashlib
from typing import Iterable, Sequence

import numpy as np

from ctxbench.config import SemanticHistoryConfig
from ctxbench.records.messages import Message
from ctxbench.records.speakers import body, reads_as_transcript, speaker_label

# Bump when turn_text changes: cached vectors of the old text are then not reused.
TURN_TEXT_VERSION = "h2"


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


# Bump when message_text changes: cached vectors of the old text are then not reused.
MESSAGE_TEXT_VERSION = "m1"


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
    named = [label for label in labels if label]
    return _speakers(named, len(named), len(labels), share)


def _speakers(names: Iterable[str], named: int, texted: int, share: float) -> frozenset[str]:
    """``names`` when ``named`` of ``texted`` messages open with a speaker label reach ``share`` (> 0), else none."""
    return frozenset(names) if reads_as_transcript(named, texted, share) else frozenset()


class TextUnits:
    """The units of one history — unit id -> (text, hash) in history order — and what was derived from them; a
    history that extends this one only adds its tail."""

    def __init__(self, config: SemanticHistoryConfig, skip: frozenset[int], share: float = 0.0) -> None:
        self.history: tuple[Message, ...] = ()
        self.skip = skip
        self.config = config
        self.share = share  # the speaker share (:class:`MessageUnits`)
        self.speakers: frozenset[str] = frozenset()  # a transcript's speakers, left out of texts and the query
        self.rows: dict[int, tuple[str, str]] = {}
        self.ready: tuple[str, list[int], tuple[str, ...]] | None = None  # (cache key, ids, hashes) with vectors
        self.counts = (0, 0, 0)  # units, embedded by the last look-up, pending
        # cache key -> (hashes, their vectors, [the buffer holding them, rows written there])
        self.matrix: dict[str, tuple[tuple[str, ...], np.ndarray, list]] = {}

    def derived(self, history: tuple[Message, ...]) -> "TextUnits":
        """A new set for ``history``, which extends this one's (this one stays as it is)."""
        new = self._copy()
        new.rows = dict(self.rows)
        new.history = self.history
        new.matrix = dict(self.matrix)
        new.extend(history)
        return new

    def _copy(self) -> "TextUnits":
        return type(self)(self.config, self.skip, self.share)

    def extends_to(self, history: tuple[Message, ...], config: SemanticHistoryConfig, skip: frozenset[int],
                   share: float) -> int:
        """How many messages of ``history`` this set already covers (-1: it cannot be extended to it)."""
        n = len(self.history)
        if skip != self.skip or config != self.config or share != self.share or n > len(history) or \
                history[:n] != self.history:
            return -1
        return n

    def extend(self, history: tuple[Message, ...]) -> None:
        self._extend(history[len(self.history):], self.config)
        self.history = history
        self.ready = None

    def _extend(self, tail: tuple[Message, ...], config: SemanticHistoryConfig) -> None:
        raise NotImplementedError


class MessageUnits(TextUnits):
    """Single messages. When at least ``share`` (> 0) of the messages with a text open with a speaker label, the
    history is a transcript of those speakers (``transcript_speakers``): their labels are left out of the texts (a
    history whose speakers change as it grows has its texts made again)."""

    def __init__(self, config: SemanticHistoryConfig, skip: frozenset[int], share: float = 0.0) -> None:
        super().__init__(config, skip, share)
        self.texted = 0  # messages with a text
        self.names: dict[str, None] = {}  # the speaker labels they open with
        self.named = 0  # ... how many open with one

    def _copy(self) -> "TextUnits":
        new = MessageUnits(self.config, self.skip, self.share)
        new.texted, new.names, new.named, new.speakers = self.texted, dict(self.names), self.named, self.speakers
        return new

    def _live(self, messages: Iterable[Message]) -> Iterable[Message]:
        return (m for m in messages if m.status == "active" and m.group_id not in self.skip and m.role != "tool"
                and m.content)

    def _extend(self, tail: tuple[Message, ...], config: SemanticHistoryConfig) -> None:
        live = list(self._live(tail))
        if self.share > 0:
            for m in live:
                label = speaker_label(m.content)
                if label:
                    self.names[label] = None
                    self.named += 1
            self.texted += len(live)
            speakers = _speakers(self.names, self.named, self.texted, self.share)
            was, self.speakers = self.speakers, speakers
            if bool(speakers) != bool(was):  # it starts or stops reading as a transcript: every text changes
                self.rows = {}
                live = list(self._live(self.history)) + live
            # (a name joining a transcript changes no earlier text: every earlier label is in the set already)
        for m in live:
            text = message_text(m, config, self.speakers)
            if text:
                self.rows[m.id] = (text, text_hash(f"{MESSAGE_TEXT_VERSION}\x00{text}"))



class TurnUnits(TextUnits):
    def __init__(self, config: SemanticHistoryConfig, skip: frozenset[int], share: float = 0.0) -> None:
        super().__init__(config, skip, share)
        self.groups: dict[int, tuple[Message, ...]] = {}

    def _copy(self) -> "TextUnits":
        new = TurnUnits(self.config, self.skip, self.share)
        new.groups = dict(self.groups)
        return new

    def _extend(self, tail: tuple[Message, ...], config: SemanticHistoryConfig) -> None:
        touched: dict[int, None] = {}
        for m in tail:
            if m.status != "active" or m.group_id in self.skip:
                continue
            self.groups[m.group_id] = self.groups.get(m.group_id, ()) + (m,)
            touched[m.group_id] = None
        for gid in touched:
            text = turn_text(self.groups[gid], config)
            if text.strip():
                self.rows[gid] = (text, text_hash(text))
            else:
                self.rows.pop(gid, None)
