"""Branches of a session as a repository: list them, the active one, fork at a turn, switch.

A branch sees its parent's messages up to its fork point and then its own (``sessions.lineage``); the
SQL of branches lives in :mod:`ctxbench.store.sessions`, what a fork can see in :mod:`ctxbench.store.messages`.

Branch-scoped state: pins (and leases), activation, the ``### STATE``, the scratchpad, the settings, the
summaries and the tasks belong to a branch. A fork inherits them — the pins, leases, activation, scratchpad
and settings as they are when it is made, the STATE as it was at the fork point, the summaries of turns it
sees and the task open at the fork — and from then on each branch changes its own.
Memos are global; a session's turn numbers (group ids) are shared by its branches.
"""
from __future__ import annotations

import re

from ctxbench.records.errors import NotFound
from ctxbench.records.sessions import BranchInfo, BranchSummary
from ctxbench.store import activation, compaction, memory, pins
from ctxbench.store.db import Connections
from ctxbench.store.messages import branch_messages
from ctxbench.store.sessions import (
    active_branch,
    create_branch,
    find_branch,
    get_branch,
    lineage,
    list_branches,
    set_active_branch,
)

MAX_NAME = 40  # characters of a branch name
_NAME = re.compile(r"^[\w.-]+$")


class Branches:
    """Branches of a session: the active one, forks and switches."""

    def __init__(self, database: Connections) -> None:
        self._db = database

    def list(self, session_id: str) -> list[BranchInfo]:
        with self._db.connection() as conn:
            return list_branches(conn, session_id)

    def active_id(self, session_id: str) -> str:
        with self._db.connection() as conn:
            return active_branch(conn, session_id)

    def active(self, session_id: str) -> BranchInfo:
        with self._db.connection() as conn:
            return get_branch(conn, active_branch(conn, session_id))

    def summaries(self, session_id: str) -> list[BranchSummary]:
        """Every branch with its fork point, head turn and turn counts, oldest first."""
        with self._db.connection() as conn:
            current = active_branch(conn, session_id)
            infos = list_branches(conn, session_id)
            names = {b.id: b.name for b in infos}
            out = []
            for b in infos:
                seen = branch_messages(conn, session_id, b.id, include_dropped=True)
                groups = list(dict.fromkeys(m.group_id for m in seen))
                own = list(dict.fromkeys(m.group_id for m in seen if m.branch_id == b.id))
                fork = next((m.group_id for m in seen if m.id == b.fork_message_id), None) if b.parent_id else None
                out.append(BranchSummary(b.id, b.name, names.get(b.parent_id or "", ""), fork,
                                         groups[-1] if groups else None, len(groups), len(own), b.id == current,
                                         b.created_at))
            return out

    def fork(self, session_id: str, name: str, *, at_message_id: int | None = None, at_turn: int | None = None,
             switch: bool = True) -> str:
        """A new branch off the active one, seeing its messages up to ``at_message_id`` — or up to the end of turn
        ``at_turn`` (a group id) — and by default all of them; it inherits the branch-scoped state."""
        check_name(name)
        with self._db.transaction() as conn:
            parent = active_branch(conn, session_id)
            visible = branch_messages(conn, session_id, parent, include_dropped=True)
            if at_turn is not None:
                in_turn = [m for m in visible if m.group_id == at_turn]
                if not in_turn:
                    raise NotFound(f"turn {at_turn} is not on the active branch of {session_id}")
                at_message_id = in_turn[-1].id
            if at_message_id is None:
                at_message_id = visible[-1].id if visible else 0
            elif at_message_id and at_message_id not in {m.id for m in visible}:
                raise NotFound(f"message {at_message_id} is not on the active branch of {session_id}")
            branch_id = create_branch(conn, session_id, name, parent, at_message_id)
            later = next((m for m in visible if m.id > at_message_id), None)  # the parent's next message
            _inherit(conn, session_id, parent, branch_id, later)
            fork_group = next((m.group_id for m in visible if m.id == at_message_id), None)
            compaction.copy_to_fork(conn, session_id, parent, branch_id, fork_group)
            if switch:
                set_active_branch(conn, session_id, branch_id)
            return branch_id

    def find(self, session_id: str, name_or_id: str) -> BranchInfo:
        """A branch of the session by name or id (UnknownBranch when there is none)."""
        with self._db.connection() as conn:
            return find_branch(conn, session_id, name_or_id)

    def lineage_ids(self, session_id: str) -> list[str]:
        """The active branch and its ancestors, nearest first."""
        with self._db.connection() as conn:
            return [bid for bid, _limit in lineage(conn, active_branch(conn, session_id))]

    def next_name(self, session_id: str) -> str:
        """A free name for an unnamed fork: ``fork-1``, ``fork-2``, …"""
        with self._db.connection() as conn:
            taken = {b.name for b in list_branches(conn, session_id)}
        n = 1
        while f"fork-{n}" in taken:
            n += 1
        return f"fork-{n}"

    def switch(self, session_id: str, name_or_id: str) -> str:
        with self._db.transaction() as conn:
            branch = find_branch(conn, session_id, name_or_id)
            set_active_branch(conn, session_id, branch.id)
            return branch.id


def check_name(name: str) -> None:
    if not name or len(name) > MAX_NAME or not _NAME.match(name):
        raise ValueError(f"a branch name is 1 to {MAX_NAME} letters, digits, '_', '.' or '-', got {name!r}")


def _inherit(conn, session_id: str, parent: str, child: str, next_message) -> None:
    """Copy the parent's branch-scoped state to the new branch; the STATE is the version written before the
    parent's first message after the fork point (the one the forked turn left), or the current one."""
    pins.copy_pins(conn, session_id, parent, child)
    activation.set_scores(conn, session_id, child, activation.scores(conn, parent), replace=True)
    pad = memory.scratchpad(conn, parent)
    if pad:
        memory.set_scratchpad(conn, session_id, child, pad)
    if next_message is None:
        state = memory.state_block(conn, parent)
    else:
        version = memory.state_before(conn, parent, next_message.created_at)
        state = version.content if version is not None else ""
    if state:
        memory.set_state_block(conn, session_id, child, state)
