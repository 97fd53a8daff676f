"""History turns (groups) split into atoms, rendered and counted once and cached across plans.

An **atom** is the indivisible unit of selection:

* an assistant message with tool calls together with all of its tool results (never split; when a
  result answers a call of an earlier atom, the atoms in between are merged so that an atom is
  always a contiguous run of messages and the payload stays chronological);
* the group's user message (every other atom of the group depends on it: "a turn never loses its
  user message");
* a plain assistant text message; a tool result that answers no known call.

System-role messages are not atoms: they are mandatory candidates of their own.

Everything here depends only on the messages, the provider family, the truncation config and the
tokenizer, so a group's atoms are built once and reused by every later plan. The cache is keyed by
the identity of the message objects first (cheap) and by their value second (messages freshly
loaded from the store hit the cache as long as nothing in them changed).
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter
from typing import Any, Callable, Hashable, Sequence

from ctxbench.config import TruncationConfig
from ctxbench.records.messages import Message, strategy_family
from ctxbench.planner import render, truncation
from ctxbench.tokens import Tokenizer, count_message

ATOM_USER = "user"
ATOM_CALL = "call"
ATOM_TEXT = "text"
ATOM_RESULT = "result"

EXCLUDE_DROPPED = "dropped_by_user"
EXCLUDE_ISOLATED = "isolated_strategy"

CACHE_MAX_ENTRIES = 50_000
NO_FLAGS: frozenset[str] = frozenset()  # shared: most atoms have no flags (fewer objects for the GC)


@dataclass(frozen=True, eq=False)
class Atom:
    id: str  # atom:<group>:<first message id>
    group_id: int
    index: int  # position within the group's atoms
    kind: str  # user | call | text | result
    message_ids: tuple[int, ...]
    messages: tuple[dict[str, Any], ...]  # rendered OpenAI messages (tool results truncated)
    tokens: int  # sum of count_message over ``messages``
    label: str
    flags: frozenset[str]  # importance flags of its messages
    exclusion: str  # structural exclusion (dropped_by_user / isolated_strategy) or ""
    exclusion_detail: str
    detail: str  # truncation detail
    user_text: str  # the user message text for user atoms, else ""
    first_id: int
    external_ids: tuple[str, ...]  # source ids of its messages (imported transcripts), in message order
    # the fields of its excluded PlanItem that never change (filled by the plan assembly on first use)
    item_template: dict[str, Any] = field(default_factory=dict, repr=False)
    included_template: dict[str, Any] = field(default_factory=dict, repr=False)  # ... and of its included one

    def __getstate__(self) -> dict[str, Any]:  # kept without what plan assembly fills in (``service.history_snapshot``)
        return {k: v for k, v in self.__dict__.items() if k not in _ATOM_MEMOS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, item_template={}, included_template={})


@dataclass(frozen=True, eq=False)
class SystemMessage:
    """A system-role message found in history: a mandatory candidate."""

    id: str  # sysmsg:<message id>
    group_id: int
    message_id: int
    rendered: dict[str, Any]
    tokens: int
    label: str
    exclusion: str


@dataclass(frozen=True, eq=False)
class GroupView:
    group_id: int
    messages: tuple[Message, ...]
    atoms: tuple[Atom, ...]
    system_messages: tuple[SystemMessage, ...]
    user_index: int  # index of the group's user atom in ``atoms``; -1 when the group has none
    eligible_tokens: int  # tokens of the atoms without a structural exclusion
    flags: frozenset[str]
    first_id: int
    digest: str  # sha256 of the canonical rows of its messages (PlanId)
    # per-view memo of plan assembly: its atoms' rows and the reasons and details of its atoms when left out whole
    excluded_items: dict[Any, Any] = field(default_factory=dict, repr=False)
    # per-view memo for strategies (e.g. the levels classification), keyed by what it depends on
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    def __getstate__(self) -> dict[str, Any]:  # kept without its items (``service.history_snapshot``)
        return {k: v for k, v in self.__dict__.items() if k != "excluded_items"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, excluded_items={})
        self.__dict__.setdefault("memo", {})


_ATOM_MEMOS = frozenset(("item_template", "included_template"))


class _TupleCache:
    """Maps (extra key, tuple of messages) to a value.

    First by the identity of the message objects (cheap; an entry holds the objects, so their ids
    cannot be reused while it exists), then by message ids with an equality check of every message
    (messages freshly loaded from the store hit as long as nothing in them changed; equality
    compares the strings without hashing them).
    """

    def __init__(self, max_entries: int = CACHE_MAX_ENTRIES) -> None:
        self._by_id: dict[Hashable, tuple[tuple[Message, ...], Any]] = {}
        self._by_mid: dict[Hashable, tuple[tuple[Message, ...], Any]] = {}
        self._max = max_entries
        self._lock = threading.Lock()

    def get(self, extra: Hashable, msgs: tuple[Message, ...], build: Callable[[], Any]) -> Any:
        id_key = (extra, tuple(map(id, msgs)))
        hit = self._by_id.get(id_key)
        if hit is not None:
            return hit[1]
        mid_key = (extra, tuple(map(_MESSAGE_ID, msgs)))
        entry = self._by_mid.get(mid_key)
        if entry is not None and all(a is b or a == b for a, b in zip(entry[0], msgs)):
            value = entry[1]
        else:
            value = build()
        with self._lock:
            if entry is not None:  # forget the objects this entry held: only the newest copy stays
                self._by_id.pop((extra, tuple(map(id, entry[0]))), None)
            if len(self._by_mid) >= self._max or len(self._by_id) >= self._max:
                self._by_mid.clear()
                self._by_id.clear()
            self._by_mid[mid_key] = (msgs, value)
            self._by_id[id_key] = (msgs, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._by_id.clear()
            self._by_mid.clear()


_MESSAGE_ID = attrgetter("id")
_VIEWS: dict[int, tuple[Tokenizer, _TupleCache]] = {}
_DIGESTS = _TupleCache()
_VIEWS_LOCK = threading.Lock()


def clear_caches() -> None:
    """Forget every cached group and history layout (tests, memory pressure)."""
    with _VIEWS_LOCK:
        _VIEWS.clear()
    _DIGESTS.clear()
    with _LAYOUTS_LOCK:
        _LAYOUTS.clear()


def _view_cache(tokenizer: Tokenizer) -> _TupleCache:
    entry = _VIEWS.get(id(tokenizer))
    if entry is None or entry[0] is not tokenizer:
        with _VIEWS_LOCK:
            entry = (tokenizer, _TupleCache())
            _VIEWS[id(tokenizer)] = entry
    return entry[1]


def split_groups(history: Sequence[Message]) -> list[tuple[Message, ...]]:
    """History messages grouped by ``group_id``, groups in order of first appearance."""
    runs: list[list[Message]] = []
    where: dict[int, int] = {}
    for gid, run in groupby(history, key=attrgetter("group_id")):
        at = where.get(gid)
        if at is None:
            where[gid] = len(runs)
            runs.append(list(run))
        else:  # a group interrupted by another one: keep it whole
            runs[at].extend(run)
    return [tuple(r) for r in runs]


def split_atoms(messages: Sequence[Message]) -> tuple[list[tuple[str, list[Message]]], list[Message]]:
    """(atoms as (kind, messages), system messages) of one group, in message order."""
    atoms: list[tuple[str, list[Message]]] = []
    systems: list[Message] = []
    call_owner: dict[str, int] = {}
    for m in messages:
        if m.role == "system":
            systems.append(m)
            continue
        if m.role == "assistant" and m.tool_calls:
            atoms.append((ATOM_CALL, [m]))
            for call in m.tool_calls:
                if call.id:
                    call_owner[call.id] = len(atoms) - 1
            continue
        if m.role == "tool":
            owner = call_owner.get(m.tool_call_id) if m.tool_call_id else None
            if owner is None and atoms and atoms[-1][0] == ATOM_CALL:
                owner = len(atoms) - 1  # results without a matching id answer the latest call
            if owner is None:
                atoms.append((ATOM_RESULT, [m]))
                continue
            if owner < len(atoms) - 1:
                merged = [x for _kind, run in atoms[owner:] for x in run]
                kind = ATOM_USER if any(x.role == "user" for x in merged) else ATOM_CALL
                del atoms[owner:]
                atoms.append((kind, merged))
                for call_id, at in call_owner.items():
                    if at > owner:
                        call_owner[call_id] = owner
            atoms[owner][1].append(m)
            continue
        atoms.append((ATOM_USER if m.role == "user" else ATOM_TEXT, [m]))
    return atoms, systems


def _label(kind: str, msgs: Sequence[Message]) -> str:
    first = msgs[0]
    if kind == ATOM_USER:
        return "user: " + render.short(first.content)
    if kind == ATOM_CALL:
        names = [c.name for m in msgs for c in m.tool_calls]
        results = sum(1 for m in msgs if m.role == "tool")
        return f"tool call {', '.join(names)} ({results} result{'s' if results != 1 else ''})"
    if kind == ATOM_RESULT:
        return f"tool result {first.tool_name or first.tool_call_id or ''}".rstrip()
    return "assistant: " + render.short(first.content)


def exclusion_of(msgs: Sequence[Message], provider_family: str) -> tuple[str, str]:
    """Structural exclusion of an atom: a dropped message, or a tool message of another provider family."""
    for m in msgs:
        if m.status == "dropped":
            return EXCLUDE_DROPPED, f"message {m.id} dropped"
    for m in msgs:
        if m.is_tool_message:
            family = strategy_family(m.parsing_strategy)
            if family != provider_family:
                return EXCLUDE_ISOLATED, (
                    f"tool message {m.id} was made by {m.parsing_strategy} ({family}); provider family is {provider_family}"
                )
    return "", ""


def render_atom_messages(
    msgs: Sequence[Message],
    tiers: dict[int, str] | None,
    trunc: TruncationConfig,
    tokenizer: Tokenizer,
) -> tuple[tuple[dict[str, Any], ...], int, str]:
    """Rendered messages, their tokens and the truncation detail. ``tiers`` None means inactive group.

    Every tool call is answered right after its message (``render.answer_tool_calls``): a call stored
    without a result gets a synthetic tool message, counted like any other.
    """
    rendered: list[dict[str, Any]] = []
    entries: list[tuple[int, str, int, int, bool]] = []
    for m in msgs:
        content: str | None = None
        if m.role == "tool":
            tier = truncation.TIER_INACTIVE if tiers is None else tiers.get(m.id, truncation.TIER_ACTIVE_OLDER)
            limit = truncation.tier_limit(tier, trunc)
            content, cut = truncation.truncate(m.content, limit, m.id)
            entries.append((m.id, tier, limit, len(m.content), cut))
        rendered.append(render.history_message(m, content))
    rendered = render.answer_tool_calls(rendered)
    tokens = sum(count_message(tokenizer, msg) for msg in rendered)
    return tuple(rendered), tokens, truncation.describe(entries)


def _build_view(
    msgs: tuple[Message, ...], provider_family: str, trunc: TruncationConfig, tokenizer: Tokenizer
) -> GroupView:
    gid = msgs[0].group_id
    raw_atoms, systems = split_atoms(msgs)
    user_index = next((i for i, (kind, _run) in enumerate(raw_atoms) if kind == ATOM_USER), -1)
    user_exclusion = ("", "")
    if user_index >= 0:
        user_exclusion = exclusion_of(raw_atoms[user_index][1], provider_family)
    atoms: list[Atom] = []
    eligible = 0
    group_flags: set[str] = set()
    for index, (kind, run) in enumerate(raw_atoms):
        rendered, tokens, detail = render_atom_messages(run, None, trunc, tokenizer)
        exclusion, why = exclusion_of(run, provider_family)
        if not exclusion and user_exclusion[0]:
            exclusion, why = user_exclusion[0], f"its turn's user message is excluded: {user_exclusion[1]}"
        flags = frozenset(f for m in run for f in m.flags) if any(m.flags for m in run) else NO_FLAGS
        group_flags |= flags
        if not exclusion:
            eligible += tokens
        atoms.append(
            Atom(
                id=f"atom:{gid}:{run[0].id}",
                group_id=gid,
                index=index,
                kind=kind,
                message_ids=tuple(m.id for m in run),
                messages=rendered,
                tokens=tokens,
                label=_label(kind, run),
                flags=flags,
                exclusion=exclusion,
                exclusion_detail=why,
                detail=detail,
                user_text="\n".join(m.content for m in run if m.role == "user"),
                first_id=run[0].id,
                external_ids=tuple(m.external_id for m in run if m.external_id),
            )
        )
    system_views = []
    for m in systems:
        msg = render.history_message(m)
        system_views.append(
            SystemMessage(
                id=f"sysmsg:{m.id}",
                group_id=gid,
                message_id=m.id,
                rendered=msg,
                tokens=count_message(tokenizer, msg),
                label="system message: " + render.short(m.content),
                exclusion=EXCLUDE_DROPPED if m.status == "dropped" else "",
            )
        )
    return GroupView(
        group_id=gid,
        messages=msgs,
        atoms=tuple(atoms),
        system_messages=tuple(system_views),
        user_index=user_index,
        eligible_tokens=eligible,
        flags=frozenset(group_flags) if group_flags else NO_FLAGS,
        first_id=msgs[0].id,
        digest=group_digest(msgs),
    )


def group_views(
    groups: Sequence[tuple[Message, ...]], provider_family: str, trunc: TruncationConfig, tokenizer: Tokenizer
) -> list[GroupView]:
    """Views of past (inactive) groups, built once per distinct group and reused."""
    cache = _view_cache(tokenizer)
    extra = (tokenizer.name, provider_family, trunc)
    return [cache.get(extra, msgs, lambda msgs=msgs: _build_view(msgs, provider_family, trunc, tokenizer)) for msgs in groups]


def kept_views(session_id: str) -> list[tuple[tuple[Any, ...], tuple[GroupView, ...]]]:
    """(key, views) of the kept history layouts of ``session_id``'s messages, newest last; the key is what
    :func:`adopt_views` takes (tokenizer name, provider family, truncation config)."""
    with _LAYOUTS_LOCK:
        kept = list(_LAYOUTS)
    return [((layout.key[0], layout.key[2], layout.key[3]), layout.views) for layout in kept
            if layout.history and layout.history[0].session_id == session_id]


def adopt_views(tokenizer: Tokenizer, key: tuple[Any, ...], views: Sequence[GroupView]) -> None:
    """Take ``views`` (laid out earlier, e.g. by another process, with a tokenizer of ``key``'s name, provider family
    and truncation config) as the views of their groups' messages, as if :func:`group_views` had built them: a
    history made of those very message objects is laid out without rendering or counting them again."""
    name, provider_family, trunc = key
    if name != tokenizer.name:
        return
    cache = _view_cache(tokenizer)
    extra = (tokenizer.name, provider_family, trunc)
    for view in views:
        cache.get(extra, view.messages, lambda view=view: view)
        _DIGESTS.get("digest", view.messages, lambda view=view: view.digest)


def message_row(m: Message) -> list[Any]:
    """Everything about a message that can change a plan, in canonical form."""
    row = [m.id, m.group_id, m.role, m.hash, m.status, m.parsing_strategy, sorted(m.flags), m.partial, m.tool_name]
    return row + [m.external_id] if m.external_id else row  # absent when empty: older PlanIds stay


def _digest(msgs: tuple[Message, ...]) -> str:
    rows = json.dumps([message_row(m) for m in msgs], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(rows.encode("utf-8", "surrogatepass")).hexdigest()


def group_digest(msgs: tuple[Message, ...]) -> str:
    """sha256 of the canonical rows of a group's messages (cached)."""
    return _DIGESTS.get("digest", msgs, lambda: _digest(msgs))


