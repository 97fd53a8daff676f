"""Stored plans (inputs + result), retrieval sets and usage reports.

A plan is stored with the canonical JSON of its inputs and the full JSON of its result
(every item with its rendered messages), so :func:`get_plan` rebuilds a ContextPlan whose
``messages()`` payload is identical to the one that was sent.
Callers wrap writes in :func:`ctxbench.store.db.transaction`.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from ctxbench.planner.records import ContextPlan, PlanInputs
from ctxbench.retrieval.retrieval_set import RetrievalSet
from ctxbench.store import codec
from ctxbench.store.clock import now_iso
from ctxbench.store.errors import UnknownPlan


@dataclass(frozen=True)
class PlanSummary:
    plan_id: str
    session_id: str
    created_at: str
    query: str
    mode: str
    strategy: str
    budget: int
    used_tokens: int
    over_budget: bool


@dataclass(frozen=True)
class UsageReport:
    plan_id: str
    estimated: int
    reported: int | None  # prompt tokens the provider reported; None when it did not say
    model: str
    created_at: str


def save_plan(conn: sqlite3.Connection, inputs: PlanInputs, plan: ContextPlan) -> None:
    """Store a plan; the same PlanId again (same inputs → same plan) keeps the first record."""
    conn.execute(
        "INSERT OR IGNORE INTO plans (plan_id, session_id, created_at, inputs, result) VALUES (?, ?, ?, ?, ?)",
        (plan.plan_id, plan.session_id, now_iso(), codec.canonical_json(inputs), codec.canonical_json(plan)),
    )
    if inputs.retrieval.hits or inputs.retrieval.scaffold:
        save_retrieval_set(conn, inputs.retrieval)


def _row(conn: sqlite3.Connection, plan_id: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM plans WHERE plan_id = ?", (plan_id,)).fetchone()
    if row is None:
        raise UnknownPlan(f"unknown plan {plan_id!r}")
    return row


def get_plan(conn: sqlite3.Connection, plan_id: str) -> ContextPlan:
    return codec.loads(ContextPlan, _row(conn, plan_id)["result"])


def get_plan_inputs(conn: sqlite3.Connection, plan_id: str) -> PlanInputs:
    return codec.loads(PlanInputs, _row(conn, plan_id)["inputs"])


def list_plans(conn: sqlite3.Connection, session_id: str, limit: int) -> list[PlanSummary]:
    """The session's plans, newest first."""
    rows = conn.execute(
        "SELECT plan_id, session_id, created_at, result FROM plans WHERE session_id = ? "
        "ORDER BY created_at DESC, plan_id LIMIT ?",
        (session_id, limit),
    )
    out: list[PlanSummary] = []
    for r in rows:
        data = json.loads(r["result"])
        out.append(
            PlanSummary(
                plan_id=r["plan_id"],
                session_id=r["session_id"],
                created_at=r["created_at"],
                query=data["query"],
                mode=data["mode"],
                strategy=data["strategy"],
                budget=int(data["budget"]),
                used_tokens=int(data["used_tokens"]),
                over_budget=bool(data["over_budget"]),
            )
        )
    return out


def save_retrieval_set(conn: sqlite3.Connection, retrieval: RetrievalSet) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO retrieval_sets (id, query, data, created_at) VALUES (?, ?, ?, ?)",
        (retrieval.id, retrieval.query, codec.canonical_json(retrieval), now_iso()),
    )


def get_retrieval_set(conn: sqlite3.Connection, retrieval_id: str) -> RetrievalSet | None:
    row = conn.execute("SELECT data FROM retrieval_sets WHERE id = ?", (retrieval_id,)).fetchone()
    return codec.loads(RetrievalSet, row["data"]) if row else None


def record_usage(conn: sqlite3.Connection, plan_id: str, estimated: int, reported: int | None, model: str) -> UsageReport:
    _row(conn, plan_id)
    stamp = now_iso()
    conn.execute(
        "INSERT INTO usage_reports (plan_id, estimated, reported, model, created_at) VALUES (?, ?, ?, ?, ?)",
        (plan_id, estimated, reported, model, stamp),
    )
    return UsageReport(plan_id, estimated, reported, model, stamp)


def usage_reports(conn: sqlite3.Connection, plan_id: str) -> tuple[UsageReport, ...]:
    rows = conn.execute("SELECT * FROM usage_reports WHERE plan_id = ? ORDER BY id", (plan_id,))
    return tuple(UsageReport(r["plan_id"], int(r["estimated"]), r["reported"], r["model"], r["created_at"]) for r in rows)
