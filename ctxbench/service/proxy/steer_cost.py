"""What a steer does before it is sent: the next request as the user's controls would send it, as a diff
against the request the client sent, and what it costs given the provider's prompt cache and the price table.

The latest recorded request stands for the next one (the client will send it again with a turn more): the
steered body is that request with the user's current drops and pins applied, exactly as the proxy would
forward it (:func:`steer_plan` and :func:`apply_edits`, the same code). Its cost is measured against what went
upstream last time, block by block in the order providers cache them (tool definitions, system blocks,
messages):

- what stays cached: Anthropic caches at the ``cache_control`` breakpoints the previous request wrote — the
  latest breakpoint inside the unchanged prefix; OpenAI, the Responses API and Gemini cache the longest
  unchanged prefix. Below ``proxy.cache_min_tokens`` nothing is cached;
- the rest is sent again: written to the cache at the write price (Anthropic, where the request marks a
  breakpoint) or read at the uncached input price;
- each later turn saves the tokens the steer removes, at the cache-read price (or the input price where
  nothing is cached); the turns to pay back are the extra of the next turn over that saving.
"""
from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, replace

from ctxbench.config import Config, ModelPrice
from ctxbench.records.proxy import WireRequest
from ctxbench.records.proxy_cost import SteerCost
from ctxbench.service.proxy.plan import steer_plan
from ctxbench.service.proxy.pricing import breakpoints
from ctxbench.service.proxy.service import PREVIOUS_LOOKBACK, ProxyService
from ctxbench.service.proxy.cache_view import cache_blocks, shared_prefix
from ctxbench.service.proxy.edits import Edits, apply_edits
from ctxbench.service.proxy.wire import parse_request
from ctxbench.service.proxy.wire_parts import WireError
from ctxbench.service.workbench import Workbench

# the ratios of the price table's defaults: how a steer is weighed for a model the table does not name
DEFAULT_RATIOS = ModelPrice("default cache ratios", 1.0, 1.0)
LABEL_WORDS = 40  # characters of a message's text in a block's label


@dataclass(frozen=True)
class SteerPreview:
    """The next request as steering would send it, beside the request the client sent."""

    exchange_id: int  # the latest request, which stands for the next one
    original: bytes  # as the client sent it
    steered: bytes  # as the proxy would forward it with the user's controls now (the original when unchanged)
    diff: tuple[str, ...]  # a unified diff of the two, as indented JSON
    changes: tuple[str, ...]  # what steering changes, one line each with its reason
    cost: SteerCost
    applies: bool  # steering is on for this conversation (else: what it would send once switched on)

    def text(self, max_lines: int) -> str:
        head = [f"next request (from request #{self.exchange_id}) as steering "
                f"{'will send' if self.applies else 'would send (steering is off for it)'}:"]
        head.extend(f"  {c}" for c in self.changes or ("no change: it goes upstream as the client sends it",))
        head.extend(f"  {line}" for line in self.cost.lines())
        body = list(self.diff[:max_lines])
        if len(self.diff) > max_lines:
            body.append(f"… {len(self.diff) - max_lines:,} more diff lines")
        return "\n".join([*head, "", *(body or ["(no difference)"])])


def block_labels(request: WireRequest) -> tuple[str, ...]:
    """A label per block of ``request`` in :func:`cache_blocks` order."""
    out = [f"tool {t.name}" for t in request.tools]
    in_messages = {p.location for m in request.messages for p in m.parts}
    out.extend(f"system block {n + 1}" for n, p in enumerate(request.system) if p.location not in in_messages)
    for m in request.messages:
        text = " ".join(" ".join(p.text for p in m.parts).split())
        out.append(f"message {m.index} {m.role}: {text[:LABEL_WORDS]}{'…' if len(text) > LABEL_WORDS else ''}")
    return tuple(out)


