"""The inspecting proxy's section (``[proxy]``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ctxbench.config.constraints import Port, PositiveFloat, PositiveInt, Tokens
from ctxbench.validation import Range


@dataclass(frozen=True)
class ProxyConfig:
    """``ctxbench proxy``: the inspecting proxy between an assistant and its model endpoint."""

    host: str = "127.0.0.1"
    """loopback only by default: without a token, whoever reaches it can use it"""
    port: Port = 8788
    """the port the proxy listens on"""
    upstream: str = ""
    """the endpoint requests go on to (``--upstream``)"""
    budget: Tokens = 200_000
    """a proxied conversation's plan budget: the context window of today's assistant models, so the meter shows how full
    the window is (the proxy never cuts a request to fit it)"""
    connect_timeout_s: PositiveFloat = 30.0
    """seconds to reach the upstream before the client gets a 502"""
    read_timeout_s: PositiveFloat = 600.0
    """seconds the upstream may stay silent mid-reply (long thinking)"""
    chunk_bytes: PositiveInt = 65536
    """the most bytes read from the upstream (or the client) at once"""
    max_request_bytes: int = 8 * 1024 * 1024
    """a request body up to this size is recorded whole; a larger one streams on to the upstream as it arrives and is
    recorded with each text cut to record_text_bytes (not at all if even that copy is larger). 8 MiB of JSON is some two
    million tokens, past every model's window: what is larger is pasted files and images, and recording it whole cost 25
    times its size in memory (the tokenizer's token list above all)"""
    record_text_bytes: Annotated[int, Range(ge=1024)] = 256 * 1024
    """each text of a request above max_request_bytes is recorded cut to this (at least 1 KiB: JSON keys stay whole)"""
    token: str = ""
    """a client must send this token (X-Ctxbench-Token header, or base URL http://127.0.0.1:PORT/t/TOKEN/v1); empty:
    none is asked for (``--token``)"""
    body_settle_s: PositiveFloat = 1.0
    """a streamed request's end may trail the upstream's answer this long"""
    record_wait_s: PositiveFloat = 0.5
    """the reply waits this long for its request to be recorded (so a watcher sees the exchange as it streams); a
    request that takes longer (megabytes of text to mask and count) is recorded while the reply goes on"""
    record_stop_wait_s: PositiveFloat = 10.0
    """seconds a stop (Ctrl+C, SIGTERM) waits for the recording of a request whose reply is streaming while it is
    still being written, so the exchange is closed as cut rather than left pending for the next start"""
    reply_save_s: PositiveFloat = 1.0
    """a streaming reply's text so far is saved this often (a killed proxy keeps it)"""
    stop_grace_s: PositiveFloat = 1.0
    """on Ctrl+C or SIGTERM, replies in flight get this long before they are cut"""
    record_reply_chars: int = 200_000
    """reply text kept per exchange; a longer reply is stored cut"""
    record_body_bytes: int = 4 * 1024 * 1024
    """a non-streamed reply body parsed for usage up to this size"""
    error_excerpt_chars: int = 2000
    """characters of an upstream error body kept with the exchange"""
    recent_conversations: PositiveInt = 200
    """proxied conversations compared with a request to recognise it"""
    compaction_min_chars: int = 200
    """a request that continues no stored conversation but quotes this much of one's last reply (the summary an
    assistant writes when it compacts its history) continues that conversation"""
    truncate_tiers: tuple[tuple[str, str], ...] = (
        ("heavy", "inactive"), ("light", "active_recent,active_older,inactive"), ("off", ""))
    """truncation tiers (planner.truncation) applied to tool results when steering, per Context Mode: off: none (only
    the user's drops and pins), light: every tier, heavy: only past turns' results"""
    watch_interval_s: PositiveFloat = 0.5
    """how often ``open --watch`` looks for a new proxied request"""
    cache_min_tokens: int = 1024
    """a prefix shorter than this is not cached by the provider (OpenAI and Anthropic cache from 1,024 tokens): the
    steer cost's estimate of what stays cached counts nothing below it"""
    cache_ttl_s: PositiveFloat = 300.0
    """a prompt cache entry lives this long without a hit (Anthropic's default cache: 5 minutes): a drop held back for
    the cache applies once the conversation's previous answered request is older than this"""
    preview_context_lines: int = 2
    """unchanged lines shown around each change in a steer preview's diff"""
    preview_diff_lines: PositiveInt = 400
    """diff lines a steer preview shows (the rest are counted)"""
    finding_result_tokens: PositiveInt = 1000
    """findings (waste the watch flags, each with what a steer would save and cost): a past tool result at least this
    large, sent in each of the ``finding_repeats`` latest requests, is flagged"""
    finding_repeats: PositiveInt = 3
    """a past tool result of at least ``finding_result_tokens`` sent in each of this many latest requests is flagged"""
    finding_unused_requests: PositiveInt = 3
    """tool definitions the conversation never called after this many requests"""
    finding_block_tokens: PositiveInt = 200
    """the same tool result or file sent twice in one request, at least this large"""
    overflow_requests: PositiveInt = 5
    """flag an overflow this many requests ahead (at the recent growth a request)"""
    overflow_window: PositiveInt = 4
    """the latest requests the growth a request is measured on"""

    def tiers_for(self, mode: str) -> tuple[str, ...]:
        """The truncation tiers steering applies in ``mode`` (none for a mode not listed)."""
        value = dict(self.truncate_tiers).get(mode, "")
        return tuple(t.strip() for t in value.split(",") if t.strip())
