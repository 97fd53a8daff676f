"""The screens the main screen pushes over itself, and what each hands back.

The overlay gets its actions as callbacks (it stays open and is refreshed with every new plan); the
replay, diff and payload views only show; the what-if screen dismisses with the settings the user kept
(or None), which the main screen then applies. No screen looks for another in the screen stack.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ctxbench.records.diffs import PlanDiff
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.views import PlanView
from ctxbench.tui import present
from ctxbench.tui.host import MainHost

if TYPE_CHECKING:  # each screen is imported when it is first opened, not before the first paint
    from ctxbench.service.session import WorkbenchSession
    from ctxbench.tui.screens.overlay import ContextOverlay
    from ctxbench.tui.screens.overlay_rows import OverlayRow


OVERLAY_SCREEN = "context-overlay"  # the name the overlay is installed under


class ScreensOnTop:
    def __init__(self, host: MainHost) -> None:
        self.host = host
        self.overlay: ContextOverlay | None = None  # the overlay while it is open
        self._kept_overlay: ContextOverlay | None = None  # made on first opening, installed for the next ones
        self.diffs: dict[int, PlanDiff] = {}  # each turn's diff with the previous one, as last shown

    @property
    def _session(self) -> "WorkbenchSession | None":
        return self.host.link.session

    def viewer(self, title: str, body: str, language: str = "text", subtitle: str = "", wrap: bool = True,
               *, copy_text: str = "", save_as: str = "") -> None:
        from ctxbench.tui.screens.viewer import ViewerScreen

        self.host.app.push_screen(ViewerScreen(title, body, language=language, subtitle=subtitle, wrap=wrap,
                                               copy_text=copy_text, save_as=save_as))

    def payload(self, as_json: bool = False) -> None:
        """The exact messages of the current plan; ``c`` copies them, ``s`` saves them as JSON."""
        if self.host.view is not None:
            plan = self.host.view.plan
            title, body, language, subtitle = present.payload_view(plan, as_json)
            exported = present.payload_view(plan, True)[1]
            self.viewer(title, body, language, subtitle, copy_text=exported, save_as=f"{plan.plan_id}.messages.json")

    # -- the overlay --------------------------------------------------------------------------------------
    def open_overlay(self) -> None:
        """Show the overlay on the current plan. It is made once and kept installed between openings: composing it
        and styling its widgets again was most of the time to open it (~300 ms on a 2-core laptop)."""
        if self.overlay is not None:
            return
        if self._kept_overlay is None:
            self._make_overlay()
        else:
            self._kept_overlay.reopen(self.host.view)
        self.overlay = self._kept_overlay
        self.host.app.push_screen(self.overlay, callback=self._overlay_closed)

    def _make_overlay(self) -> None:
        from ctxbench.tui.screens.overlay import ContextOverlay

        self._kept_overlay = ContextOverlay(self.host.view, self._overlay_action, self._preview)
        self.host.app.install_screen(self._kept_overlay, OVERLAY_SCREEN)

    def prepare_overlay(self) -> None:
        """Make the overlay before its first opening (composed, mounted and styled, not shown): the first ctrl+o
        composed it, 100-175 ms during the warm-up against 35-85 for a later opening. Called once the first plan is
        on the screen."""
        if self._kept_overlay is None:
            self._make_overlay()
            self.host.app._get_screen(OVERLAY_SCREEN)  # registers and mounts it, as the first push would

    def _overlay_closed(self, _result: None) -> None:
        self.overlay = None

    def show_view(self, view: PlanView, *, settled: bool = True) -> None:
        """A new plan: the overlay (when open) shows it (keeping the actions it shows as pending unless ``settled``:
        the plan includes every action asked for); its diff is kept for the turn's diff line."""
        if view.group_id is not None and view.diff is not None:
            self.diffs[view.group_id] = view.diff
        if self.overlay is not None:
            self.overlay.show_view(view, settled=settled)
        elif self._kept_overlay is None:
            self.host.call_after_refresh(self.prepare_overlay)  # the plan on the screen first

    def _preview(self, row: OverlayRow) -> None:
        """Enter in the overlay: the candidate in full (read in a worker, shown in a viewer)."""
        if self.host.view is not None:
            from ctxbench.tui.screens.overlay_actions import preview_reader

            self.host.link.read(preview_reader(row, self.host.view.plan))

    def _overlay_action(self, action: str, row: OverlayRow, **kwargs: Any) -> None:
        """An overlay key: change pins or drops in a worker, then replan (the overlay shows the new plan)."""
        from ctxbench.tui.screens.overlay_actions import overlay_action

        from ctxbench.records.item_refs import ItemRef

        plan = self.host.view.plan if self.host.view is not None else None
        # only dropping a turn changes the history the chat shows (a card or a pin dropped: the chat is not redrawn)
        turn = action == "drop" and ItemRef.parse(row.target).group_id is not None
        self.host.link.act(overlay_action(action, row, plan, **kwargs), history=turn)

    # -- replay, diffs, what-if ---------------------------------------------------------------------------
    def replay(self, start: int) -> None:
        if self._session is not None and self.host.settings is not None:
            from ctxbench.tui.screens.replay import ReplayScreen

            self.host.app.push_screen(ReplayScreen(self._session, self.host.settings, start=start))

    def diff(self, diff: PlanDiff) -> None:
        from ctxbench.service.text import diff_lines

        self.viewer("What changed since the previous turn's plan", "\n".join(diff_lines(diff)), "text",
                    f"{diff.summary} · esc closes", wrap=False)

    def turn_diff(self, group_id: int) -> None:
        """The diff line of turn ``group_id`` was clicked."""
        found = self.diffs.get(group_id)
        if found is not None:
            self.diff(found)

    def whatif(self) -> None:
        """Try budgets, modes and strategies on the next call; the settings the user keeps are applied."""
        session, settings = self._session, self.host.settings
        if session is None or settings is None:
            return
        from ctxbench.tui.screens.whatif import WhatIfScreen

        view = self.host.view
        screen = WhatIfScreen(session, settings, self.host.draft, view.group_id if view else None,
                              self.host.config.llm.context_limit, view.plan if view else None)
        self.host.app.push_screen(screen, callback=self._keep)

    # -- compaction ---------------------------------------------------------------------------------------
    def compact(self, *, target: int | None = None, task: str | None = None) -> None:
        """The compaction preview; the preview the user applies is stored, then the workbench replans."""
        session = self._session
        if session is None or session.compaction is None:
            return
        compactor, sid = session.compaction, session.session_id

        def build(choices: dict[int, str]):  # without TOKENS: the one default target ([compaction] target_ratio)
            return compactor.preview(sid, target_tokens=target, choices=choices, task=task)

        from ctxbench.tui.screens.compact import CompactScreen

        what = f"task {task}" if task else ""
        self.host.app.push_screen(CompactScreen(build, what), callback=self._apply_compaction)

    def _apply_compaction(self, preview: Any) -> None:
        if preview is None:
            return

        def run(session: "WorkbenchSession") -> str:
            summary = session.compaction.apply(preview)
            return (f"summary s{summary.id} now stands in for {len(summary.group_ids)} turns "
                    f"({present.tok(summary.tokens_before)} → {present.tok(summary.tokens_after)} tok); "
                    f"/compact undo brings them back")

        self.host.link.act(run)

    def _keep(self, kept: SessionSettings | None) -> None:
        if kept is not None and kept != self.host.settings:
            current = self.host.settings
            changes = {f.name: getattr(kept, f.name) for f in dataclasses.fields(kept)
                       if current is None or getattr(kept, f.name) != getattr(current, f.name)}
            self.host.change_settings(**changes)
