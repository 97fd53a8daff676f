"""The steering passes over a proxied request's items: the truncation tier of each tool result and its cut, tool
definitions dropped by id or pattern, the items the user pinned and the sticky pins added back, and the policy's
budget for tool results."""
from __future__ import annotations

import fnmatch

from ctxbench.config import TruncationConfig
from ctxbench.planner.truncation import TIER_INACTIVE, active_tiers, tier_limit
from ctxbench.records.plans import Pin, PlanItem
from ctxbench.service.proxy.edits import Edits
from ctxbench.service.proxy.plan_items import ItemBuilder, RequestItem, plan_item
from ctxbench.service.proxy.rules import remove_parts, result_budget_drops
from ctxbench.tokens import Tokenizer

PROXY_TRUNCATION_HINT = "\n... [cut by ctxbench: {kept} of {total} characters kept ({tier} tier)]"
CUT_DETAIL = "tool result cut to"  # how a cut tool result's detail starts
PINNED_BLOCK = "[pinned by the user in ctxbench: {label}]\n{content}"


def tiers_by_atom(builder: ItemBuilder, truncation: TruncationConfig) -> dict[str, str]:
    """The truncation tier of every tool result, by atom id: the turn in progress's newest results are
    ``active_recent``, its older ones ``active_older``, past turns' ``inactive``."""
    current = [item.id for item in sorted(builder.items.values(), key=lambda i: i.order)
               if item.kind == "tool_atom" and item.group == builder.last_group]
    tiers = active_tiers(list(range(len(current))), truncation)
    out = {atom: tiers[n] for n, atom in enumerate(current)}
    for item in builder.items.values():
        if item.kind == "tool_atom" and item.group != builder.last_group:
            out[item.id] = TIER_INACTIVE
    return out


def keep_results_within(b: ItemBuilder, budget: int, out: list[PlanItem], edits: Edits, changes: list[str],
                        held: list[str]) -> None:
    """The policy's budget for tool results: whole tool calls with their results left out, oldest first, until
    the results sent come to ``budget`` tokens (none of the turn in progress, none pinned)."""
    atoms = sorted((i for i in out if i.included and i.kind == "tool_atom"), key=lambda i: i.order)
    gone, total = result_budget_drops([(i.id, i.tokens, not i.pin and b.items[i.id].group != b.last_group)
                                       for i in atoms], budget)
    where = {planned.id: n for n, planned in enumerate(out)}
    for atom_id in gone:
        item, planned = b.items[atom_id], out[where[atom_id]]
        for _m, part in item.parts:
            edits.replace.pop(part.location, None)
        remove_parts(item.parts, edits)
        why = f"tool results over the policy's {budget:,} tok a request (oldest left out first)"
        changes.append(f"left out {atom_id} ({item.label}, {planned.tokens:,} tok): {why}")
        out[where[atom_id]] = plan_item(item, included=False, reason="over_budget", pin=None, detail=why,
                                        tokens=planned.tokens)
    if total > budget:
        held.append(f"tool results {total:,} tok, over the policy's {budget:,}: the rest are the turn in "
                    "progress's or pinned")


def dropped_tool(item_id: str, dropped: frozenset[str]) -> bool:
    """Whether a tool definition's item is dropped: by its id, or by a pattern (``tool:mcp__*``, the policy's)."""
    return item_id in dropped or any("*" in d and fnmatch.fnmatchcase(item_id, d) for d in dropped)


def pinned_items(b: ItemBuilder, pins: tuple[Pin, ...]) -> dict[str, str]:
    """Items the user pinned, by item id, with the pin's kind (a ``path:`` pin pins the files of that path)."""
    live = [p for p in pins if not (p.kind == "leased" and p.ttl <= 0)]
    out: dict[str, str] = {}
    for item in b.items.values():
        for pin in live:
            path = item.label[5:] if item.kind == "attached_file" else None
            if pin.target == item.id or (path and pin.target == f"path:{path}"):
                out[item.id] = pin.kind
    return out


def truncate_result(item: RequestItem, tier: str, truncation: TruncationConfig, tokenizer: Tokenizer, edits: Edits,
                    changes: list[str]) -> tuple[int, str]:
    limit = tier_limit(tier, truncation)
    tokens = item.tokens
    for _m, part in item.parts:
        if part.kind != "tool_result" or not part.replaceable or len(part.text) <= limit:
            continue
        cut = part.text[:limit] + PROXY_TRUNCATION_HINT.format(kept=limit, total=len(part.text), tier=tier)
        edits.replace[part.location] = cut
        tokens += tokenizer.count(cut) - part.tokens
        changes.append(f"cut {item.id} ({item.label}) to {limit:,} of {len(part.text):,} chars: {tier} tier")
        item.label = item.label.replace(f" → {len(part.text):,} chars", f" → {len(cut):,} of {len(part.text):,} chars sent")
        return tokens, f"{CUT_DETAIL} {limit:,} of {len(part.text):,} chars ({tier} tier)"
    return tokens, ""


def readd_pins(b: ItemBuilder, pins: tuple[Pin, ...], present: dict[str, str], edits: Edits, changes: list[str],
               tokenizer: Tokenizer) -> list[PlanItem]:
    """Sticky pins with text that the request does not carry, added back to the system prompt."""
    out: list[PlanItem] = []
    carried = set(present)
    for n, pin in enumerate(p for p in pins if p.kind == "sticky" and p.content):
        if pin.target in carried or any(pin.target == f"path:{b.items[i].label[5:]}" for i in carried
                                        if b.items[i].kind == "attached_file"):
            continue
        block = PINNED_BLOCK.format(label=pin.label or pin.target, content=pin.content)
        edits.system_append.append(block)
        tokens = tokenizer.count(block)
        changes.append(f"added pin {pin.target} ({tokens:,} tok): pinned sticky, and the request no longer carries it")
        out.append(PlanItem(id=f"pin:{pin.id}", kind="pin", section="pins", label=f"pinned {pin.label or pin.target}",
                            tokens=tokens, included=True, reason="pinned_sticky", pin="sticky", order=5_000 + n,
                            messages=({"role": "system", "content": block},),
                            detail="added back: the client no longer sends it"))
    return out
