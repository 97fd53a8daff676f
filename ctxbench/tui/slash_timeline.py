"""Slash commands for the session's timelines: branches, the plan diff, what-if, and export."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctxbench.tui.commands import int_arg
from ctxbench.tui.slash_base import SlashBase, handles

if TYPE_CHECKING:  # the engine loads in a worker, never before the first paint
    from ctxbench.service.session import WorkbenchSession


class TimelineCommands(SlashBase):
    @handles("branch")
    def branch(self, args: tuple[str, ...]) -> None:
        def listing(session: "WorkbenchSession") -> str:
            rows = [f"{'':2}{'branch':<20} {'from':<16} {'fork at':>8} {'head':>6} {'turns':>6} {'own':>5}"]
            for b in session.timeline.branches():
                fork = "" if b.fork_turn is None else str(b.fork_turn)
                head = "" if b.head_turn is None else str(b.head_turn)
                rows.append(f"{'*' if b.active else ' ':2}{b.name:<20} {b.parent:<16} {fork:>8} {head:>6} "
                            f"{b.turns:>6} {b.own_turns:>5}")
            return "\n".join(rows)

        self._read("Branches", listing, "* active · /fork [NAME] [at GID] · /switch NAME", wrap=False)

    @handles("fork")
    def fork(self, args: tuple[str, ...]) -> None:
        """``/fork``, ``/fork NAME``, ``/fork at GID``, ``/fork NAME at GID``."""
        words = list(args)
        at_turn = None
        if len(words) >= 2 and words[-2].lower() == "at":
            at_turn = int_arg((words[-1],), "turn id (GID) after 'at'")
            words = words[:-2]
        if len(words) > 1:
            raise ValueError("expected [NAME] [at GID]")
        name = words[0] if words else None
        self._need_session()
        self._not_while_replying()
        self.host.link.act(lambda session: session.fork(name, at_turn), history=True)

    @handles("switch")
    def switch(self, args: tuple[str, ...]) -> None:
        if len(args) != 1:
            raise ValueError("expected the name of a branch (/branch lists them)")
        self._need_session()
        self._not_while_replying()
        self.host.link.act(lambda session: session.switch(args[0]), history=True)

    @handles("diff")
    def diff(self, args: tuple[str, ...]) -> None:
        view = self.host.view
        if view is None:
            raise LookupError("no plan yet")
        if view.diff is None:
            raise LookupError("no earlier turn has a stored plan to compare with")
        self.host.screens.diff(view.diff)

    @handles("whatif")
    def whatif(self, args: tuple[str, ...]) -> None:
        self._need_session()
        self.host.screens.whatif()

    @handles("export")
    def export(self, args: tuple[str, ...]) -> None:
        if len(args) > 1:
            raise ValueError("expected at most a file name")
        self._need_session()
        target = Path(args[0]) if args else None

        def run(session: "WorkbenchSession") -> str:
            path, count = session.export(target)
            return f"exported {count} messages of this branch to {path}"

        self.host.link.act(run)
