"""What every group of slash commands shares: the handler registry, the host, and argument helpers.

A handler is a method registered for its command's name with ``@handles("context window")``; the
controller (:class:`ctxbench.tui.slash.SlashController`) inherits every group (``slash`` for the session,
``slash_timeline`` for branches, diffs, what-if and export) and dispatches through :data:`HANDLERS`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ctxbench.tui import messages as msg
from ctxbench.tui.commands import int_arg
from ctxbench.tui.host import SlashHost

if TYPE_CHECKING:  # the engine loads in a worker, never before the first paint
    from ctxbench.service.session import WorkbenchSession

Handler = Callable[["SlashBase", tuple[str, ...]], None]
HANDLERS: dict[str, Handler] = {}


def handles(name: str) -> Callable[[Handler], Handler]:
    """Register a method as the handler of the slash command ``name``."""

    def register(method: Handler) -> Handler:
        HANDLERS[name] = method
        return method

    return register


class SlashBase:
    """The host screen and the helpers every command group uses."""

    def __init__(self, host: SlashHost) -> None:
        self.host = host
        self.last_error = ""

    def _need_session(self) -> None:
        if not self.host.link.open:
            raise LookupError("the session is still opening")

    def _not_while_replying(self) -> None:
        if self.host.turn_running:
            raise ValueError("a reply is still arriving (esc cancels it); this would change the turn it belongs to")

    def _plan(self):
        return self.host.view.plan if self.host.view is not None else None

    def _on_turn(self, args: tuple[str, ...], done: str, change: Callable[["WorkbenchSession", int], None]) -> None:
        """Change turn GID (the one argument) in a worker, then show the new history and replan."""
        gid = int_arg(args, "turn id (GID)")
        self._need_session()

        def run(session: "WorkbenchSession") -> str:
            change(session, gid)
            return f"{done} turn {gid}"

        self.host.link.act(run, history=True)

    def _read(self, title: str, read: Callable[[WorkbenchSession], str], subtitle: str = "",
              wrap: bool = True) -> None:
        self._need_session()
        self.host.link.read(lambda session: msg.ShowText(title, read(session), "text", subtitle, wrap))
