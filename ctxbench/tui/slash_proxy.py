"""Slash commands for a proxied conversation followed with ``open --watch``: the steer preview (the next
request as steering will send it, as a diff against what the client sent, with what it costs the prompt cache)
and the waste findings."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ctxbench.tui import messages as msg
from ctxbench.tui.slash_base import SlashBase, handles

if TYPE_CHECKING:  # the engine loads in a worker, never before the first paint
    from ctxbench.service.session import WorkbenchSession


class ProxyCommands(SlashBase):
    def _need_watch(self) -> None:
        if not self.host.link.options.watch:
            raise LookupError("this applies to a proxied conversation: ctxbench open --watch")
        self._need_session()

    @handles("steer preview")
    def steer_preview(self, args: tuple[str, ...]) -> None:
        self._need_watch()

        def read(session: "WorkbenchSession") -> msg.ShowText:
            return msg.ShowText("Steer preview", session.preview_text(),  # type: ignore[attr-defined]
                                "diff", "the next request: what steering changes, what it costs the cache", False)

        self.host.link.read(read)

    @handles("steer findings")
    def steer_findings(self, args: tuple[str, ...]) -> None:
        self._need_watch()

        def read(session: "WorkbenchSession") -> str:
            return session.findings_text()  # type: ignore[attr-defined]

        self._read("Findings", read, "waste in the latest request, each with what a steer would save and cost")

    @handles("steer defer")
    def steer_defer(self, args: tuple[str, ...]) -> None:
        if len(args) != 1:
            raise ValueError("expected an item id (atom:…, file:…, tool:…)")
        self._need_watch()
        self.host.link.act(lambda session: session.defer(args[0]), history=True)  # type: ignore[attr-defined]

    @handles("steer policy")
    def steer_policy(self, args: tuple[str, ...]) -> None:
        self._need_watch()

        def read(session: "WorkbenchSession") -> str:
            return session.policy_text()  # type: ignore[attr-defined]

        self._read("Steering policy", read, "rules for every proxied conversation · /steer everywhere …")

    @handles("steer everywhere")
    def steer_everywhere(self, args: tuple[str, ...]) -> None:
        if len(args) != 2:
            raise ValueError("expected drop TARGET | pin ITEM | results N | mode MODE | budget N | remove N")
        self._need_watch()
        plan = self._plan()
        self.host.link.act(lambda session: session.everywhere(args[0], args[1], plan))  # type: ignore[attr-defined]