def cached_tokens(provider: str, blocks: tuple[tuple[str, int], ...], marks: tuple[int, ...], shared: int,
                  min_tokens: int) -> tuple[int, int]:
    """The blocks and tokens of a request a provider serves from its cache, when its first ``shared`` blocks are
    those of a request that wrote breakpoints ``marks`` (Anthropic) or that it cached whole (the others)."""
    if provider == "anthropic":
        inside = [b for b in marks if b < shared]
        count = max(inside) + 1 if inside else 0
    else:
        count = shared
    tokens = sum(t for _h, t in blocks[:count])
    return (count, tokens) if tokens >= min_tokens else (0, 0)


def steer_cost(provider: str, sent: WireRequest, sent_marks: tuple[int, ...], steered: WireRequest,
               price: ModelPrice | None, reported_cached: int | None, min_tokens: int) -> SteerCost:
    """What sending ``steered`` instead of ``sent`` again costs and saves (see the module's docstring)."""
    before, after = cache_blocks(sent), cache_blocks(steered)
    total_before, total_after = sum(t for _h, t in before), sum(t for _h, t in after)
    _n, cached_now = cached_tokens(provider, before, sent_marks, len(before), min_tokens)
    shared, _shared_tokens = shared_prefix(before, after)
    kept_blocks, kept = cached_tokens(provider, after, sent_marks, shared, min_tokens)
    changed = before != after
    rewritten = total_after - kept
    saved = total_before - total_after
    writes = provider == "anthropic" and bool(breakpoints(steered))
    p = price or DEFAULT_RATIOS
    read, write = p.cache_read_per_mtok, p.cache_write_per_mtok if writes else p.input_per_mtok
    rate_now = p.cache_write_per_mtok if provider == "anthropic" and sent_marks else p.input_per_mtok
    unsteered = cached_now * read + (total_before - cached_now) * rate_now
    steered_turn = kept * read + rewritten * write
    extra = (steered_turn - unsteered) / 1_000_000
    per_turn = saved * (read if cached_now else p.input_per_mtok) / 1_000_000
    if saved <= 0 or per_turn <= 0:
        payback = None
    else:
        payback = 0 if extra <= 0 else math.ceil(extra / per_turn - 1e-9)
    break_block = shared if changed else None
    labels = block_labels(sent)  # what the request last sent holds where the steer first changes it
    label = labels[break_block] if break_block is not None and break_block < len(labels) else "the end"
    return SteerCost(changed=changed, break_block=break_block, break_label=label, kept_tokens=kept,
                     rewritten_tokens=rewritten if changed else 0, saved_tokens=saved, cached_estimate=cached_now,
                     reported_cached=reported_cached, write_price_name="write" if writes else "uncached",
                     extra_usd=extra if price is not None else None,
                     saved_usd_per_turn=per_turn if price is not None else None, payback_turns=payback,
                     tail=changed and shared >= _n_cached(provider, before, sent_marks, min_tokens),
                     price_name=price.name if price is not None else "")


def _n_cached(provider: str, blocks: tuple[tuple[str, int], ...], marks: tuple[int, ...], min_tokens: int) -> int:
    return cached_tokens(provider, blocks, marks, len(blocks), min_tokens)[0]


def _pretty(body: bytes) -> list[str]:
    try:
        return json.dumps(json.loads(body), indent=1, ensure_ascii=False).splitlines()
    except ValueError:
        return body.decode("utf-8", "replace").splitlines()


