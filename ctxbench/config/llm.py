"""The model endpoint's section (``[llm]``) and the price table (``[[llm.prices]]``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ctxbench.config.constraints import PositiveFloat, PositiveInt, Tokens
from ctxbench.validation import Range


@dataclass(frozen=True)
class ModelPrice:
    """A model's list price in US dollars per million tokens, by its name (``[[llm.prices]]``), and what its
    prompt cache bills as a share of the input price: a cache write (Anthropic: 1.25 for the 5-minute cache, 2 for
    the 1-hour cache) and a cache read (Anthropic 0.1; OpenAI 0.5 for gpt-4o, 0.25 for gpt-4.1, 0.1 for gpt-5)."""

    name: str
    """the model's name, as requests and replies name it"""
    input_per_mtok: float
    """USD per million prompt tokens (uncached)"""
    output_per_mtok: float
    """USD per million reply tokens"""
    cache_write_ratio: float = 1.25
    """a token written to the 5-minute prompt cache, as a share of the input price"""
    cache_write_1h_ratio: float = 2.0
    """a token written to the 1-hour prompt cache, as a share of the input price"""
    cache_read_ratio: float = 0.1
    """a token read from the prompt cache, as a share of the input price"""

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
    provider: str = "offline"
    """offline | openai (any OpenAI-compatible Chat Completions endpoint) | anthropic (Anthropic's Messages API,
    streamed, with ``cache_control`` breakpoints and the cache reads and writes it reports)"""
    base_url: str = ""
    """the endpoint's base URL (openai: an OpenAI-compatible ``/v1``; anthropic: the API's root, e.g.
    ``https://api.anthropic.com``; empty: the provider's own)"""
    model: str = "offline"
    """the model named in each call"""
    api_key_env: str = "OPENAI_API_KEY"
    """the environment variable holding the API key (the key itself is never in the config); with the anthropic
    provider this default means ``ANTHROPIC_API_KEY``"""
    cache_breakpoints: Annotated[int, Range(ge=0, le=4)] = 4
    """anthropic: ``cache_control`` breakpoints placed per request, at most 4 (Anthropic's limit): the end of the
    prompt, the last message shared with the previous request, the end of the stable context, the end of the
    system prompt, in that order of preference; 0 sends none (no prompt caching)"""
    context_limit: Tokens = 128000
    """the model's context window in tokens"""
    timeout_s: PositiveFloat = 60.0
    """seconds one read from the endpoint may take (the first token, each chunk after it)"""
    reply_deadline_s: PositiveFloat = 600.0
    """seconds one model call may take in all, retries and streaming included: a slow endless stream ends there (its
    text so far is stored as a partial reply)"""
    max_reply_tokens: Tokens = 4096
    """the reply-token cap sent as ``max_tokens`` (lowered to what the context window has left after the prompt)"""
    stream_save_every_s: PositiveFloat = 1.0
    """a streamed reply is saved as it arrives (marked partial until it is done), so a process killed mid-reply (kill
    -9, a closed terminal) leaves the text so far: saved when this many seconds or this many characters have arrived
    since the last save (the first piece at once)"""
    stream_save_every_chars: PositiveInt = 2000
    """a streamed reply is also saved when this many characters have arrived since the last save
    (``stream_save_every_s``)"""
    max_retries: int = 3
    """retries of a failed call (rate limits, server errors, dropped connections)"""
    max_tool_rounds: PositiveInt = 8
    """tool-call rounds one turn may take before the reply is asked for"""
    retry_backoff_s: float = 1.0
    """first wait before a retry; doubles per attempt (with jitter)"""
    retry_backoff_max_s: float = 20.0
    """cap on one wait, also on a server's Retry-After"""
    usage_mismatch_ratio: float = 0.05
    """badge when estimated and reported prompt tokens differ by more"""
    query_db_max_rows: PositiveInt = 50
    """rows a query_db call returns"""
    query_db_max_chars: PositiveInt = 8000
    """characters of a query_db result"""
    query_db_max_steps: PositiveInt = 2_000_000
    """SQLite VM steps before a query_db call is interrupted"""
    query_db_progress_steps: PositiveInt = 1000
    """SQLite VM steps between two checks of query_db_max_steps"""
    query_db_length_factor: PositiveInt = 16
    """SQLite's longest string or blob inside a query_db call (SQLITE_LIMIT_LENGTH): this many times query_db_max_chars,
    or the session's longest stored row when that is longer (so it can still be read)"""
    retrieve_memos_max: PositiveInt = 5
    """memos a retrieve_memos call returns"""
    error_excerpt_chars: int = 200
    """characters of a provider's error text quoted in an error line"""
    offline_chunk_chars: PositiveInt = 12
    """the offline model streams its reply in pieces of this size"""
    prices: tuple[ModelPrice, ...] = DEFAULT_PRICES
    """cost per turn, for the models named here only"""

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
