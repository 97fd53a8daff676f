"""Records of what a proxied request costs: the usage a provider billed, split the way it bills it (uncached
input, cache writes, cache reads, output), its price in US dollars, and what a steer (a drop, a pin) would
cost and save before it takes effect, given the provider's prompt cache.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BilledUsage:
    """A reply's usage as the provider bills it. ``input`` is the prompt tokens billed at the full input price
    (neither written to nor read from the cache); the prompt in all is ``input + cache_write + cache_write_1h +
    cache_read``."""

    input: int = 0
    cache_write: int = 0  # written to the 5-minute cache (Anthropic ``cache_creation_input_tokens``)
    cache_write_1h: int = 0  # written to the 1-hour cache (Anthropic ``cache_creation.ephemeral_1h_input_tokens``)
    cache_read: int = 0  # read from the cache (``cache_read_input_tokens``, ``cached_tokens``, ``cachedContentTokenCount``)
    output: int = 0

    @property
    def prompt(self) -> int:
        return self.input + self.cache_write + self.cache_write_1h + self.cache_read


@dataclass(frozen=True)
class RequestCost:
    """The price of one proxied request from its billed usage and the model's entry in the price table."""

    price_name: str  # the price table's entry that priced it
    usage: BilledUsage
    input_usd: float
    cache_write_usd: float  # both caches' writes
    cache_read_usd: float
    output_usd: float
    uncached_usd: float  # what the same prompt would have cost with no prompt cache at all

    @property
    def total_usd(self) -> float:
        return self.input_usd + self.cache_write_usd + self.cache_read_usd + self.output_usd

    @property
    def cache_saved_usd(self) -> float:
        """What the cache saved (negative: its writes cost more than its reads saved) on this request's prompt."""
        return self.uncached_usd - (self.input_usd + self.cache_write_usd + self.cache_read_usd)


@dataclass(frozen=True)
class SteerCost:
    """What the user's pending steer (drops and pins not yet sent) does to the next request, from the latest
    request, the prompt cache and the price table: tokens saved each turn, where the cached prefix breaks, the
    tokens re-sent at the write (or uncached) price, and the turns it takes to pay that back."""

    changed: bool  # the steer changes the next request at all
    # the blocks (in cache order: tool definitions, system blocks, messages) before the first one the steer
    # changes: the cache breaks after item ``break_block``; None: nothing changes
    break_block: int | None
    break_label: str  # the block of the request last sent where the change starts (the first not kept)
    kept_tokens: int  # tokens before the break: they stay cached
    rewritten_tokens: int  # tokens after the break in the steered request: written again (or read uncached)
    saved_tokens: int  # tokens the steered request has fewer than the unsteered one (negative: a pin adds)
    cached_estimate: int  # tokens the unsteered request would read from the cache (the estimate)
    reported_cached: int | None  # what the provider reported reading for the latest request
    write_price_name: str  # "write" (the provider writes a prompt cache) or "uncached" (it reads the prefix only)
    extra_usd: float | None  # what the next turn costs more with the steer than without it (None: no price)
    saved_usd_per_turn: float | None  # what each later turn costs less
    payback_turns: int | None  # turns until the saving pays back the extra (None: never or no price)
    tail: bool  # the change lies past the cached prefix: the steer keeps the cache
    price_name: str = ""  # the price table's entry (empty: the model has none; turns from the default ratios)

    def lines(self) -> tuple[str, ...]:
        if not self.changed:
            return ("nothing pending: the next request goes upstream as the client sends it",)
        out = []
        if self.tail:
            out.append(f"keeps the cache: the change lies after the cached prefix ({self.kept_tokens:,} tok stay cached)")
        else:
            out.append(f"breaks the cache after item {self.break_block}, at {self.break_label}: "
                       f"~{self.rewritten_tokens:,} tokens re-read at the {self.write_price_name} price; "
                       f"{self.kept_tokens:,} stay cached")
        verb = "saves" if self.saved_tokens >= 0 else "adds"
        line = (f"{verb} {abs(self.saved_tokens):,} tokens a turn, re-writes {self.rewritten_tokens:,} at the "
                f"{self.write_price_name} price")
        if self.payback_turns is None:
            line += ", never pays back" if self.saved_tokens <= 0 else ""
        elif self.payback_turns == 0:
            line += ", pays back at once"
        else:
            line += f", pays back in {self.payback_turns} turn{'s' if self.payback_turns != 1 else ''}"
        out.append(line + ("" if self.price_name else " (no price for this model: turns from the default cache ratios)"))
        if self.extra_usd is not None and self.saved_usd_per_turn is not None:
            out.append(f"at {self.price_name} prices: next turn {self.extra_usd:+.4f} USD, "
                       f"each later turn {-self.saved_usd_per_turn:+.4f} USD")
        reported = f"{self.reported_cached:,}" if self.reported_cached is not None else "not reported"
        out.append(f"cache now: est. {self.cached_estimate:,} tok cached · reported {reported}")
        return tuple(out)