def preview_steer(wb: Workbench, session_id: str, *, proxy_steers: bool, config: Config | None = None,
                  extra_drops: frozenset[str] = frozenset()) -> SteerPreview | None:
    """The conversation's next request as the user's controls would steer it, or None before its first request
    (or when the latest one cannot be read). ``extra_drops``: items to weigh as dropped too (a steer a finding
    suggests), without storing anything."""
    config = config or wb.config
    latest = wb.proxy.latest_exchange(session_id)
    state = wb.proxy.conversation(session_id)
    if latest is None or state is None:
        return None
    original, upstream = wb.proxy.bodies(latest.id)
    try:
        request = parse_request(latest.provider, original, wb.tokenizer, latest.path)
        sent = parse_request(latest.provider, upstream, wb.tokenizer, latest.path) if upstream else request
    except WireError:
        return None
    controls = ProxyService(wb, steer=proxy_steers).controls(session_id, state)
    applies = controls.steer
    controls = replace(controls, steer=True, dropped_items=controls.dropped_items | extra_drops)
    n = len(request.history)
    planned = steer_plan(request, session_id, state.groups[len(state.groups) - n:],
                         state.message_ids[len(state.message_ids) - n:], controls, proxy=config.proxy,
                         truncation=config.planner.truncation, tokenizer=wb.tokenizer)
    steered_body = original if planned.edits.empty else apply_edits(request, planned.edits)
    steered = request if steered_body is original else parse_request(latest.provider, steered_body, wb.tokenizer,
                                                                     latest.path)
    report = wb.proxy_cache.get(latest.id)
    price = config.llm.price_for_model(latest.model, wb.proxy_billing.model(latest.id))
    cost = steer_cost(latest.provider, sent, wb.proxy_billing.breakpoints(latest.id), steered, price,
                      report.reported_cached if report is not None else None, config.proxy.cache_min_tokens)
    diff = tuple(difflib.unified_diff(_pretty(original), _pretty(steered_body), "sent by the client",
                                      "to be sent upstream", n=config.proxy.preview_context_lines, lineterm=""))
    return SteerPreview(latest.id, original, steered_body, diff, planned.changes, cost, applies)


def cache_estimate_line(wb: Workbench, exchange_id: int, session_id: str, provider: str, min_tokens: int) -> str:
    """The tokens of a recorded request a provider could serve from its cache, by its own rule (Anthropic: up to
    the latest breakpoint the previous answered request wrote inside the unchanged prefix; the others: the whole
    unchanged prefix), beside the cached tokens it reported; empty when the request was not recorded."""
    report = wb.proxy_cache.get(exchange_id)
    blocks = wb.proxy_cache.fingerprint(exchange_id)
    if report is None or blocks is None:
        return ""
    previous = wb.proxy.latest_exchange(session_id, before=exchange_id)
    for _ in range(PREVIOUS_LOOKBACK):  # failed requests passed over to the one whose cache the request could read
        if previous is None or previous.outcome == "ok":
            break
        previous = wb.proxy.latest_exchange(session_id, before=previous.id)
    if previous is not None and previous.outcome != "ok":
        previous = None
    marks = wb.proxy_billing.breakpoints(previous.id) if previous is not None else ()
    _n, tokens = cached_tokens(provider, blocks, marks, report.prefix_blocks if previous is not None else 0,
                               min_tokens)
    rule = "cache_control breakpoints" if provider == "anthropic" else "longest unchanged prefix"
    reported = f"{report.reported_cached:,}" if report.reported_cached is not None else "not reported"
    return f"cache by the provider's rule ({rule}): est. {tokens:,} tok cached · reported {reported}"


def readd_cost(wb: Workbench, session_id: str, block: str, config: Config | None = None) -> SteerCost | None:
    """What adding ``block`` to the system prompt of the request last sent would cost (a sticky pin the client
    stops sending comes back that way), or None before the first request."""
    config = config or wb.config
    latest = wb.proxy.latest_exchange(session_id)
    if latest is None:
        return None
    original, upstream = wb.proxy.bodies(latest.id)
    try:
        sent = parse_request(latest.provider, upstream or original, wb.tokenizer, latest.path)
        added = parse_request(latest.provider, apply_edits(sent, Edits(system_append=[block])), wb.tokenizer,
                              latest.path)
    except WireError:
        return None
    report = wb.proxy_cache.get(latest.id)
    price = config.llm.price_for_model(latest.model, wb.proxy_billing.model(latest.id))
    return steer_cost(latest.provider, sent, wb.proxy_billing.breakpoints(latest.id), added, price,
                      report.reported_cached if report is not None else None, config.proxy.cache_min_tokens)
