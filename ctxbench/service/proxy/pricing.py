"""Prices of proxied requests: the usage a reply reported, split the way providers bill it, priced from the
price table (``[[llm.prices]]``: input, output, and the cache's write and read shares of the input price).

How each provider reports a prompt:

- Anthropic: ``input_tokens`` (uncached), ``cache_creation_input_tokens`` (written; ``cache_creation`` splits
  the 5-minute and 1-hour writes), ``cache_read_input_tokens`` (read) — three disjoint counts;
- OpenAI Chat Completions / Responses, Gemini: the prompt in all, of which ``cached_tokens`` /
  ``cachedContentTokenCount`` were read from the cache (no write is reported or billed apart).

Pure: no store, no I/O.
"""
from __future__ import annotations

from typing import Any

from ctxbench.config import ModelPrice
from ctxbench.records.proxy import ReplyRecord, WireRequest
from ctxbench.records.proxy_cost import BilledUsage, RequestCost
from ctxbench.service.proxy.cache_view import node_at, system_blocks, tool_node

MTOK = 1_000_000


def billed_usage(reply: ReplyRecord) -> BilledUsage | None:
    """The reply's usage split as billed, or None when the provider reported no prompt tokens."""
    if reply.prompt_tokens is None:
        return None
    read = reply.cached_tokens or 0
    written = reply.cache_write_tokens or 0
    written_1h = min(reply.cache_write_1h_tokens or 0, written)
    uncached = max(0, reply.prompt_tokens - read - written)
    return BilledUsage(uncached, written - written_1h, written_1h, read, reply.completion_tokens or 0)


def request_cost(usage: BilledUsage, price: ModelPrice) -> RequestCost:
    """What ``usage`` costs at ``price``, and what its prompt would have cost with no cache."""
    return RequestCost(
        price_name=price.name, usage=usage,
        input_usd=usage.input * price.input_per_mtok / MTOK,
        cache_write_usd=(usage.cache_write * price.cache_write_per_mtok
                         + usage.cache_write_1h * price.cache_write_1h_per_mtok) / MTOK,
        cache_read_usd=usage.cache_read * price.cache_read_per_mtok / MTOK,
        output_usd=usage.output * price.output_per_mtok / MTOK,
        uncached_usd=usage.prompt * price.input_per_mtok / MTOK)


def cost_line(cost: RequestCost) -> str:
    """One line: the request's price and its parts (``$0.0123 = in … + write … + read … + out …``)."""
    u = cost.usage
    parts = [f"in {u.input:,} ${cost.input_usd:.4f}"]
    if u.cache_write or u.cache_write_1h:
        parts.append(f"cache write {u.cache_write + u.cache_write_1h:,} ${cost.cache_write_usd:.4f}")
    if u.cache_read:
        parts.append(f"cache read {u.cache_read:,} ${cost.cache_read_usd:.4f}")
    parts.append(f"out {u.output:,} ${cost.output_usd:.4f}")
    saved = cost.cache_saved_usd
    cache = f" · cache {'saved' if saved >= 0 else 'cost'} ${abs(saved):.4f}" if u.cache_read or u.cache_write \
        or u.cache_write_1h else ""
    return f"cost ${cost.total_usd:.4f} ({cost.price_name}): {' + '.join(parts)}{cache}"


def usage_line(usage: BilledUsage) -> str:
    """The billed usage without a price (a model the price table does not name)."""
    return (f"billed: in {usage.input:,} + cache write {usage.cache_write + usage.cache_write_1h:,} + cache read "
            f"{usage.cache_read:,} + out {usage.output:,} tok (no price for this model in [[llm.prices]])")


def _marked(value: Any) -> bool:
    if isinstance(value, dict):
        return "cache_control" in value or any(_marked(v) for v in value.values())
    if isinstance(value, list):
        return any(_marked(v) for v in value)
    return False


def breakpoints(request: WireRequest) -> tuple[int, ...]:
    """The blocks of ``request`` (in :func:`.cache_view.cache_blocks` order: tool definitions, system blocks,
    messages) that carry an Anthropic ``cache_control`` breakpoint."""
    body = request.body
    messages = body.get(request.list_key)
    marked = [_marked(tool_node(request, tool)) for tool in request.tools]
    marked += [_marked(node_at(body, part.location)) for part in system_blocks(request)]
    marked += [isinstance(messages, list) and m.index < len(messages) and _marked(messages[m.index])
               for m in request.messages]
    return tuple(n for n, hit in enumerate(marked) if hit)