@dataclass(frozen=True)
class Finding:
    """Waste the watch flags in a proxied conversation, with what a steer would save and cost."""

    kind: str  # repeated_result | unused_tools | repeated_block | overflow
    item_ids: tuple[str, ...]  # the plan items it is about (what a drop would name)
    message: str
    tokens: int  # tokens the waste takes in each request
    saved_tokens: int = 0  # what the steer it suggests would save a turn
    steer: str = ""  # the steer it suggests, in words


@dataclass(frozen=True)
class Calibration:
    """How the proxy's token counts (tiktoken) relate to a model's own tokenizer: billed or counted tokens per
    estimated token, from the provider's own figures for earlier requests."""

    model: str
    ratio: float  # the provider's tokens per estimated token
    samples: int  # requests it was measured on
    source: str  # "count_tokens" (the upstream counted the same request) or "billed usage" (recorded replies)

    def describe(self) -> str:
        return (f"calibrated for {self.model}: ×{self.ratio:.3f} from {self.samples} "
                f"{'count_tokens answer' if self.source == 'count_tokens' else 'billed request'}"
                f"{'s' if self.samples != 1 else ''}")


@dataclass(frozen=True)
class PlanCounts:
    """A proxied plan's token counts as the meter and the overlay show them: calibrated to the model's own tokenizer
    where the provider has reported usage for it (``calibration``), else the proxy's tokenizer's own, labelled so."""

    tokenizer: str  # the proxy's tokenizer (the raw counts)
    model: str
    raw_used: int  # the plan's tokens by the tokenizer
    used: int  # what is shown: calibrated (the items' calibrated sum), else ``raw_used``
    items: tuple[tuple[str, int], ...]  # every item's tokens as shown, by item id
    sections: tuple[tuple[str, int], ...]  # the included items' shown tokens by section
    calibration: Calibration | None = None

    @property
    def calibrated(self) -> bool:
        return self.calibration is not None

    def tokens(self, item_id: str, raw: int) -> int:
        """The tokens shown for item ``item_id`` (``raw`` when it has none of its own)."""
        return dict(self.items).get(item_id, raw)

    def mark(self) -> str:
        """How the figures are counted, in a word or three: ``≈ calibrated ×1.80`` or ``not calibrated``."""
        return f"≈ calibrated ×{self.calibration.ratio:.2f}" if self.calibration is not None else "not calibrated"

    def label(self) -> str:
        """``≈ calibrated ×1.80 from 3 billed exchanges (cl100k_base 6,858)``, or why the counts are plain."""
        c = self.calibration
        if c is None:
            return f"{self.tokenizer} counts, not calibrated for {self.model or 'this model'}: no usage reported yet"
        source = "count_tokens answer" if c.source == "count_tokens" else "billed exchange"
        return (f"≈ calibrated ×{c.ratio:.2f} from {c.samples} {source}{'s' if c.samples != 1 else ''} "
                f"({self.tokenizer} {self.raw_used:,})")


@dataclass(frozen=True)
class PolicyRule:
    """Steering set once for every proxied conversation (``proxy_policy``)."""

    n: int
    kind: str  # drop | pin | mode | budget | results
    # drop: tool:NAME, result:TOOL (``*`` for any characters), kind:KIND or system:N; pin: what it pins; mode: a
    # mode; budget, results: tokens
    target: str
    label: str = ""
    content: str = ""  # a pin's text
    origin: str = ""  # a pin's conversation (where its target names an item; elsewhere only its text counts)

    def describe(self) -> str:
        if self.kind == "drop" and self.target.startswith("tool:"):
            return f"#{self.n} drop {self.target} from every request (kept where a conversation calls it)"
        if self.kind == "drop" and self.target.startswith("result:"):
            return (f"#{self.n} drop {self.target} from every request: each such call with its result, in the turns "
                    "before the one in progress")
        if self.kind == "drop":
            return f"#{self.n} drop {self.target} from every request: every item that is one, nothing else"
        if self.kind == "results":
            return (f"#{self.n} results {int(self.target):,} tok: tool results in a request above it are left out, "
                    "oldest first (never the turn in progress's)")
        if self.kind == "pin":
            return (f"#{self.n} pin {self.label or self.target} ({len(self.content):,} chars) in every conversation: "
                    "added back wherever a request does not carry it")
        if self.kind == "mode":
            return f"#{self.n} mode {self.target} where a conversation has none of its own (cuts long tool results)"
        return f"#{self.n} budget {int(self.target):,} tok for every proxied conversation"
