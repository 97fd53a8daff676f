"""Slash commands for compaction and tasks: ``/compact`` (preview, undo, auto threshold, a task's summary)
and ``/task`` (start, end, list)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ctxbench.tui.commands import int_arg
from ctxbench.tui.listings import task_listing
from ctxbench.tui.slash_base import SlashBase, handles

if TYPE_CHECKING:  # the engine loads in a worker, never before the first paint
    from ctxbench.service.session import WorkbenchSession


class CompactCommands(SlashBase):
    @handles("compact")
    def compact(self, args: tuple[str, ...]) -> None:
        """``/compact`` or ``/compact TOKENS``: the preview screen (nothing changes until it is applied)."""
        target = int_arg(args, "target tokens") if args else None
        if target is not None and target < 0:
            raise ValueError("the target is 0 tokens or more")
        self._need_session()
        self._not_while_replying()
        self.host.screens.compact(target=target)

    @handles("compact task")
    def compact_task(self, args: tuple[str, ...]) -> None:
        if not args:
            raise ValueError("expected a finished task (t3 or its name; /task lists them)")
        self._need_session()
        self._not_while_replying()
        self.host.screens.compact(task=" ".join(args))

    @handles("compact undo")
    def compact_undo(self, args: tuple[str, ...]) -> None:
        if len(args) > 1:
            raise ValueError("expected at most a summary (e.g. s3)")
        number = None
        if args:
            word = args[0].lower().lstrip("s")
            if not word.isdigit():
                raise ValueError(f"a summary is named like s3, got {args[0]!r}")
            number = int(word)
        self._need_session()
        self._not_while_replying()

        def run(session: "WorkbenchSession") -> str:
            undone = session.compaction.undo(session.session_id, number)
            return f"undid summary s{undone.id}: {undone.span} are sent again"

        self.host.link.act(run)

    @handles("instruction")
    def instruction(self, args: tuple[str, ...]) -> None:
        """``/instruction TURN`` marks the turn's user message a standing instruction, ``/instruction TURN off``
        unmarks it (whatever the detector found); the flag shows in the timeline."""
        if not args or len(args) > 2 or (len(args) == 2 and args[1].lower() not in ("on", "off")):
            raise ValueError("expected a turn and optionally on or off, e.g. /instruction 4 off")
        turn = int_arg(args[:1], "turn")
        on = len(args) == 1 or args[1].lower() == "on"
        self._need_session()
        self._not_while_replying()

        def run(session: "WorkbenchSession") -> str:
            return session.compaction.mark_instruction(session.session_id, turn, on)

        self.host.link.act(run, history=True)

    @handles("compact auto")
    def compact_auto(self, args: tuple[str, ...]) -> None:
        """``/compact auto 80%`` | ``off`` | ``default``: the session's auto-compact warning threshold."""
        from ctxbench.service.compaction import parse_share

        if len(args) != 1:
            raise ValueError("expected a share of the budget (80%), off, or default")
        share = parse_share(args[0])
        self._need_session()

        def run(session: "WorkbenchSession") -> str:
            now = session.compaction.set_threshold(session.session_id, share)
            if not now:
                return "auto-compact warning off for this session"
            return f"auto-compact: warn when the history needs {now:.0%} of the budget"

        self.host.link.act(run)

    @handles("task start")
    def task_start(self, args: tuple[str, ...]) -> None:
        if not args:
            raise ValueError("expected the task's name")
        name = " ".join(args)
        self._need_session()

        def run(session: "WorkbenchSession") -> str:
            change = session.compaction.start_task(session.session_id, name)
            ended = f"; task {change.ended.name!r} ended" if change.ended is not None else ""
            leases = f" with {change.leases_ended} task lease(s)" if change.leases_ended else ""
            return f"task {change.opened.name!r} starts with the next turn{ended}{leases}"

        self.host.show_status(task=name)  # at once: the store and the replan follow
        self.host.notify(f"starting task {name!r}…", timeout=2)
        self.host.link.act(run, history=True)

    @handles("task end")
    def task_end(self, args: tuple[str, ...]) -> None:
        if args:
            raise ValueError("/task end takes no arguments")
        self._need_session()

        def run(session: "WorkbenchSession") -> str:
            change = session.compaction.end_task(session.session_id)
            task = change.ended
            leases = f"; {change.leases_ended} task lease(s) ended with it" if change.leases_ended else ""
            return f"task {task.name!r} ended (t{task.id}: /compact task t{task.id} summarises it){leases}"

        self.host.link.act(run, history=True)

    @handles("task")
    def task_list(self, args: tuple[str, ...]) -> None:
        if args:
            raise ValueError("did you mean /task start NAME?")
        self._read("Tasks of this branch", lambda session: task_listing(session.wb.tasks.list(session.session_id)),
                   "* open · /task start NAME · /task end · /compact task TASK", wrap=False)
