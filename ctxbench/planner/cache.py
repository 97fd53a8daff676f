"""The prompt cache and the planner's plans: the cache-friendly payload order, the prefix two plans share, and
what a turn costs with and without cache reads.

A provider's prompt cache (Anthropic's ``cache_control`` breakpoints, OpenAI's automatic prefix cache) reads the
longest unchanged *prefix* of a prompt at a fraction of the input price; everything after the first changed
message is billed again. A plan whose history is reselected by relevance on every turn inserts new turns in the
middle of a chronological payload and so moves that first change near the top.

``order = "cache"`` sends the same items in this order (what changes least first):

1. the system prompt, the tool definitions, the history's system messages;
2. the orientation scaffold, sticky and leased pins that are not turns;
3. summaries of earlier turns;
4. history atoms that do not depend on the query — standing instructions, pinned turns, the turns kept beside a
   summary, then the recency window and the levels' turns — chronologically;
5. the state block and the scratchpad (rewritten at most once a turn);
6. history atoms picked for this query (``keyword_match``, ``semantic_match``, ``graph_neighbour``), chronologically;
7. what is picked per query: memos, capsules, symbol cards, ephemeral pins;
8. the current turn, last as always.

A window of the latest turns slides by a turn each turn, and its first turn leaving moves the first change to
the top of the history. In the cache order such a window starts at a *page boundary* instead (``fill_anchored``):
pages of ``cache_page_share`` of the plan's budget, counted from the session's first turn, so the window's start
stays put while the session grows by a page and then moves on by a page (the ``window`` strategy; ``fused`` with
``cache_stable_share`` > 0, which gives that share of the history budget to such a window before relevance). Up to
a page of the window's share is left for what comes after it.

The *cache-keeping selection* (``fused``, the cache order, ``cache_keep_share`` > 0) keeps what the previous plan
picked instead of picking afresh: the caller hands the plan the session's previous plan (``PlanInputs.previous``:
its history atoms in payload order and its settings). While the user changed nothing (``settings_key``: budget,
mode, strategy, window, provider family, pins and drops), the previous history atoms are walked in their order and
kept while each still scores at least the score of the best atom a fresh plan would leave out less
``cache_keep_margin`` (atoms below it may stay within ``cache_keep_slack`` of the history budget where atoms above it
follow), within ``cache_keep_share`` of the history budget; the first that fails ends the kept prefix (eviction from
the tail). The payload sends that prefix (with the latest turn and the rules it spans, which are in anyway) right
after the standing history, in the previous plan's order, then this turn's new history (the latest turn, new picks)
and only then the state block and scratchpad, which a live session rewrites every turn: the history goes out in the
order each atom was first included, and the next turn's prompt opens with all of it.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ctxbench.config import CachePrice
from ctxbench.planner.budget import Budget, HistorySelection
from ctxbench.records.plans import PreviousHistory

RELEVANCE_ORDER = "relevance"
CACHE_ORDER = "cache"
PLAN_ORDERS = (RELEVANCE_ORDER, CACHE_ORDER)
KEEP_SETTINGS = ("cache_keep_share", "cache_keep_margin", "cache_keep_slack")  # the cache-keeping selection's
CACHE_SETTINGS = ("order", "cache_page_share", "cache_stable_share", *KEEP_SETTINGS)  # the planner settings of this module

# history atoms that were picked for this query: sent after every history atom that was not
QUERY_PICKED = frozenset({"keyword_match", "semantic_match", "graph_neighbour"})
# history atoms that stay while the session does (a rule, a pin, a turn a summary keeps verbatim): sent first
STANDING = frozenset({"standing_instruction", "pinned_sticky", "pinned_leased", "summary", "mandatory"})
# context layers the session rewrites at most once a turn: after the history that does not depend on the query
TURN_KINDS = frozenset({"state", "scratchpad"})
# context layers picked per query: after every history atom, before the current turn
QUERY_KINDS = frozenset({"memo", "symbol_card", "capsule"})
STABLE_LAYER, SUMMARY_LAYER, STANDING_HISTORY, HISTORY, TURN_LAYER, PICKED_HISTORY, QUERY_LAYER, CURRENT = range(8)
KEPT_HISTORY = 8  # the cache-keeping selection: the previous plan's history atoms this plan kept
# the tiers in payload order where plans keep the previous plan's history: what was kept right after the standing
# history, and the state block after the history picked this turn (that history stays for the next turn now)
KEEPING_TIERS = {tier: rank for rank, tier in enumerate((STABLE_LAYER, SUMMARY_LAYER, STANDING_HISTORY, KEPT_HISTORY,
                                                         HISTORY, PICKED_HISTORY, TURN_LAYER, QUERY_LAYER, CURRENT))}


def _tier(item: Any) -> int:
    if item.kind == "current_turn":
        return CURRENT
    if item.kind == "history_atom":
        if item.reason in STANDING:
            return STANDING_HISTORY
        return PICKED_HISTORY if item.reason in QUERY_PICKED else HISTORY
    if item.kind == "summary":
        return SUMMARY_LAYER
    if item.kind in TURN_KINDS:
        return TURN_LAYER
    if item.kind in QUERY_KINDS or item.pin == "ephemeral":
        return QUERY_LAYER
    return STABLE_LAYER


def cache_order(included: Sequence[Any], kept: Sequence[str] = (), keeping: bool = False) -> list[Any]:
    """``included`` (PlanItems in today's payload order, then any excluded ones) in the cache-friendly order, each
    included item's ``order`` renumbered; within a tier the items keep the order they came in (chronological for the
    history). Excluded items stay where they were, at the end. ``keeping`` (the cache-keeping selection): the history
    atoms ``kept`` names (the previous plan's, in its order: the order each was first included in) go right after the
    standing history, in that order, and the state block and scratchpad after the history (``KEEPING_TIERS``)."""
    head = [item for item in included if item.included]
    rest = [item for item in included if not item.included]
    if keeping:
        position = {atom: i for i, atom in enumerate(kept)}
        def key(item: Any) -> tuple[int, int]:
            at = position.get(item.id, -1) if item.kind == "history_atom" else -1
            return (KEEPING_TIERS[KEPT_HISTORY], at) if at >= 0 else (KEEPING_TIERS[_tier(item)], 0)
        ordered = sorted(head, key=key)
    else:
        ordered = sorted(head, key=_tier)  # stable: keeps the order within a tier
    for order, item in enumerate(ordered):
        item.__dict__["order"] = order  # the items are fresh, made for this plan
    return ordered + rest


def uses_cache_order(config: Any) -> bool:
    return getattr(config, "order", RELEVANCE_ORDER) == CACHE_ORDER


# ---- the cache-keeping selection (fused) ----------------------------------------------------------------------

KEEPING_STRATEGIES = frozenset({"fused"})


def keeps_previous(config: Any, strategy: str) -> bool:
    """Whether plans of ``strategy`` under ``config`` (the planner section) keep the previous plan's history: the cache
    order with ``cache_keep_share`` > 0, a strategy that ranks atoms (``fused``). A caller hands such a plan its
    session's previous plan (``PlanInputs.previous``, made by ``previous_history``)."""
    return uses_cache_order(config) and config.cache_keep_share > 0 and strategy in KEEPING_STRATEGIES


def settings_key(inputs: Any) -> str:
    """What "the user changed nothing" compares between two plans: budget, mode, strategy, window, provider family,
    the pins (id, target, kind: not a lease's turns left) and the dropped turns, as one digest."""
    pins = sorted((p.id, p.target, p.kind) for p in inputs.pins)
    text = json.dumps([inputs.budget, inputs.mode, inputs.strategy, inputs.window_groups, inputs.provider_family,
                       pins, sorted(set(inputs.dropped_groups))], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def previous_history(plan: Any, inputs: Any) -> PreviousHistory:
    """What a plan made from ``inputs`` hands the session's next plan: its history atoms in payload order, and its
    settings."""
    atoms = tuple(item.id for item in sorted((i for i in plan.included if i.kind == "history_atom"),
                                             key=lambda i: i.order))
    return PreviousHistory(atoms, settings_key(inputs))


def kept_atoms(inputs: Any, config: Any) -> tuple[str, ...] | None:
    """The previous plan's history atoms this plan may keep, in that plan's order: None unless the plan keeps
    (``keeps_previous``) and the user changed nothing since the previous plan (``settings_key``)."""
    previous = inputs.previous
    if previous is None or not keeps_previous(config, inputs.strategy) or previous.settings != settings_key(inputs):
        return None
    return previous.atoms


def kept_prefix(kept: Sequence[str], unit_of: Callable[[str], int], score: Any, fresh_order: Any, tokens: Sequence[int],
                user_units: Sequence[int], taken: bytearray, remaining: int, share: int, margin: float,
                slack: int = 0) -> tuple[list[int], int]:
    """The units (atoms) of the previous plan that stay, in its order: walk ``kept`` (atom ids; ``unit_of``: the unit
    of one, -1 when it no longer competes) from the first and stop at the first that no longer competes, whose score
    is below the *floor*, or that does not fit in ``share`` tokens (with the user message a call atom brings) — the
    atoms after it go too, so what stays is a prefix of the previous plan's history. Units ``taken`` already (the
    latest turns, standing instructions) are passed over. The floor is the score of the best atom a fresh plan would
    leave out (units of ``fresh_order``, best first, not taken, filled in order while their tokens add up to at most
    ``remaining``) less ``margin``. Returns the units kept and how many of ``kept`` the prefix spans (up to its
    last atom that is in: kept, or taken already)."""
    ranked = [u for u in fresh_order if not taken[u]]
    spent, best_out = 0, None
    for u in ranked:
        spent += tokens[u]
        if spent > remaining:
            best_out = u
            break
    floor = -math.inf if best_out is None else float(score[best_out]) - margin
    out: list[int] = []
    live = 0  # the atoms up to the last one at or above the floor: a kept prefix ends there
    end = 0  # how many of ``kept`` that spans
    used = dead = 0
    seen = bytearray(taken)
    for i, atom in enumerate(kept):
        u = unit_of(atom)
        if u < 0:
            break
        if seen[u]:
            if taken[u] and live == len(out):  # in already, and no atom below the floor before it
                end = i + 1
            continue
        cost = tokens[u]
        user = user_units[u]
        if user >= 0 and not seen[user]:
            cost += tokens[user]
        below = float(score[u]) < floor
        if used + cost > share or (below and dead + cost > slack):
            break
        used += cost
        seen[u] = 1
        if user >= 0:
            seen[user] = 1
        out.append(u)
        if below:
            dead += cost
        else:
            live, end = len(out), i + 1
    return out[:live], end


def page_tokens(config: Any, budget: int) -> int:
    """The size of a page of an anchored window, in tokens: ``cache_page_share`` of ``budget``, the share of the
    plan's budget the window may take (never what is left at the time: that moves with every query)."""
    return max(1, int(budget * config.cache_page_share))


def fill_anchored(selection: HistorySelection, budget: Budget, order: Sequence[int], page: int, reason: str,
                  detail: str = "", pages_from: Sequence[int] | None = None) -> bool:
    """Fill the turns of ``order`` (chronological) whole from the earliest start whose turns all fit in ``budget``.
    Starts: the first turn of ``order``, then each page boundary inside it; boundaries are counted over
    ``pages_from`` (default ``order``; the session's turns when ``order`` is a window of its latest): its first turn,
    then the turn after each run of at least ``page`` tokens. False (nothing taken) when not even the last start's
    turns fit: the caller fills as it would otherwise."""
    if not order:
        return True
    groups = selection.groups
    boundaries, run = set(), 0
    for i, gi in enumerate(pages_from if pages_from is not None else order):
        if i == 0 or run >= page:
            boundaries.add(gi)
            run = 0
        run += groups[gi].eligible_tokens
    sizes = [groups[gi].eligible_tokens for gi in order]
    left = sum(sizes)
    remaining = budget.remaining
    for i, gi in enumerate(order):
        if (i == 0 or gi in boundaries) and left <= remaining:
            for taken in order[i:]:
                selection.fill_group(taken, budget, reason, detail=detail, partial=False)
            return True
        left -= sizes[i]
    return False


# ---- prefix and cost -----------------------------------------------------------------------------------------

def payload_units(plan: Any) -> list[tuple[Any, int]]:
    """The plan's payload as sent, in order, as (key, tokens) units, one per included item: keyed by its messages
    (an item that renders no message, the tool definitions, by its id and tokens). An item of several messages (a
    tool call with its results) is cached whole or not at all here, so a prefix ends at an item's edge."""
    units: list[tuple[Any, int]] = []
    for item in sorted((i for i in plan.items if i.included), key=lambda i: i.order):
        messages = item.messages
        if not messages:
            units.append(((item.id, item.tokens), item.tokens))
        elif len(messages) == 1:
            units.append((_key(messages[0]), item.tokens))
        else:
            units.append(((item.id, tuple(_key(m) for m in messages)), item.tokens))
    return units


def _key(message: Any) -> Any:
    return tuple(sorted((k, repr(v)) for k, v in dict(message).items()))


def shared_prefix_tokens(previous: Sequence[tuple[Any, int]] | None, current: Sequence[tuple[Any, int]]) -> int:
    """Tokens of the longest run of units ``current`` opens with that ``previous`` opened with too (0 without a
    previous plan)."""
    if not previous:
        return 0
    shared = 0
    for (a, _ta), (b, tokens) in zip(previous, current):
        if a != b:
            break
        shared += tokens
    return shared


@dataclass(frozen=True)
class TurnCost:
    """What one plan's prompt costs, in US dollars, under a named cache price."""

    prompt_tokens: int
    prefix_tokens: int  # the longest prefix shared with the session's previous plan
    uncached_usd: float  # every prompt token at the input price
    cached_usd: float  # the shared prefix read from the cache, the rest written to it

    @property
    def prefix_share(self) -> float:
        return self.prefix_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def turn_cost(prompt_tokens: int, prefix_tokens: int, price: CachePrice) -> TurnCost:
    """The cost of a prompt of ``prompt_tokens`` whose first ``prefix_tokens`` are in the cache: the prefix at the
    read price, the rest at the write price (a breakpoint at the prompt's end, so the next turn can read it)."""
    prefix = min(prefix_tokens, prompt_tokens)
    per_token = price.input_per_mtok / 1_000_000
    return TurnCost(prompt_tokens, prefix, prompt_tokens * per_token,
                    (prefix * price.read + (prompt_tokens - prefix) * price.write) * per_token)


@dataclass
class PrefixTally:
    """Consecutive plans of one session: each plan's prefix shared with the one before and its cost."""

    price: CachePrice
    costs: list[TurnCost]
    _previous: list[tuple[Any, int]] | None = None

    def add(self, plan: Any, prompt_tokens: Callable[[Any], int] | None = None) -> TurnCost:
        units = payload_units(plan)
        tokens = prompt_tokens(plan) if prompt_tokens else sum(t for _k, t in units)
        cost = turn_cost(tokens, shared_prefix_tokens(self._previous, units), self.price)
        self._previous = units
        self.costs.append(cost)
        return cost


def new_tally(price: CachePrice) -> PrefixTally:
    return PrefixTally(price, [])


@dataclass(frozen=True)
class CacheFigures:
    """Per strategy (and budget): the mean share of a plan's tokens that is a prefix of the previous plan's, and the
    mean cost per turn without and with cache reads."""

    plans: int
    prefix_share: float
    uncached_usd: float
    cached_usd: float

    def to_json(self) -> dict[str, Any]:
        return {"plans": self.plans, "prefix_share": round(self.prefix_share, 4),
                "usd_per_turn_uncached": round(self.uncached_usd, 6),
                "usd_per_turn_cached": round(self.cached_usd, 6)}


def figures(costs: Sequence[TurnCost]) -> CacheFigures:
    """The mean of ``costs``; each session's first plan (nothing to share yet) is counted as it is billed."""
    n = len(costs)
    if not n:
        return CacheFigures(0, 0.0, 0.0, 0.0)
    return CacheFigures(n, sum(c.prefix_share for c in costs) / n, sum(c.uncached_usd for c in costs) / n,
                        sum(c.cached_usd for c in costs) / n)
