"""Stored plans (inputs + result), retrieval sets and usage reports.

A plan is stored with the canonical JSON of its inputs (its messages by content key, each
message stored once in ``plan_messages`` and shared by every plan that saw it, so editing or
deleting history never changes a stored plan; the history's keys by chunks, each chunk stored once in
``plan_chunks``) and the full JSON of its result, every item with its rendered messages, compressed (a
planner's plan: its excluded history items as columns, ``store.plan_history``); :func:`get_plan` rebuilds a
ContextPlan whose ``messages()`` payload is identical to the one that was sent.

Deleting a session deletes its plans (foreign key) and then (``sessions.delete_session``) the
plan messages it owned and the retrieval sets no remaining plan uses; deleting a turn drops the
plan messages of its messages that no stored plan refers to (:func:`collect_messages`; a stored
plan keeps what it was sent).
:class:`Plans` is the repository the service uses; the module functions are the SQL.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import threading
import zlib
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from typing import Any, Mapping, Sequence

from ctxbench.records.messages import Message
from ctxbench.records.history_items import DeferredPlan
from ctxbench.records.plans import ContextPlan, PlanInputs, PlanItem
from ctxbench.records.retrieval import RetrievalSet
from ctxbench.store import codec, db, plan_history
from ctxbench.store.clock import now_iso
from ctxbench.records.errors import UnknownPlan
from ctxbench.records.sessions import PlanOrigin, PlanSummary, UsageReport
from ctxbench.records.retrieval import EMPTY_RETRIEVAL_SET
from ctxbench.store import sessions as session_store
from ctxbench.store.db import Connections


ENCODING_FULL = "json"  # schema v1: inputs and result as full JSON text
ENCODING_REFS = "refs+zlib"  # zlib-compressed JSON: inputs with messages as plan_messages keys, and result
# as ENCODING_REFS, the result in codec.compact_json's form (its items a table): a 10,000-turn session's plan
# holds ~34,000 items, and writing each as an object of its fields took over a second per stored plan
ENCODING_TABLES = "refs+tables+zlib"
# as ENCODING_TABLES, the items split in three: the head and the tail as tables, the excluded history between them
# as ``store.plan_history`` writes it (the rows of its atoms in ``plan_chunks``, shared by the session's plans)
ENCODING_HISTORY = "refs+history+zlib"
ZIPPED = (ENCODING_REFS, ENCODING_TABLES, ENCODING_HISTORY)  # encodings whose inputs and result are zlib-compressed
ZLIB_LEVEL = 1  # fast; plan JSON is repetitive enough that level 1 already shrinks it ~17x
MESSAGE_FIELDS = ("history", "current_turn")
CHUNKED = "history"  # the message field an ENCODING_HISTORY plan's inputs hold as chunks of keys (``plan_history``)
_KEY_HEX = 24  # 96 bits


_MESSAGE_ID = attrgetter("id")
_NO_KEY = (None, None)


def message_key(data: str) -> str:
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:_KEY_HEX]


def plan_exists(conn: sqlite3.Connection, plan_id: str) -> bool:
    return conn.execute("SELECT 1 FROM plans WHERE plan_id = ?", (plan_id,)).fetchone() is not None


def save_plan(
    conn: sqlite3.Connection,
    inputs: PlanInputs,
    plan: ContextPlan,
    known: Mapping[int, tuple[Message, str]] | None = None,
    rows: codec.RowTexts | None = None,
    chunks: plan_history.StoredChunks | None = None,
) -> list[tuple[Message, str]]:
    """Store a plan; the same PlanId again (same inputs → same plan) keeps the first record.

    Messages are stored once each in ``plan_messages`` under a content key; ``known`` maps the ids
    of messages already stored to (that message, its key) (a caller's cache; a message whose record
    differs from the one remembered is keyed again). Returns the (message, key) pairs written now,
    for the caller to remember once the transaction commits. ``rows``: the caller's memory of the rows
    of its last stored plan (``codec.RowTexts``), so the items it shares with this one are not written again;
    ``chunks``: its memory of the atom rows its last plan stored (``plan_history.StoredChunks``; the caller commits
    it once the transaction has).
    """
    if plan_exists(conn, plan.plan_id):
        return []
    written: list[tuple[Message, str]] = []
    body: dict[str, Any] = {}
    for name in codec.field_names(PlanInputs):
        if name not in MESSAGE_FIELDS:
            body[name] = codec.to_jsonable(getattr(inputs, name))
            continue
        messages = getattr(inputs, name)

        def keyed(part: Sequence[Message]) -> list[str]:
            return _message_keys(conn, part, known, written)

        # the history's keys by chunks, each stored once (a 10,000-turn session: ~48,000 keys, ~1.3 MB per plan);
        # the messages of a chunk stored before are not even looked up
        body[name] = (plan_history.write_keys(conn, plan.session_id, messages, keyed, chunks) if name == CHUNKED
                      else keyed(messages))
    # body is JSON data already (``to_jsonable`` of each field, lists of keys): its canonical text, unwalked
    inputs_text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    inputs_blob = zlib.compress(inputs_text.encode("utf-8"), ZLIB_LEVEL)
    # the result keeps the key order of every message: `show --messages` prints the payload as it was sent
    parts = plan.parts()
    if parts is None:
        encoding, text = ENCODING_TABLES, codec.compact_json(plan, rows)
    else:  # the excluded history as the planner made it: its atom rows by reference, its columns as runs
        head, history, tail = parts
        items = (f'{{"head":{codec.table_json(PlanItem, head, rows)},'
                 f'"history":{plan_history.write_history(conn, plan.session_id, history, chunks)},'
                 f'"tail":{codec.table_json(PlanItem, tail)}}}')
        encoding, text = ENCODING_HISTORY, codec.compact_json_with(plan, {"items": items})
    result = zlib.compress(text.encode("utf-8"), ZLIB_LEVEL)
    current = inputs.current_turn[0] if inputs.current_turn else None
    branch_id = current.branch_id if current is not None and current.branch_id else None
    group_id = current.group_id if current is not None and current.id else None  # a pending turn (id 0): a draft
    conn.execute(
        "INSERT INTO plans (plan_id, session_id, created_at, inputs, result, encoding, retrieval_id, branch_id, "
        "group_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (plan.plan_id, plan.session_id, now_iso(), inputs_blob, result, encoding, inputs.retrieval.id,
         branch_id, group_id),
    )
    if inputs.retrieval.hits or inputs.retrieval.scaffold:
        save_retrieval_set(conn, inputs.retrieval)
    return written


def _message_keys(conn: sqlite3.Connection, messages: Sequence[Message],
                  known: Mapping[int, tuple[Message, str]] | None, written: list[tuple[Message, str]], *,
                  store: bool = True) -> list[str]:
    """The ``plan_messages`` key of each message, each not stored yet stored now (and added to ``written``; not
    ``store``: made and added to ``written``, nothing stored)."""
    # the remembered (message, key) of each id, kept where it is the very record (usually: the history is
    # cached) or an equal one; C-level passes, as hashing or even visiting each of a long session's
    # ~50,000 messages in Python cost more than the rest of the step
    hits = list(map((known or {}).get, map(_MESSAGE_ID, messages), repeat(_NO_KEY)))
    keys = list(map(itemgetter(1), hits))
    same = list(map(is_, map(itemgetter(0), hits), messages))
    for i in [i for i, ok in enumerate(same) if not ok]:
        message = messages[i]
        if hits[i][0] is not None and hits[i][0] == message:
            continue
        data = codec.canonical_json(message)
        keys[i] = key = message_key(data)
        if store:
            conn.execute(
                "INSERT OR IGNORE INTO plan_messages (key, data, session_id, message_id) VALUES (?, ?, ?, ?)",
                (key, data, message.session_id, message.id),
            )
        written.append((message, key))
    return keys


def recall_chunks(conn: sqlite3.Connection, inputs: PlanInputs, plan: ContextPlan,
                  known: Mapping[int, tuple[Message, str]] | None, chunks: plan_history.StoredChunks
                  ) -> tuple[int, list[tuple[Message, str]]]:
    """Remember (in ``chunks``) each chunk of history keys and atom rows that storing ``plan`` would write and the
    store holds already (written by plans stored in an earlier process); nothing is written. Returns how many, and
    the (message, key) of the messages of those chunks not ``known`` (stored with their chunk: the caller may
    remember them as :func:`save_plan`'s ``written``)."""
    made: list[tuple[Message, str]] = []
    held_keys = plan_history.recall_keys(conn, plan.session_id, getattr(inputs, CHUNKED),
                                         lambda part: _message_keys(conn, part, known, made, store=False), chunks)
    in_held = {id(m) for owners in held_keys for m in owners}
    held = len(held_keys)
    parts = plan.parts()
    if parts is not None:
        held += plan_history.recall_history(conn, plan.session_id, parts[1], chunks)
    return held, [(m, key) for m, key in made if id(m) in in_held]


def _row(conn: sqlite3.Connection, plan_id: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM plans WHERE plan_id = ?", (plan_id,)).fetchone()
    if row is None:
        raise UnknownPlan(f"unknown plan {plan_id!r}")
    return row


def _result_text(row: sqlite3.Row) -> str:
    if row["encoding"] in ZIPPED:
        return zlib.decompress(row["result"]).decode("utf-8")
    return str(row["result"])


def get_plan(conn: sqlite3.Connection, plan_id: str) -> ContextPlan:
    return _plan(conn, _row(conn, plan_id))


_ITEMS = tuple[PlanItem, ...]


def _plan(conn: sqlite3.Connection, row: sqlite3.Row, *, deferred: bool = False) -> ContextPlan:
    """The plan stored in ``row``. ``deferred``: its excluded history (kept as columns) is read through ``conn`` only
    when something reads ``items`` (``included`` never does), so a caller that reads it must do so while ``conn`` is
    open."""
    if row["encoding"] != ENCODING_HISTORY:
        return codec.loads(ContextPlan, _result_text(row))
    data = json.loads(_result_text(row))
    parts = data.pop("items")
    head, tail = codec.from_jsonable(_ITEMS, parts["head"]), codec.from_jsonable(_ITEMS, parts["tail"])
    plan = codec.from_jsonable(ContextPlan, {**data, "items": []})
    if deferred:
        fields = {f.name: getattr(plan, f.name) for f in dataclasses.fields(ContextPlan) if f.name != "items"}
        return DeferredPlan.make(head=head, rest=lambda: plan_history.read_history(conn, parts["history"]), tail=tail,
                                 **fields)
    return dataclasses.replace(plan, items=head + plan_history.read_history(conn, parts["history"]).items() + tail)


def _messages_by_key(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Message]:
    wanted = sorted(set(keys))
    found: dict[str, Message] = {}
    for chunk, marks in db.in_chunks(wanted):
        for r in conn.execute(f"SELECT key, data FROM plan_messages WHERE key IN ({marks})", chunk):
            found[r["key"]] = codec.loads(Message, r["data"])
    missing = set(wanted) - set(found)
    if missing:
        raise UnknownPlan(f"plan messages missing from the store: {', '.join(sorted(missing)[:3])}")
    return found


def get_plan_inputs(conn: sqlite3.Connection, plan_id: str, messages: bool = True) -> PlanInputs:
    """A stored plan's inputs; without ``messages`` its history and current turn are left empty (not read)."""
    return _inputs(conn, _row(conn, plan_id), messages)


def get_plan_with_inputs(conn: sqlite3.Connection, plan_id: str) -> tuple[ContextPlan, PlanInputs]:
    """A stored plan and its inputs without their messages (as ``get_plan_inputs(messages=False)``), from one read
    of its row. The plan's excluded history is read only if its ``items`` are read while ``conn`` is open
    (``included`` is known without them)."""
    row = _row(conn, plan_id)
    return _plan(conn, row, deferred=True), _inputs(conn, row, False)


def _inputs(conn: sqlite3.Connection, row: sqlite3.Row, messages: bool) -> PlanInputs:
    if row["encoding"] not in ZIPPED:
        return codec.loads(PlanInputs, row["inputs"])
    body = json.loads(zlib.decompress(row["inputs"]).decode("utf-8"))
    values = {name: body[name] for name in body if name not in MESSAGE_FIELDS}
    inputs = codec.from_jsonable(PlanInputs, values | {name: () for name in MESSAGE_FIELDS})
    if not messages:
        return inputs
    keys = {name: plan_history.read_keys(conn, body[name]) for name in MESSAGE_FIELDS}
    by_key = _messages_by_key(conn, [k for name in MESSAGE_FIELDS for k in keys[name]])
    return dataclasses.replace(
        inputs, **{name: tuple(by_key[k] for k in keys[name]) for name in MESSAGE_FIELDS}
    )


def plan_origin(conn: sqlite3.Connection, plan_id: str) -> PlanOrigin:
    row = conn.execute(
        "SELECT p.plan_id, p.session_id, p.branch_id, p.group_id, b.name, b.fork_message_id, "
        "(SELECT name FROM branches parent WHERE parent.id = b.parent_id) AS parent_name "
        "FROM plans p LEFT JOIN branches b ON b.id = p.branch_id WHERE p.plan_id = ?",
        (plan_id,),
    ).fetchone()
    if row is None:
        raise UnknownPlan(f"unknown plan {plan_id!r}")
    return PlanOrigin(row["plan_id"], row["session_id"], row["branch_id"], row["name"] or "", row["parent_name"] or "",
                      row["fork_message_id"] if row["parent_name"] else None, row["group_id"])


def turn_plan_before(conn: sqlite3.Connection, branch_ids: Sequence[str], visible_groups: set[int],
                     group_id: int | None) -> str | None:
    """The id of the last plan stored for the latest turn before ``group_id`` (any turn when None) among the
    turns a branch sees: the plan a turn's plan is compared with."""
    if not branch_ids:
        return None
    marks = ",".join("?" * len(branch_ids))
    bound = "" if group_id is None else "AND group_id < ?"
    params: list[object] = [*branch_ids] + ([] if group_id is None else [group_id])
    rows = conn.execute(
        f"SELECT plan_id, group_id FROM plans WHERE branch_id IN ({marks}) AND group_id IS NOT NULL {bound} "
        "ORDER BY group_id DESC, created_at DESC",
        params,
    )
    return next((r["plan_id"] for r in rows if r["group_id"] in visible_groups), None)


def list_plans(conn: sqlite3.Connection, session_id: str, limit: int) -> list[PlanSummary]:
    """The session's plans, newest first."""
    rows = conn.execute(
        "SELECT plan_id, session_id, created_at, result, encoding FROM plans WHERE session_id = ? "
        "ORDER BY created_at DESC, plan_id LIMIT ?",
        (session_id, limit),
    )
    out: list[PlanSummary] = []
    for r in rows:
        data = json.loads(_result_text(r))
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


def collect_messages(conn: sqlite3.Connection, session_id: str, message_ids: Sequence[int]) -> int:
    """Delete the plan messages of ``message_ids`` (deleted from history) that no stored plan refers to.

    Only plans of the session can refer to them; they are unpacked oldest first and the search stops
    as soon as every candidate is known to be referenced. Returns the rows deleted.
    """
    candidates: dict[str, int] = {}
    ids = sorted(set(message_ids))
    for chunk, marks in db.in_chunks(ids):
        for r in conn.execute(
            f"SELECT key FROM plan_messages WHERE session_id = ? AND message_id IN ({marks})", (session_id, *chunk)
        ):
            candidates[r["key"]] = 1
    if not candidates:
        return 0
    chunked: set[str] = set()
    for row in conn.execute(
        "SELECT inputs, encoding FROM plans WHERE session_id = ? ORDER BY created_at, plan_id", (session_id,)
    ):
        if row["encoding"] not in ZIPPED:
            continue  # schema v1 plans hold their messages inline
        text = zlib.decompress(row["inputs"]).decode("utf-8")
        for key in [k for k in candidates if k in text]:
            del candidates[key]
        if not candidates:
            return 0
        history = json.loads(text).get(CHUNKED)
        if isinstance(history, dict):  # its history's keys by chunks: looked into below, each chunk once
            chunked.update(history["chunks"])
    for text in plan_history.key_chunk_texts(conn, sorted(chunked)):
        for key in [k for k in candidates if k in text]:
            del candidates[key]
        if not candidates:
            return 0
    keys = sorted(candidates)
    for chunk, marks in db.in_chunks(keys):
        conn.execute(f"DELETE FROM plan_messages WHERE key IN ({marks})", chunk)
    return len(keys)


def save_retrieval_set(conn: sqlite3.Connection, retrieval: RetrievalSet) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO retrieval_sets (id, query, data, created_at) VALUES (?, ?, ?, ?)",
        (retrieval.id, retrieval.query, codec.canonical_json(retrieval), now_iso()),
    )


def get_retrieval_set(conn: sqlite3.Connection, retrieval_id: str) -> RetrievalSet | None:
    row = conn.execute("SELECT data FROM retrieval_sets WHERE id = ?", (retrieval_id,)).fetchone()
    return codec.loads(RetrievalSet, row["data"]) if row else None


def record_usage(conn: sqlite3.Connection, plan_id: str, estimated: int, reported: int | None, model: str, *,
                 completion: int | None = None, cache_read: int | None = None,
                 cache_write: int | None = None) -> UsageReport:
    _row(conn, plan_id)
    stamp = now_iso()
    cur = conn.execute(
        "INSERT INTO usage_reports (plan_id, estimated, reported, model, created_at) VALUES (?, ?, ?, ?, ?)",
        (plan_id, estimated, reported, model, stamp),
    )
    if (completion, cache_read, cache_write) != (None, None, None):
        conn.execute("INSERT INTO usage_billing (usage_id, completion, cache_read, cache_write) VALUES (?, ?, ?, ?)",
                     (cur.lastrowid, completion, cache_read, cache_write))
    return UsageReport(plan_id, estimated, reported, model, stamp, completion, cache_read, cache_write)


def usage_reports(conn: sqlite3.Connection, plan_id: str) -> tuple[UsageReport, ...]:
    rows = conn.execute("SELECT u.*, b.completion, b.cache_read, b.cache_write FROM usage_reports u "
                        "LEFT JOIN usage_billing b ON b.usage_id = u.id WHERE u.plan_id = ? ORDER BY u.id", (plan_id,))
    return tuple(UsageReport(r["plan_id"], int(r["estimated"]), r["reported"], r["model"], r["created_at"],
                             r["completion"], r["cache_read"], r["cache_write"]) for r in rows)


STORED_MESSAGE_CACHE = 50_000  # messages remembered as already in plan_messages before the memory is reset


class Plans:
    """Stored plans with their inputs, retrieval sets and usage reports.

    It remembers which messages are already in ``plan_messages``, so the next plan of a long session
    does not serialise its whole history again.
    """

    def __init__(self, database: Connections) -> None:
        self._db = database
        self._stored_messages: dict[int, tuple[Message, str]] = {}  # message id → (message, key)
        self._row_texts = codec.RowTexts()
        self._stored_chunks = plan_history.StoredChunks()
        self._cache_lock = threading.Lock()

    def save(self, inputs: PlanInputs, plan: ContextPlan) -> None:
        """Store a plan with its inputs (a PlanId already stored is left as it is)."""
        with self._cache_lock:  # plans are written one at a time anyway (one writer per database file)
            self._stored_chunks.begin()
            with self._db.transaction() as conn:
                written = save_plan(conn, inputs, plan, self._stored_messages, self._row_texts, self._stored_chunks)
            self._stored_chunks.commit()
            self._remember(written)

    def _remember(self, written: list[tuple[Message, str]]) -> None:
        """Remember these (message, key) as stored in ``plan_messages`` (under ``_cache_lock``)."""
        if len(self._stored_messages) + len(written) > STORED_MESSAGE_CACHE:
            self._stored_messages.clear()
        self._stored_messages.update((message.id, (message, key)) for message, key in written)

    def recall(self, inputs: PlanInputs, plan: ContextPlan) -> int:
        """Remember which of the chunks storing ``plan`` would write the store holds already, so the first plan
        stored in this process writes, and even encodes, only what changed since (the first plan shown of a
        reopened session, recalled while the user reads it: a 10,000-turn session's first store took 170-250 ms
        against ~45 for the next ones). Nothing is written; returns how many chunks it holds."""
        with self._cache_lock:
            self._stored_chunks.begin()
            with self._db.connection() as conn:
                held, stored = recall_chunks(conn, inputs, plan, self._stored_messages, self._stored_chunks)
            self._stored_chunks.commit()
            self._remember(stored)
        return held

    def known_keys(self, messages: Mapping[int, Message]) -> dict[int, str]:
        """The ``plan_messages`` key of each of ``messages`` (by id) this repository knows is stored: the very record
        was stored, or adopted, here."""
        with self._cache_lock:
            return {mid: key for mid, (message, key) in self._stored_messages.items() if messages.get(mid) is message}

    def adopt_keys(self, messages: Mapping[int, Message], keys: Mapping[int, str]) -> None:
        """Take ``keys`` (message id -> its ``plan_messages`` key, from :meth:`known_keys` in an earlier process, for
        these very records) as stored: the next plan does not key those messages again. The caller vouches that
        the rows are still there (``store.history_snapshots``: deleting a message deletes the snapshot)."""
        with self._cache_lock:
            if len(self._stored_messages) + len(keys) > STORED_MESSAGE_CACHE:
                self._stored_messages.clear()
            for mid, key in keys.items():
                message = messages.get(mid)
                if message is not None:
                    self._stored_messages[mid] = (message, key)

    def get(self, plan_id: str) -> ContextPlan:
        """A stored plan, rebuilt exactly (same items, same ``messages()`` payload)."""
        with self._db.connection() as conn:
            return get_plan(conn, plan_id)

    def inputs(self, plan_id: str) -> PlanInputs:
        """The inputs a stored plan was built from (to replay or explain it)."""
        with self._db.connection() as conn:
            return get_plan_inputs(conn, plan_id)

    def list(self, session_id: str, limit: int = 50) -> list[PlanSummary]:
        with self._db.connection() as conn:
            session_store.require_session(conn, session_id)
            return list_plans(conn, session_id, limit)

    def origin(self, plan_id: str) -> PlanOrigin:
        """The session, branch (and its fork point) and turn a stored plan was made for."""
        with self._db.connection() as conn:
            return plan_origin(conn, plan_id)

    def turn_plan_before(self, branch_ids: Sequence[str], visible_groups: set[int], group_id: int | None) -> str | None:
        """The last stored plan of the latest turn before ``group_id`` among ``visible_groups`` (the turns a branch
        sees) on ``branch_ids`` (the branch and its ancestors), or None."""
        with self._db.connection() as conn:
            return turn_plan_before(conn, branch_ids, visible_groups, group_id)

    def retrieval_set(self, retrieval_id: str) -> RetrievalSet | None:
        if retrieval_id == EMPTY_RETRIEVAL_SET.id:
            return EMPTY_RETRIEVAL_SET
        with self._db.connection() as conn:
            return get_retrieval_set(conn, retrieval_id)

    def save_retrieval_set(self, retrieval: RetrievalSet) -> None:
        """Store a RetrievalSet (one already stored under its id is left as it is)."""
        with self._db.transaction() as conn:
            save_retrieval_set(conn, retrieval)

    def record_usage(self, plan_id: str, estimated: int, reported: int | None, model: str, *,
                     completion: int | None = None, cache_read: int | None = None,
                     cache_write: int | None = None) -> UsageReport:
        """Record estimated vs provider-reported prompt tokens for a stored plan, with the reply tokens and the
        prompt's cache reads and writes where the provider reported them."""
        with self._db.transaction() as conn:
            return record_usage(conn, plan_id, estimated, reported, model, completion=completion,
                                cache_read=cache_read, cache_write=cache_write)

    def usage_reports(self, plan_id: str) -> tuple[UsageReport, ...]:
        with self._db.connection() as conn:
            return usage_reports(conn, plan_id)
