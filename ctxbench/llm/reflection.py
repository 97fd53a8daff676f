"""Reflection after each turn: usage vs estimate, activation, leases, promotion, suggestions.

- **UsageReport**: per call, the estimated prompt tokens (the plan's count, which includes the
  tool definitions the call offers) against what the provider reported; a mismatch beyond ``llm.usage_mismatch_ratio``
  raises the badge.
- **Activation**: the items of the turn's plans, and the symbols, paths and groups the model or
  the user referenced (a dotted symbol id, a file path, or a name quoted in backticks or
  called like ``name(``), gain activation; all scores decay each turn
  (:mod:`ctxbench.planner.activation`).
- **Pins**: leases count down and expire, ephemeral pins referenced often are promoted to
  leased (:mod:`ctxbench.planner.pins`); nothing here ever makes a pin sticky.
- **Suggestions**: high activation that is not pinned, and the model's own ``suggest_pins``,
  shown under the overlay's ``suggested pins`` delimiter until the user decides.

The writes (activation, reference counts, promotions, lease countdown) are one transaction of the
workbench's unit of work: a failure half-way leaves all of them as they were. Reference counts are
also idempotent per turn, so reflecting on the same turn again does not count it twice.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from ctxbench.config import Config
from ctxbench.records.turns import Reflection, UsageCheck
from ctxbench.llm.ports import UnitOfWork
from ctxbench.llm.suggestions import open_suggestions
from ctxbench.records.vocab import ACTIVATION_SUGGESTION_PREFIXES
from ctxbench.records.item_refs import AtomRef, GroupRef, ItemRef, card_symbol

_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java|md|toml|json|yaml|yml|cfg|ini|txt))\b")
_DOTTED = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)")
_QUOTED = re.compile(r"`([^`\n]{1,200})`")
_CALLED = re.compile(r"(?<![\w.])([A-Za-z_]\w{2,})\(")
_GROUP = re.compile(r"\bgroup[: ]#?(\d+)\b", re.IGNORECASE)
_SHORT_NAME_MIN = 3  # a bare name shorter than this is never matched on its own


def check_usage(plan_id: str, estimated: int, reported: int | None, model: str, threshold: float, *,
                completion: int | None = None, price: Any = None, cache_read: int | None = None,
                cache_write: int | None = None) -> UsageCheck:
    """Compare the estimate with the provider's report; ``mismatch`` when they differ by more than ``threshold``.
    With the model's ``price`` (a ``config.ModelPrice``) and reported prompt and reply tokens, the call's cost: the
    prompt's ``cache_read`` tokens at the cache-read price, its ``cache_write`` tokens at the cache-write price
    (both shares of the input price), the rest at the input price."""
    cost = None
    if price is not None and reported is not None and completion is not None:
        read, written = cache_read or 0, cache_write or 0
        cost = ((reported - read - written) * price.input_per_mtok + written * price.cache_write_per_mtok
                + read * price.cache_read_per_mtok + completion * price.output_per_mtok) / 1_000_000
    if reported is None or reported <= 0:
        return UsageCheck(plan_id, estimated, reported, model, None, False, completion, cost, cache_read, cache_write)
    ratio = (reported - estimated) / reported
    return UsageCheck(plan_id, estimated, reported, model, ratio, abs(ratio) > threshold, completion, cost,
                      cache_read, cache_write)


@dataclass(frozen=True)
class Vocabulary:
    """What a turn's text can refer to: symbol ids (with their short names) and file paths.

    ``loose`` holds the short names that may match on their own (quoted or called): those of
    symbols shown in the turn's plans, and names that are unique in the rest of the index.
    """

    symbols: tuple[tuple[str, str], ...]  # (symbol id, short name)
    paths: tuple[str, ...]
    loose: frozenset[str] = frozenset()

    @staticmethod
    def build(symbols: Iterable[str], paths: Iterable[str], shown: Iterable[str] | None = None) -> "Vocabulary":
        ids = sorted(set(s for s in symbols if s))
        names = [s.rsplit(".", 1)[-1] for s in ids]
        if shown is None:
            loose = set(names)
        else:
            seen: dict[str, int] = {}
            for name in names:
                seen[name] = seen.get(name, 0) + 1
            loose = {n for n, c in seen.items() if c == 1} | {s.rsplit(".", 1)[-1] for s in shown}
        return Vocabulary(tuple(zip(ids, names)), tuple(sorted(set(p for p in paths if p))), frozenset(loose))


def find_references(text: str, vocab: Vocabulary) -> tuple[str, ...]:
    """Item ids (``card:<symbol>``, ``path:<file>``, ``group:<id>``) that ``text`` refers to.

    A symbol is referenced by its full id anywhere, by a dotted tail of it (``Ledger.total``),
    or by its short name when quoted in backticks or written as a call (``total(``). A short
    name shared by several symbols counts for each of them.
    """
    found: dict[str, None] = {}
    quoted = {q.strip().rstrip("()") for q in _QUOTED.findall(text)}
    called = set(_CALLED.findall(text))
    dotted = set(_DOTTED.findall(text)) | {q for q in quoted if "." in q}
    for symbol_id, name in vocab.symbols:
        hit = symbol_id in text or any(symbol_id.endswith("." + d) or d == symbol_id for d in dotted)
        if not hit and len(name) >= _SHORT_NAME_MIN and name in vocab.loose:
            hit = name in quoted or name in called
        if hit:
            found[f"card:{symbol_id}"] = None
    mentioned_paths = set(_PATH.findall(text)) | {q for q in quoted if "/" in q or "." in q}
    for path in vocab.paths:
        if path in text or any(path.endswith("/" + m) or m == path for m in mentioned_paths):
            found[f"path:{path}"] = None
    for number in _GROUP.findall(text):
        found[f"group:{int(number)}"] = None
    return tuple(found)


def plan_vocabulary(plans: Iterable[Any], code: Any = None) -> Vocabulary:
    """Symbols and paths the turn could refer to: the plans' cards, and the code index when there is one."""
    shown: list[str] = []
    paths: list[str] = []
    for plan in plans:
        for item in plan.items:
            symbol = card_symbol(item.id)
            if symbol is not None:
                shown.append(symbol)
            for m in item.messages:
                paths.extend(_PATH.findall(str(m.get("content") or "")[:400]))
    symbols = list(shown)
    known = getattr(code, "known_names", None)
    if callable(known):
        more_symbols, more_paths = known()
        symbols.extend(more_symbols)
        paths.extend(more_paths)
        return Vocabulary.build(symbols, paths, shown)
    return Vocabulary.build(symbols, paths)


def plan_item_ids(plans: Iterable[Any], pins: Iterable[Any] = ()) -> tuple[str, ...]:
    """The turn's plan items as activation ids (``card:…``, ``group:…``, a pin's target).

    Layers that are always there (system prompt, state, scratchpad, scaffold, memos) and the
    current turn itself are not items one would pin, so they gain nothing.
    """
    targets = {f"pin:{p.id}": p.target for p in pins}
    ids: dict[str, None] = {}
    for plan in plans:
        for item in plan.included:
            if item.id.startswith("pin:"):
                target = targets.get(item.id)
                if target:
                    ids[target] = None
            elif isinstance(ref := ItemRef.parse(item.id), AtomRef):
                ids[str(GroupRef(ref.group))] = None
            elif item.id.startswith(ACTIVATION_SUGGESTION_PREFIXES) and item.kind != "current_turn":
                ids[item.id] = None
    return tuple(ids)


def _card_snapshots(plans: Iterable[Any]) -> dict[str, tuple[str, str]]:
    """card:<symbol> -> (label, card text) as the turn's plans showed it (for promoted pins)."""
    out: dict[str, tuple[str, str]] = {}
    for plan in plans:
        for item in plan.items:
            if item.id.startswith("card:") and item.messages:
                out[item.id] = (item.label, str(item.messages[0].get("content") or ""))
    return out


def reflect(
    workbench: UnitOfWork,
    session_id: str,
    group_id: int,
    *,
    plans: tuple[Any, ...],
    user_text: str,
    assistant_texts: tuple[str, ...],
    usage: tuple[UsageCheck, ...],
    config: Config,
    code: Any = None,
) -> Reflection:
    """Update activation, pins and suggestions after turn ``group_id`` and say what changed."""
    from ctxbench.planner import activation as activation_rules
    from ctxbench.planner import pins as pin_rules

    cfg = config.planner
    vocab = plan_vocabulary(plans, code)
    by_user = find_references(user_text, vocab)
    by_model = find_references("\n".join(assistant_texts), vocab)
    with workbench.transaction():
        scores, expired, promoted = _reflect_writes(workbench, session_id, group_id, plans, by_user, by_model,
                                                    cfg, activation_rules, pin_rules)

    # suggestions: the model's own (until decided) and high activation that no pin covers
    suggestions = open_suggestions(workbench, session_id)
    return Reflection(
        session_id=session_id,
        turn=group_id,
        referenced_by_model=by_model,
        referenced_by_user=by_user,
        activation=tuple(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))),
        expired=tuple(expired),
        promoted=tuple(promoted),
        suggestions=suggestions,
        usage=usage,
    )


