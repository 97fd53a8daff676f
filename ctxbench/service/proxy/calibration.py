"""Token counts that match the bill: the proxy counts with tiktoken (cl100k by default), which is not Claude's
or Gemini's tokenizer. Each model's counts are calibrated by one ratio — the provider's tokens per estimated
token — measured on what the provider itself said about earlier requests of that model:

- ``count_tokens`` answers (Anthropic's ``/v1/messages/count_tokens``, when a client asks the upstream through the
  proxy): the same request counted both ways, the best source, used whenever there is one;
- otherwise the billed usage of recorded exchanges (uncached input plus cache writes and reads) against the
  estimate of the request as it went upstream.

Calibrated item counts are the estimates times the ratio, rounded so that they sum to the calibrated total
(largest remainders). An image's count is the provider's own rule already (:mod:`.images`): it is left out of the
ratio on both sides (billed and estimated) and never scaled. A count without a calibration says so
(``tiktoken cl100k, not calibrated``).
"""
from __future__ import annotations

from typing import Sequence

from ctxbench.records.plans import ContextPlan
from ctxbench.records.proxy import ProxyExchange
from ctxbench.records.proxy_cost import Calibration, PlanCounts
from ctxbench.service.proxy.cache_view import cache_blocks, fixed_tokens
from ctxbench.service.proxy.wire import parse_request
from ctxbench.service.proxy.wire_parts import WireError
from ctxbench.service.workbench import Workbench

COUNT_TOKENS_PATH = "/messages/count_tokens"  # Anthropic's token counting endpoint (forwarded, not recorded)
CALIBRATION_SAMPLES = 20  # the latest requests (or count_tokens answers) a model's ratio is measured on
FIXED_KINDS = ("image",)  # plan items counted by the provider's own rule (service.proxy.images): never scaled


def record_count(wb: Workbench, body: bytes, counted: int) -> None:
    """Keep what the upstream counted for a count_tokens request beside the proxy's estimate of it."""
    try:
        request = parse_request("anthropic", body, wb.tokenizer)
    except WireError:
        return
    estimated = sum(t for _h, t in cache_blocks(request))
    if estimated > 0 and request.model:
        wb.proxy_billing.add_count(request.model, estimated, counted, fixed_tokens(request))


def calibration_for(wb: Workbench, model: str, *, before: int | None = None) -> Calibration | None:
    """The calibration of ``model``'s counts from count_tokens answers, else from the billed usage of its exchanges
    before exchange ``before``; None when there is neither."""
    if not model:
        return None
    counts = wb.proxy_billing.counts(model, limit=CALIBRATION_SAMPLES)
    source = "count_tokens"
    if not counts:
        counts = wb.proxy_billing.samples(model, before=before, limit=CALIBRATION_SAMPLES)
        source = "billed usage"
    # the tokenizer's part of each request: its images are counted by the provider's rule on both sides
    estimated = sum(e - f for e, _c, f in counts)
    if not counts or estimated <= 0:
        return None
    return Calibration(model, sum(c - f for _e, c, f in counts) / estimated, len(counts), source)


def calibrated(tokens: Sequence[tuple[str, int]], ratio: float) -> dict[str, int]:
    """Each (id, estimate) times ``ratio``, rounded so the counts sum to the rounded calibrated total."""
    exact = [(key, t * ratio) for key, t in tokens]
    out = {key: int(value) for key, value in exact}
    short = round(sum(value for _k, value in exact)) - sum(out.values())
    by_remainder = sorted(exact, key=lambda kv: kv[1] - int(kv[1]), reverse=True)
    for key, _value in by_remainder[:max(0, short)]:
        out[key] += 1
    return out


def calibrated_items(plan: ContextPlan, calibration: Calibration) -> dict[str, int]:
    """The calibrated tokens of each item the plan includes: the tokenizer's counts times the ratio, an image's
    count (the provider's own rule) as it is."""
    out = calibrated([(i.id, i.tokens) for i in plan.included if i.kind not in FIXED_KINDS], calibration.ratio)
    out.update((i.id, i.tokens) for i in plan.included if i.kind in FIXED_KINDS)
    return out


def plan_counts(wb: Workbench, plan: ContextPlan, model: str, *, before: int | None = None) -> PlanCounts:
    """``plan``'s counts as the meter and the overlay show them: each item calibrated for ``model`` from what the
    provider reported before exchange ``before`` (None: every answered exchange), the
    sections the included items' sums; the plan's own counts where there is no calibration yet."""
    calibration = calibration_for(wb, model, before=before)
    if calibration is None:
        items = {i.id: i.tokens for i in plan.items}
        sections = dict(plan.sections)
        used = plan.used_tokens
    else:
        items = {i.id: i.tokens if i.kind in FIXED_KINDS else round(i.tokens * calibration.ratio)
                 for i in plan.excluded}
        items.update(calibrated_items(plan, calibration))
        sections = {name: 0 for name, _t in plan.sections}
        for item in plan.included:
            sections[item.section] = sections.get(item.section, 0) + items[item.id]
        used = sum(items[i.id] for i in plan.included)
    return PlanCounts(plan.tokenizer, model, plan.used_tokens, used, tuple(items.items()), tuple(sections.items()),
                      calibration)


def calibration_line(wb: Workbench, exchange: ProxyExchange, plan: ContextPlan) -> str:
    """The watch's line on the request's counts: calibrated (how, and the items' sum beside the billed prompt)
    or not."""
    model = wb.proxy_billing.model(exchange.id) or exchange.model
    calibration = calibration_for(wb, model, before=exchange.id)
    if calibration is None:
        return f"token counts: {plan.tokenizer}, not calibrated for {model or 'this model'} yet"
    total = sum(calibrated_items(plan, calibration).values())
    usage = wb.proxy_billing.usage(exchange.id)
    billed = ""
    if usage is not None and usage.prompt:
        billed = f" · billed {usage.prompt:,} ({(total - usage.prompt) / usage.prompt:+.1%})"
    return f"token counts {calibration.describe()}: items {total:,} tok ({plan.tokenizer} {plan.used_tokens:,}){billed}"

