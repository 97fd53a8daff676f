"""Slash commands: the controller that runs each row of ``SLASH_COMMANDS``.

Each handler is registered for its command's name (``@handles("context window")``, ``slash_base``; a
test checks the table and the registry agree); the controller inherits the other groups (``slash_timeline``, ``slash_compact``). A handler parses its arguments, then changes a setting on the screen,
runs an engine action through the screen's link (a worker, then a replan), or opens a screen. A bad
argument is a ``ValueError`` / ``LookupError``, shown with the command's usage.
"""
from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from ctxbench.records.vocab import STRATEGIES
from ctxbench.tui import messages as msg
from ctxbench.tui.commands import (
    SLASH_COMMANDS,
    CommandError,
    help_text,
    int_arg,
    parse,
    pin_target,
)
from ctxbench.tui.slash_base import HANDLERS, SlashBase, handles
from ctxbench.tui.slash_compact import CompactCommands
from ctxbench.tui.slash_proxy import ProxyCommands
from ctxbench.tui.slash_timeline import TimelineCommands

if TYPE_CHECKING:  # the engine loads in a worker, never before the first paint
    from ctxbench.service.session import WorkbenchSession

PIN_TEXT_LABEL = 40  # characters of a pinned note shown as its label


class SlashController(TimelineCommands, CompactCommands, ProxyCommands, SlashBase):
    """Runs slash command lines typed in the input or chosen in the palette."""

    def run(self, line: str) -> None:
        try:
            parsed = parse(line)
        except CommandError as exc:
            self.host.notify(str(exc), title="command", severity="error")
            self.last_error = str(exc)
            return
        try:
            HANDLERS[parsed.command.name](self, parsed.args)
        except (ValueError, LookupError) as exc:
            self.host.notify(f"{parsed.command.usage}: {exc}", title="command", severity="error")
            self.last_error = str(exc)

    # -- context ------------------------------------------------------------------------------------------
    @handles("context window")
    def context_window(self, args: tuple[str, ...]) -> None:
        n = int_arg(args, "number of turns")
        if n < 0:
            raise ValueError("the window is 0 (all turns) or more")
        self.host.change_settings(window_groups=n)

    @handles("context show")
    def context_show(self, args: tuple[str, ...]) -> None:
        if self.host.view is None:
            raise LookupError("no plan yet")
        self.host.screens.payload(as_json=bool(args and args[0] == "json"))

    @handles("context rebuild")
    def context_rebuild(self, args: tuple[str, ...]) -> None:
        self._need_session()
        self.host.request_rebuild()

    @handles("context")
    def context_overlay(self, args: tuple[str, ...]) -> None:
        self.host.screens.open_overlay()

    @handles("context drop")
    def context_drop(self, args: tuple[str, ...]) -> None:
        gid = int_arg(args, "turn id (GID)")
        self._need_session()
        plan = self._plan()
        self.host.link.act(lambda s: s.drop(f"group:{gid}", plan), history=True)

    @handles("context restore")
    def context_restore(self, args: tuple[str, ...]) -> None:
        self._on_turn(args, "restored", lambda session, gid: session.restore(gid))

    @handles("replay")
    def replay(self, args: tuple[str, ...]) -> None:
        self._need_session()
        self.host.screens.replay(int_arg(args, "turn number") if args else 1)

    # -- the history --------------------------------------------------------------------------------------
    @handles("undo")
    def undo(self, args: tuple[str, ...]) -> None:
        self._need_session()
        self._not_while_replying()

        def undo(session: WorkbenchSession) -> str:
            gid, state = session.undo()
            if gid is None:
                return "nothing to undo"
            if state is None:
                return f"removed the last turn ({gid})"
            # the stored STATE that turn saw is current again: no model call rewrites it
            if state.strip():
                return f"removed the last turn ({gid}); the ### STATE is back to the version before it"
            return f"removed the last turn ({gid}); it wrote the first ### STATE, so there is none now"

        self.host.link.act(undo, history=True)

    @handles("message list")
    def message_list(self, args: tuple[str, ...]) -> None:
        from ctxbench.tui.listings import message_listing

        limit = int_arg(args, "number of turns") if args else 0
        plan = self._plan()
        where = f"in / part / out of the window of {plan.plan_id}" if plan is not None else "status"
        self._read("Turns of this session", lambda s: message_listing(s.all_messages(), limit, plan),
                   f"GID · {where} · messages · tokens · first words — /message show GID", wrap=False)

    @handles("message show")
    def message_show(self, args: tuple[str, ...]) -> None:
        from ctxbench.service.text import render_messages

        gid = int_arg(args, "turn id (GID)")
        self._need_session()

        def read(session: WorkbenchSession) -> msg.ShowText:
            group = session.group(gid)
            status = "dropped" if any(m.status == "dropped" for m in group) else "active"
            return msg.ShowText(f"Turn {gid} ({status})", render_messages([m.to_openai() for m in group]))

        self.host.link.read(read)

    @handles("message remove")
    def message_remove(self, args: tuple[str, ...]) -> None:
        self._not_while_replying()
        self._on_turn(args, "removed", lambda session, gid: session.remove(gid))

    # -- pins ---------------------------------------------------------------------------------------------
    @handles("pin")
    def pin(self, args: tuple[str, ...]) -> None:
        target = pin_target(args)
        plan = self._plan()
        self.host.link.act(lambda s: f"pinned {target} sticky ({s.pin_item(target, 'sticky', plan=plan).id})")

    @handles("pin lease")
    def pin_lease(self, args: tuple[str, ...]) -> None:
        if not args:
            raise ValueError("expected a target and optionally turn|task")
        scope = args[1] if len(args) > 1 else "turn"
        if scope not in ("turn", "task"):
            raise ValueError("the lease scope is turn or task")
        target = pin_target(args[:1])
        plan = self._plan()
        self.host.link.act(
            lambda s: f"leased {target} for this {scope} ({s.pin_item(target, 'leased', scope=scope, plan=plan).id})")

    @handles("pin text")
    def pin_text(self, args: tuple[str, ...]) -> None:
        if not args:
            raise ValueError("expected the text to pin")
        text = " ".join(args)
        label = text if len(text) <= PIN_TEXT_LABEL else text[:PIN_TEXT_LABEL - 1] + "…"
        self.host.link.act(lambda s: f"pinned a note ({s.pin_text(text, label).id})")

    @handles("pin remove")
    def pin_remove(self, args: tuple[str, ...]) -> None:
        if len(args) != 1:
            raise ValueError("expected a pin id, e.g. p3")
        pin_id = args[0]
        target = pin_target((pin_id,)) if pin_id.isdigit() or ":" in pin_id else None

        def remove(session: WorkbenchSession) -> str:
            if not session.unpin(pin_id) and not (target is not None and session.unpin(target)):
                raise ValueError(f"no pin {pin_id}")
            return f"removed pin {pin_id}"

        self.host.link.act(remove)

    @handles("pin list")
    def pin_list(self, args: tuple[str, ...]) -> None:
        def listing(session: WorkbenchSession) -> str:
            lines = [f"{p.id:<5} {p.kind:<9} {p.target:<40} {p.scope if p.kind == 'leased' else '':<5} "
                     f"{'ttl ' + str(p.ttl) if p.kind == 'leased' else ''}  {p.label}" for p in session.pins()]
            return "\n".join(lines) or "no pins yet — pin from the overlay (ctrl+o) or with /pin TARGET"

        self._read("Pins", listing)

    # -- settings -----------------------------------------------------------------------------------------
    @handles("mode")
    def mode(self, args: tuple[str, ...]) -> None:
        known = self.host.config.planner.mode_names
        if len(args) != 1:
            raise ValueError(f"expected {', '.join(known)}")
        mode = args[0].lower()
        if mode not in known:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(known)}")
        self.host.change_settings(mode=mode)

    @handles("budget")
    def budget(self, args: tuple[str, ...]) -> None:
        n = int_arg(args, "number of tokens")
        if n <= 0:
            raise ValueError("the budget is a positive number of tokens")
        self.host.change_settings(budget=n)

    @handles("strategy")
    def strategy(self, args: tuple[str, ...]) -> None:
        if len(args) != 1 or args[0] not in STRATEGIES:
            raise ValueError(f"expected one of {', '.join(STRATEGIES)}")
        self.host.change_settings(strategy=args[0])

    # -- the app ------------------------------------------------------------------------------------------
    @handles("bench")
    def bench(self, args: tuple[str, ...]) -> None:
        from pathlib import Path

        from ctxbench.tui.screens.bench import BenchScreen

        folder = Path(args[0] if args else self.host.config.bench.results_dir)
        app = self.host.app

        def work() -> None:  # read the result files off the UI thread, then show them
            from ctxbench.service.bench_results import load_results

            app.call_from_thread(app.push_screen, BenchScreen(load_results(folder)))

        app.run_worker(work, thread=True, group="bench", name="bench", exit_on_error=False)

    @handles("theme")
    def theme(self, args: tuple[str, ...]) -> None:
        app = self.host.app
        names = sorted(app.available_themes)
        if not args:
            self.host.notify(f"current: {app.theme}\nthemes: " + ", ".join(names), title="/theme NAME")
            return
        if args[0] not in names:
            close = difflib.get_close_matches(args[0], names, n=3)
            raise ValueError(f"unknown theme {args[0]!r}" + (f"; did you mean {', '.join(close)}?" if close else ""))
        app.theme = args[0]

    @handles("help")
    def help(self, args: tuple[str, ...]) -> None:
        self.host.screens.viewer("Slash commands", help_text(), "text", "the same actions are in the palette (ctrl+p)")

    @handles("quit")
    def quit(self, args: tuple[str, ...]) -> None:
        self.host.app.exit()


def unhandled_commands() -> list[str]:
    """Rows of the table without a handler, and handlers without a row (both should be empty)."""
    names = {c.name for c in SLASH_COMMANDS}
    return sorted(names ^ set(HANDLERS))
