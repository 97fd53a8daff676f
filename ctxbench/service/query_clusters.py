"""The query clusters of a session's turns: which cluster a plan's query joins, and what scoping to it changes.

:class:`SessionClusters` is the workbench's. For the plan of a turn it gives a :class:`ClusterChoice`:

- a turn whose query was clustered before (its row in ``store.query_clusters``, same query) keeps that
  assignment: replanning a turn, its later tool rounds, a replayed plan all show the same QueryClusterId;
- any other query that retrieves code (a mode that retrieves, semantic search available) is assigned now
  (``retrieval.query_clusters.assign``) against the cluster of the latest turn its branch sees, with the
  vector retrieval computes for it (``CodeRetrieval.query_vector``: encoded once). Such a *fresh* choice is
  only a preview until a plan of a stored turn is stored: :meth:`SessionClusters.commit` then writes it;
- a replayed turn that was never clustered gets none (replay shows what was recorded, never a guess).

Scoping, for a fresh choice that starts a new cluster: with ``[retrieval] activation_scope = "cluster"`` the
plan's retrieval gets no activation and the commit clears the stored scores (only uses within the current
cluster count from then on); with ``leases_end_with_cluster`` the leases (scope ``turn``) made before it are
left out of the plan and removed by the commit. The plan's notes say what was done.
"""
from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ctxbench.records.plans import Pin, PlanInputs
from ctxbench.records.retrieval import QueryClusterTag
from ctxbench.store.query_clusters import ClusterRow

PENDING_SIZE = 64  # fresh assignments kept until a stored plan commits them (drafts that were never sent fall out)


@dataclass(frozen=True)
class ClusterChoice:
    """The cluster of one plan's query, and what scoping to it leaves out of that plan."""

    tag: QueryClusterTag
    fresh: ClusterRow | None = None  # the row to store when the plan is (None: it is stored already)
    ended_leases: tuple[str, ...] = ()  # pin ids of the leases this new cluster ends
    clear_activation: bool = False  # activation is scoped to the cluster and this query starts one

    def notes(self) -> tuple[str, ...]:
        out = []
        if self.ended_leases:
            out.append(f"leases {', '.join(self.ended_leases)} ended: a new query cluster started "
                       "([retrieval] leases_end_with_cluster)")
        if self.clear_activation:
            out.append("activation left out: a new query cluster started ([retrieval] activation_scope = cluster)")
        return tuple(out)

    def apply(self, inputs: PlanInputs) -> PlanInputs:
        """``inputs`` with the cluster recorded and the ended leases left out."""
        pins = tuple(p for p in inputs.pins if p.id not in self.ended_leases)
        return dataclasses.replace(inputs, query_cluster=self.tag, cluster_notes=self.notes(), pins=pins)


def query_hash(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()[:24]


class SessionClusters:
    """Assigns and keeps the QueryClusterIds of a workbench's sessions (see the module's doc)."""

    def __init__(self, workbench: Any) -> None:
        self._wb = workbench
        self._pending: OrderedDict[tuple[str, int, str], ClusterChoice] = OrderedDict()
        self._lock = threading.Lock()

    def choose(self, inputs: PlanInputs, *, replay: bool = False) -> ClusterChoice | None:
        """The cluster of the plan of ``inputs`` (None: its query is not clustered)."""
        wb = self._wb
        rc = wb.config.retrieval
        retriever = wb.retriever
        if not rc.query_clusters or retriever is None or not inputs.current_turn or not inputs.query.strip():
            return None
        group_id = inputs.current_turn[0].group_id
        digest = query_hash(inputs.query)
        stored = wb.query_clusters.get(inputs.session_id, group_id)
        if stored is not None and stored.query_hash == digest:
            return ClusterChoice(_tag(stored))
        if replay or not wb.config.planner.mode(inputs.mode).auto_retrieve:
            return None
        encode = getattr(retriever, "query_vector", None)
        vector = encode(inputs.query) if encode is not None else None
        if vector is None:  # semantic search not available: nothing to cluster by
            return None
        from ctxbench.retrieval.query_clusters import QueryCluster, assign  # numpy: loaded on the first clustered plan

        model = str(getattr(retriever, "embedding_key", ""))
        before = wb.query_clusters.latest_before(inputs.session_id, group_id, {m.group_id for m in inputs.history})
        current = None
        if before is not None and before.model == model:
            current = QueryCluster(before.cluster_id, before.centroid, before.count)
        assignment = assign(current, vector, rc.cluster_threshold, wb.query_clusters.next_id(inputs.session_id))
        cluster = assignment.cluster
        row = ClusterRow(group_id, digest, model, cluster.id, assignment.started, assignment.similarity,
                         rc.cluster_threshold, cluster.count, cluster.centroid)
        ended: tuple[str, ...] = ()
        if assignment.started and rc.leases_end_with_cluster:
            ended = tuple(p.id for p in inputs.pins if _lease_ends(p, group_id))
        choice = ClusterChoice(_tag(row), row, ended,
                               assignment.started and rc.activation_scope == "cluster")
        with self._lock:
            key = (inputs.session_id, group_id, digest)
            self._pending[key] = choice
            self._pending.move_to_end(key)
            while len(self._pending) > PENDING_SIZE:
                self._pending.popitem(last=False)
        return choice

    def commit(self, inputs: PlanInputs) -> None:
        """Store the fresh assignment of a stored turn's plan (a draft's, whose message is not stored, waits),
        with what scoping to the new cluster ends: the leases it ended, the activation scores it cleared."""
        if inputs.query_cluster is None or not inputs.current_turn or not inputs.current_turn[0].id:
            return
        key = (inputs.session_id, inputs.current_turn[0].group_id, query_hash(inputs.query))
        with self._lock:
            choice = self._pending.pop(key, None)
        if choice is None or choice.fresh is None:
            return
        wb = self._wb
        with wb.transaction():
            wb.query_clusters.put(inputs.session_id, choice.fresh)
            if choice.clear_activation:
                wb.activation.set(inputs.session_id, {})
            if choice.ended_leases:
                live = {p.id for p in wb.pins.list(inputs.session_id)}
                for pin_id in choice.ended_leases:
                    if pin_id in live:
                        wb.pins.remove(inputs.session_id, pin_id)


def _lease_ends(pin: Pin, group_id: int) -> bool:
    """A lease of scope turn made before the turn ``group_id`` was sent (a task's lease follows its task)."""
    return pin.kind == "leased" and pin.scope == "turn" and pin.created_turn <= group_id


def _tag(row: ClusterRow) -> QueryClusterTag:
    return QueryClusterTag(id=row.cluster_id, queries=row.count, started=row.started,
                           similarity=None if row.similarity is None else round(row.similarity, 4),
                           threshold=row.threshold)
