"""The chat pane: the session's turns, newest at the bottom; a running turn streams into its own block."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Iterable

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Button

from ctxbench.config import TruncationConfig
from ctxbench.tui.tiers import Tier, truncation_tiers
from ctxbench.tui.present import CANCELLED_EARLY

if TYPE_CHECKING:  # the bubbles (Markdown, syntax highlighting) load with the first message, after the first frame
    from ctxbench.tui.widgets.bubbles import AssistantBubble, TurnBlock


def _bubbles():
    from ctxbench.tui.widgets import bubbles

    return bubbles


class ChatPane(VerticalScroll):
    """Shows the newest ``max_groups`` turns; scrolling to the top, or the button there, loads as many earlier ones
    (each turn shown costs the opening its layout: a long history opens on its newest turns)."""

    DEFAULT_CSS = "ChatPane { height: 1fr; }"

    def __init__(self, max_groups: int = 40, truncation: TruncationConfig | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_groups = max_groups
        self.truncation = truncation or TruncationConfig()
        self._messages: tuple = ()
        self._shown_from = 0  # index into the ordered group ids
        self._blocks: dict[int, TurnBlock] = {}
        self._pending: dict[int, TurnBlock] = {}  # local id -> block of a turn not yet stored
        self._replies: dict[int, AssistantBubble] = {}
        self._attachments: dict[int, str] = {}
        self._usage: dict[int, list] = {}  # local id -> usage checks of the running turn's calls
        self._rendering = asyncio.Lock()
        self._sent: dict[int, str] | None = None  # a proxied conversation's tool results as sent
        self._loading_earlier = False  # earlier turns are loading because the chat was scrolled to its top

    def follow_proxy(self) -> None:
        """The pane shows a proxied conversation: tool results are noted as they were sent (from now on; the
        notes come with each request, :meth:`show_history`), never with the planner's tiers."""
        if self._sent is None:
            self._sent = {}

    def on_mount(self) -> None:
        # stay at the newest turn while blocks grow (Markdown lays out after mounting, replies stream);
        # scrolling up releases the anchor, scrolling back to the bottom restores it
        self.anchor()

    # -- history -----------------------------------------------------------------------------------
    def _groups(self) -> list[int]:
        """Group ids of the history, oldest first, without those of a turn still running (its live
        block stays as it is)."""
        live = {b.group_id for b in self._pending.values() if b.group_id is not None}
        seen: dict[int, None] = {}
        for m in self._messages:
            if m.group_id not in live:
                seen.setdefault(m.group_id, None)
        return list(seen)

    def _tiers(self) -> dict[int, Tier]:
        if self._sent is not None:
            return {}  # a proxied conversation: what was sent, not what the planner would send
        groups = self._groups()
        active = groups[-1] if groups else -1
        results = [(m.id, m.group_id) for m in self._messages if m.role == "tool"]
        return truncation_tiers(results, active, self.truncation)

    async def show_history(self, messages: Iterable, dropped: Iterable[int] = (),
                           sent: dict[int, str] | None = None) -> None:
        """Replace the pane's content with ``messages`` (chronological). ``sent``: a proxied conversation's
        tool results as the upstream received them (their notes replace the planner's tiers)."""
        async with self._rendering:  # one rendering at a time (the opened history renders beside other messages)
            await self._show_history(messages, dropped, sent)

    async def _show_history(self, messages: Iterable, dropped: Iterable[int],
                            sent: dict[int, str] | None) -> None:
        if sent is not None:
            self._sent = sent
        self._messages = tuple(messages)
        self._dropped = set(dropped)
        groups = self._groups()
        self._shown_from = max(0, len(groups) - self.max_groups)
        await self._render_groups(groups[self._shown_from:], replace=True)
        self.scroll_end(animate=False)

    async def _render_groups(self, group_ids: list[int], *, replace: bool) -> None:
        tiers = self._tiers()
        by_group: dict[int, list] = {}
        for m in self._messages:
            by_group.setdefault(m.group_id, []).append(m)
        blocks = []
        shown: dict[int, str] = {}  # the attachment line each turn's block is made with ("": none)
        for gid in group_ids:
            widgets = []
            for m in by_group.get(gid, []):
                widgets.extend(_bubbles().message_widgets(m, tiers.get(m.id), None if self._sent is None else
                                               self._sent.get(m.id) or f"{len(m.content):,} chars"))
                if m.role == "user":
                    shown[gid] = self._attachments.get(gid, "")
                if m.role == "user" and gid in self._attachments:
                    widgets.append(_bubbles().AttachmentLine(self._attachments[gid], classes="attachment"))
            # a block made with its widgets mounts with them, in the one mount of every block below (mounting each
            # block's widgets after it laid the whole pane out again per turn: most of a long history's rendering)
            block = _bubbles().TurnBlock(gid, *widgets, classes="turn")
            block.set_class(gid in self._dropped, "-dropped")
            blocks.append(block)
        if replace:  # a running turn's (or rebuild's) live block stays, below the history
            live = list(self._pending.values())
            self._blocks = {b.group_id: b for b in live if b.group_id is not None}
            await self.remove_children([c for c in self.children if c not in live])
            first_live = live[0] if live else None
            if self._shown_from > 0:
                await self.mount(Button(f"▲ show {min(self.max_groups, self._shown_from)} earlier turns "
                                        f"({self._shown_from} hidden)", id="earlier", classes="earlier"),
                                 before=first_live)
            if blocks:
                await self.mount_all(blocks, before=first_live)
        else:
            anchor = self.query("#earlier")
            if self._shown_from > 0 and anchor:
                anchor.first().label = (f"▲ show {min(self.max_groups, self._shown_from)} earlier turns "
                                        f"({self._shown_from} hidden)")
                await self.mount_all(blocks, after=anchor.first())
            else:
                if anchor:
                    await anchor.first().remove()
                first = next(iter(self.query(_bubbles().TurnBlock)), None)
                await self.mount_all(blocks, before=first) if first else await self.mount_all(blocks)
        for block in blocks:
            self._blocks[block.group_id] = block
            gid = block.group_id
            if gid in shown and self._attachments.get(gid, "") != shown[gid]:  # a plan shown while the turns mounted
                await self.set_attachment(gid, self._attachments[gid])

    async def show_earlier(self) -> None:
        async with self._rendering:
            await self._show_earlier()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value <= 0 < old_value and self._shown_from > 0 and not self._loading_earlier:
            # scrolled up to the oldest turn shown: the earlier ones load above it
            self._loading_earlier = True
            self.run_worker(self._earlier_at_top(), group="chat-earlier", exit_on_error=False)

    async def _earlier_at_top(self) -> None:
        try:
            reading = next(iter(self.query(_bubbles().TurnBlock)), None)
            await self.show_earlier()
            if reading is not None:  # the turn the user scrolled up to stays where it was, the new ones above it
                self.call_after_refresh(self.scroll_to_widget, reading, animate=False, top=True)
        finally:
            self._loading_earlier = False

    async def _show_earlier(self) -> None:
        groups = self._groups()
        start = max(0, self._shown_from - self.max_groups)
        chunk = groups[start:self._shown_from]
        self._shown_from = start
        await self._render_groups(chunk, replace=False)

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "earlier":
            event.stop()
            await self.show_earlier()

    def block(self, group_id: int) -> TurnBlock | None:
        return self._blocks.get(group_id)

    # -- attachment lines --------------------------------------------------------------------------
    async def set_attachment(self, group_id: int, text: str) -> None:
        self._attachments[group_id] = text
        block = self._blocks.get(group_id)
        if block is None:
            return
        line = block.attachment()
        if line is not None:
            line.update(text)
            return
        user = block.query(_bubbles().UserBubble)
        line = _bubbles().AttachmentLine(text, classes="attachment")
        if user:
            await block.mount(line, after=user.first())
        else:
            await block.mount(line, before=0 if block.children else None)

    # -- a live turn -------------------------------------------------------------------------------
    async def add_pending_turn(self, local_id: int, text: str) -> TurnBlock:
        block = _bubbles().TurnBlock(None, classes="turn -pending")
        self._pending[local_id] = block
        await self.mount(block)
        await block.mount(_bubbles().UserBubble(Text(text), classes="msg"))
        self.scroll_end(animate=False)
        return block

    def confirm_turn(self, local_id: int, group_id: int) -> None:
        block = self._pending.get(local_id)
        if block is None:
            return
        block.group_id = group_id
        block.remove_class("-pending")
        self._blocks[group_id] = block

    def _block_for(self, local_id: int) -> TurnBlock | None:
        return self._pending.get(local_id)

    async def add_tool_message(self, local_id: int, message) -> None:
        block = self._block_for(local_id)
        if block is None:
            return
        bubble = self._replies.pop(local_id, None)
        if bubble is not None:  # text after the tool round goes into a new bubble, below the tools
            await bubble.finish()
            bubble.remove_class("-streaming")
        tier = Tier(self.truncation.active_recent_chars, "active_recent") if message.role == "tool" else None
        await block.mount_all(_bubbles().message_widgets(message, tier))
        self.scroll_end(animate=False)

    async def append_reply(self, local_id: int, fragment: str) -> None:
        bubble = self._replies.get(local_id)
        if bubble is None:
            block = self._block_for(local_id)
            if block is None:
                return
            bubble = _bubbles().AssistantBubble("", classes="msg -streaming")
            self._replies[local_id] = bubble
            await block.mount(bubble)
        await bubble.write(fragment)
        self.scroll_end(animate=False)

    async def add_pending_rebuild(self, local_id: int, text: str) -> TurnBlock:
        """A block for ``/context rebuild``: a note, then the model's reply streams below it."""
        block = _bubbles().TurnBlock(None, classes="turn rebuild -pending")
        self._pending[local_id] = block
        await self.mount(block)
        await block.mount(_bubbles().SystemNote(Text(text), classes="note rebuild-note"))
        self.scroll_end(animate=False)
        return block

    def add_usage(self, local_id: int, check) -> None:
        """Remember a call's usage check; the line shows under the reply when the turn ends."""
        self._usage.setdefault(local_id, []).append(check)

    async def finish_reply(self, local_id: int, *, partial: bool = False, error: str = "",
                           cancelled: bool = False, cancel_note: str = CANCELLED_EARLY, rebuild: bool = False) -> None:
        bubble = self._replies.pop(local_id, None)
        reason = "rebuild" if rebuild else ("cancelled" if cancelled else ("failed" if error else ""))
        if bubble is not None:
            await bubble.finish(partial=partial, reason=reason)
            bubble.remove_class("-streaming")
        block = self._pending.pop(local_id, None)
        checks = self._usage.pop(local_id, [])
        if block is not None:
            if checks:
                await block.mount(_bubbles().UsageLine(checks, classes="usage-line"))
            if cancelled and bubble is None:
                await block.mount(_bubbles().SystemNote(Text(cancel_note), classes="note cancel-note"))
            if error:
                await block.mount(_bubbles().SystemNote(Text(f"✗ {error}"), classes="error-note"))
        self.scroll_end(animate=False)

    async def add_note(self, text: str | Text, *, error: bool = False) -> None:
        await self.mount(_bubbles().SystemNote(text if isinstance(text, Text) else Text(text),
                                    classes="error-note" if error else "note"))
        self.scroll_end(animate=False)