# -- a whole history, laid out once ----------------------------------------------------------------------------

LAYOUTS_KEPT = 8  # histories whose layout is kept (a few sessions and branches in one process)


@dataclass(frozen=True, eq=False)
class HistoryLayout:
    """A history split into groups and their views, with what every plan of it needs (built once per history;
    a history that only grew from one laid out before is extended, not laid out again).

    ``memo`` holds what strategies derive from the whole history (the levels classification, the fused
    strategy's arrays), keyed by what it depends on; it lives as long as this layout."""

    history: tuple[Message, ...]
    key: tuple[Any, ...]  # (tokenizer, provider family, truncation config)
    views: tuple[GroupView, ...]
    view_index: dict[int, int]  # group id -> index in ``views``
    system_groups: tuple[int, ...]  # indices of the views holding system messages
    atom_count: int
    history_digest: str  # sha256 of the group digests, one per line (the PlanId's history part)
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)
    # the layout this one extends (its memo, and how many of its leading views this one shares): a strategy
    # extends what it derived from that history instead of deriving it again (a new turn: the new groups only)
    earlier: "tuple[dict[Any, Any], int] | None" = field(default=None, repr=False)
    # sha256 fed with every view's digest but the last, each followed by a newline (extended, not re-fed)
    digest_state: Any = field(default=None, repr=False)