def _reflect_writes(workbench: UnitOfWork, session_id: str, group_id: int, plans: tuple[Any, ...],
                    by_user: tuple[str, ...], by_model: tuple[str, ...], cfg: Any,
                    activation_rules: Any, pin_rules: Any) -> tuple[dict[str, float], list[str], list[str]]:
    """Activation, reference counts, promotion and lease countdown (inside the caller's transaction)."""
    pins = workbench.pins.list(session_id)
    in_plan = plan_item_ids(plans, pins)

    # activation: decay, then gains for the plan's items and the references
    scores = activation_rules.update_activation(
        workbench.activation.scores(session_id), in_plan, by_model, by_user, cfg.activation)
    workbench.activation.set(session_id, scores)

    # promotion: items referenced in enough turns become leased (never sticky)
    counts = workbench.traces.count_references(session_id, group_id, set(by_model) | set(by_user))
    promoted: list[str] = []
    promoted_ids: set[str] = set()
    for before, after in zip(pins, pin_rules.promote(pins, counts, cfg.pins)):
        if after != before:
            workbench.pins.update(session_id, before.id, kind=after.kind, ttl=after.ttl, source=after.source)
            promoted.append(before.id)
            promoted_ids.add(before.id)
    pinned = {p.target for p in pins}
    snapshots = _card_snapshots(plans)
    referenced_now = set(by_model) | set(by_user)
    for target, (label, content) in sorted(snapshots.items()):
        if (target not in pinned and target in referenced_now
                and counts.get(target, 0) >= cfg.pins.promote_after_turns):
            pin = workbench.pins.add(session_id, target, "leased", label=label, content=content, source="promotion")
            promoted.append(pin.id)
            promoted_ids.add(pin.id)

    # leases count down into the next turn; expired leases and spent ephemeral pins go
    expired: list[str] = []
    ageing = [p for p in pins if p.id not in promoted_ids]
    task_open = workbench.tasks.current(session_id) is not None
    survivors = {p.id: p for p in pin_rules.advance_turn(ageing, group_id + 1, task_open=task_open)}
    for pin in ageing:
        after = survivors.get(pin.id)
        if after is None:
            workbench.pins.remove(session_id, pin.id)
            expired.append(pin.id)
        elif after.ttl != pin.ttl:
            workbench.pins.update(session_id, pin.id, ttl=after.ttl)
    return scores, expired, promoted
