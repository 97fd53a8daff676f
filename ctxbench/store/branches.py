"""Branches of a session as a repository: list them, the active one, fork at a message, switch.

A branch sees its parent's messages up to its fork point and then its own (``sessions.lineage``); the
SQL of branches lives in :mod:`ctxbench.store.sessions`, what a fork can see in :mod:`ctxbench.store.messages`.
"""
from __future__ import annotations

from ctxbench.records.errors import NotFound
from ctxbench.records.sessions import BranchInfo
from ctxbench.store.db import Connections
from ctxbench.store.messages import branch_messages
from ctxbench.store.sessions import (
    active_branch,
    create_branch,
    find_branch,
    get_branch,
    list_branches,
    set_active_branch,
)


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

    def fork(self, session_id: str, name: str, *, at_message_id: int | None = None, switch: bool = True) -> str:
        """A new branch off the active one, seeing its messages up to ``at_message_id`` (default: all)."""
        with self._db.transaction() as conn:
            parent = active_branch(conn, session_id)
            visible = branch_messages(conn, session_id, parent, include_dropped=True)
            if at_message_id is None:
                at_message_id = visible[-1].id if visible else 0
            elif at_message_id not in {m.id for m in visible}:
                raise NotFound(f"message {at_message_id} is not on the active branch of {session_id}")
            branch_id = create_branch(conn, session_id, name, parent, at_message_id)
            if switch:
                set_active_branch(conn, session_id, branch_id)
            return branch_id

    def switch(self, session_id: str, name_or_id: str) -> str:
        with self._db.transaction() as conn:
            branch = find_branch(conn, session_id, name_or_id)
            set_active_branch(conn, session_id, branch.id)
            return branch.id