_LAYOUTS: list[HistoryLayout] = []
_LAYOUTS_LOCK = threading.Lock()


def _layout(history: tuple[Message, ...], key: tuple[Any, ...], views: list[GroupView],
            base: HistoryLayout | None = None, shared: int = 0) -> HistoryLayout:
    """The layout of ``views``; with ``base`` (whose first ``shared`` views these start with) only the others are
    looked at."""
    if base is None or base.digest_state is None or shared < len(base.views) - 1:
        base, shared = None, 0
        state = hashlib.sha256()
        view_index: dict[int, int] = {}
        system_groups: list[int] = []
        atom_count = 0
    else:
        state = base.digest_state.copy()
        if shared == len(base.views) and views:  # the base's last view stays: it is fed now
            state.update(base.views[-1].digest.encode() + b"\n")
        view_index = dict(base.view_index)
        system_groups = [i for i in base.system_groups if i < shared]
        atom_count = base.atom_count - sum(len(v.atoms) for v in base.views[shared:])
        for v in base.views[shared:]:
            view_index.pop(v.group_id, None)
    for i in range(shared, len(views)):
        v = views[i]
        view_index[v.group_id] = i
        if v.system_messages:
            system_groups.append(i)
        atom_count += len(v.atoms)
        if i < len(views) - 1:
            state.update(v.digest.encode() + b"\n")
    final = state.copy()
    if views:
        final.update(views[-1].digest.encode())
    return HistoryLayout(
        history=history, key=key, views=tuple(views), view_index=view_index, system_groups=tuple(system_groups),
        atom_count=atom_count, history_digest=final.hexdigest(),
        earlier=(base.memo, shared) if base is not None else None, digest_state=state)


def history_layout(history: Sequence[Message], provider_family: str, trunc: TruncationConfig,
                   tokenizer: Tokenizer) -> HistoryLayout:
    """The layout of ``history`` (kept for the last ``LAYOUTS_KEPT`` histories; found by identity first)."""
    history = tuple(history)
    key = (tokenizer.name, id(tokenizer), provider_family, trunc)
    with _LAYOUTS_LOCK:
        kept = list(_LAYOUTS)
    for layout in kept:
        if layout.history is history and layout.key == key:
            return layout
    base = None
    for layout in kept:
        n = len(layout.history)
        if layout.key == key and 0 < n <= len(history) and history[:n] == layout.history:
            if base is None or n > len(base.history):
                base = layout
    layout = _extend(base, history, provider_family, trunc, tokenizer) if base is not None else None
    if layout is None:
        views = group_views(split_groups(history), provider_family, trunc, tokenizer)
        layout = _layout(history, key, views)
    with _LAYOUTS_LOCK:
        _LAYOUTS[:] = [x for x in _LAYOUTS if x is not base][-(LAYOUTS_KEPT - 1):] + [layout]
    return layout


def _extend(base: HistoryLayout, history: tuple[Message, ...], provider_family: str, trunc: TruncationConfig,
            tokenizer: Tokenizer) -> HistoryLayout | None:
    """``base``'s layout with the messages ``history`` adds after it; None when they continue an earlier group
    than the last one (then the history is laid out from scratch)."""
    tail = history[len(base.history):]
    if not tail:
        return HistoryLayout(history, base.key, base.views, base.view_index, base.system_groups, base.atom_count,
                             base.history_digest, base.memo, base.earlier, base.digest_state)
    new_groups = split_groups(tail)
    views = list(base.views)
    last = views[-1] if views else None
    if last is not None and new_groups[0][0].group_id == last.group_id:
        new_groups[0] = last.messages + new_groups[0]
        views.pop()
    if any(g[0].group_id in base.view_index and (last is None or g[0].group_id != last.group_id) for g in new_groups):
        return None
    shared = len(views)
    views += group_views(new_groups, provider_family, trunc, tokenizer)
    return _layout(history, base.key, views, base, shared)
