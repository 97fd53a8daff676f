"""The chat pane: the session's turns, user and assistant styled apart, tool traffic collapsed."""
from __future__ import annotations

import json
from typing import Iterable

from rich.syntax import Syntax
from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Button, Collapsible, Markdown, Static

from ctxbench.config import TruncationConfig
from ctxbench.llm.state import is_state_heading
from ctxbench.tui.present import (
    Tier,
    one_line,
    split_state,
    state_line_parts,
    tier_note,
    truncation_tiers,
    usage_text,
)


class UserBubble(Static):
    """A user message."""


class AttachmentLine(Static):
    """``+1,240 tok auto · Light · scaffold + 5 cards · ctrl+o details``"""


class StatePanel(Static):
    """A ``### STATE`` block: a bordered panel that keeps its ``Goal:`` / ``Context:`` … lines apart."""

    BORDER_TITLE = "### STATE"

    def __init__(self, body: str = "", **kwargs) -> None:
        super().__init__(state_text(body), **kwargs)
        self.body = body

    def set_body(self, body: str) -> None:
        if body != self.body:
            self.body = body
            self.update(state_text(body))


def state_text(body: str) -> Text:
    out = Text()
    for n, line in enumerate(body.splitlines()):
        if n:
            out.append("\n")
        name, rest = state_line_parts(line)
        if name:
            out.append(name, style="bold")
        out.append(rest)
    return out


PARTIAL_NOTES = {"cancelled": "⋯ partial reply: cancelled", "failed": "⋯ partial reply: the call failed",
                 "": "⋯ partial reply (cut off)", "rebuild": "⋯ cut off: the state is unchanged"}


class AssistantBubble(Vertical):
    """An assistant reply, rendered as Markdown; streams while the reply arrives.

    A ``### STATE`` block in the reply is shown in a :class:`StatePanel` (Markdown would join its
    lines into one paragraph); while streaming, text from the heading on goes to the panel.
    """

    def __init__(self, text: str = "", *, partial: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self._initial = text
        self._text = text
        self._sent = len(text)  # characters of the reply already given to the Markdown widget
        self._state_at: int | None = None  # where a streamed ### STATE heading starts
        self._stream = None
        self._partial = partial
        self.set_class(partial, "-partial")

    def compose(self):
        parts = split_state(self._initial)
        md = Markdown(parts.before, classes="reply")
        md.display = bool(parts.before) or not parts.state
        yield md
        if parts.state:
            yield StatePanel(parts.state, classes="state-block" + (" -after-text" if parts.before else ""))
        if parts.after:
            yield Markdown(parts.after, classes="reply reply-after")
        if self._partial:
            yield Static(PARTIAL_NOTES[""], classes="partial-note")

    @property
    def markdown(self) -> Markdown:
        return self.query(Markdown).first()

    @property
    def text(self) -> str:
        return self._text

    def state_panel(self) -> StatePanel | None:
        found = self.query(StatePanel)
        return found.first() if found else None

    def _markdown_limit(self) -> int:
        """How much of the streamed text can go to Markdown now: up to a ### STATE heading once one
        is complete; a trailing unfinished line that may still become a heading waits."""
        text = self._text
        complete = text.rfind("\n") + 1
        pos = text.rfind("\n", 0, self._sent) + 1  # lines before this one were sent and were no heading
        for line in text[pos:complete].splitlines(keepends=True):
            if is_state_heading(line):
                self._state_at = pos
                return pos
            pos += len(line)
        tail = text[complete:].lstrip()
        return complete if (not tail or tail.startswith("#")) else len(text)

    async def write(self, fragment: str) -> None:
        self._text += fragment
        if self._state_at is None:
            limit = self._markdown_limit()
            if limit > self._sent:
                if self._stream is None:
                    self._stream = Markdown.get_stream(self.markdown)
                await self._stream.write(self._text[self._sent:limit])
                self._sent = limit
        if self._state_at is not None:
            body = self._text[self._state_at:].split("\n", 1)
            await self._show_state(body[1].strip("\n") if len(body) > 1 else "")

    async def _show_state(self, body: str, after_text: bool | None = None) -> None:
        panel = self.state_panel()
        if panel is None:
            panel = StatePanel(body, classes="state-block")
            await self.mount(panel, after=self.markdown)
        else:
            panel.set_body(body)
        if after_text is None:
            after_text = bool(self._text[: self._state_at or 0].strip())
        panel.set_class(after_text, "-after-text")

    async def finish(self, partial: bool = False, reason: str = "") -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        parts = split_state(self._text)
        if parts.state or self._sent < len(self._text):
            await self.markdown.update(parts.before)
            self._sent = len(self._text)
            if parts.state:
                await self._show_state(parts.state, bool(parts.before))
                if parts.after:
                    await self.mount(Markdown(parts.after, classes="reply reply-after"))
            else:
                panel = self.state_panel()
                if panel is not None:
                    await panel.remove()
            self.markdown.display = bool(parts.before) or not parts.state
        self._partial = partial
        self.set_class(partial, "-partial")
        if partial and not self.query(".partial-note"):
            await self.mount(Static(PARTIAL_NOTES.get(reason, PARTIAL_NOTES[""]), classes="partial-note"))


CANCELLED_EARLY = "⊘ cancelled before the model replied (your message is stored)"


class UsageLine(Static):
    """Under a finished reply: estimated vs reported prompt tokens; a badge when they differ by > the threshold."""

    def __init__(self, checks=(), **kwargs) -> None:
        super().__init__("", **kwargs)
        self.checks: tuple = ()
        self.set_checks(checks)

    def set_checks(self, checks) -> None:
        self.checks = tuple(checks)
        text, mismatch = usage_text(self.checks)
        self.set_class(mismatch, "-mismatch")
        self.update(Text(text))

    @property
    def mismatch(self) -> bool:
        return self.has_class("-mismatch")


class SystemNote(Static):
    """A system message of the transcript, or a line of command output."""


class TurnBlock(Vertical):
    """One turn (group): the user's message, its attachment line, tool traffic and replies."""

    def __init__(self, group_id: int | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.group_id = group_id

    def attachment(self) -> AttachmentLine | None:
        found = self.query(AttachmentLine)
        return found.first() if found else None


def _tool_call_title(name: str, arguments: str) -> str:
    return f"⚙ {name}({one_line(arguments, 60)})"


def _pretty_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, TypeError):
        return text


def message_widgets(message, tier: Tier | None) -> list:
    """The widgets one stored message renders to."""
    out: list = []
    if message.role == "user":
        out.append(UserBubble(Text(message.content), classes="msg"))
    elif message.role == "system":
        out.append(Collapsible(Static(Text(message.content)), title=f"system · {one_line(message.content, 60)}",
                               collapsed=True, classes="system-msg"))
    elif message.role == "assistant":
        if message.content:
            out.append(AssistantBubble(message.content, partial=getattr(message, "partial", False), classes="msg"))
        for call in message.tool_calls:
            body = Static(Syntax(_pretty_json(call.arguments), "json", word_wrap=True, background_color="default"))
            out.append(Collapsible(body, title=_tool_call_title(call.name, call.arguments), collapsed=True,
                                   classes="tool-call"))
    elif message.role == "tool":
        note = tier_note(len(message.content), tier)
        title = f"↳ {message.tool_name or 'tool'} result · #{message.id} · {note}"
        out.append(Collapsible(Static(Text(message.content)), title=title, collapsed=True, classes="tool-result"))
    return out


class ChatPane(VerticalScroll):
    """Shows the newest ``max_groups`` turns; a button loads earlier ones."""

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
        groups = self._groups()
        active = groups[-1] if groups else -1
        results = [(m.id, m.group_id) for m in self._messages if m.role == "tool"]
        return truncation_tiers(results, active, self.truncation)

    async def show_history(self, messages: Iterable, dropped: Iterable[int] = ()) -> None:
        """Replace the pane's content with ``messages`` (chronological)."""
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
        for gid in group_ids:
            block = TurnBlock(gid, classes="turn")
            block.set_class(gid in self._dropped, "-dropped")
            widgets = []
            for m in by_group.get(gid, []):
                widgets.extend(message_widgets(m, tiers.get(m.id)))
                if m.role == "user" and gid in self._attachments:
                    widgets.append(AttachmentLine(self._attachments[gid], classes="attachment"))
            blocks.append((block, widgets))
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
                await self.mount_all([b for b, _ in blocks], before=first_live)
        else:
            anchor = self.query("#earlier")
            if self._shown_from > 0 and anchor:
                anchor.first().label = (f"▲ show {min(self.max_groups, self._shown_from)} earlier turns "
                                        f"({self._shown_from} hidden)")
                await self.mount_all([b for b, _ in blocks], after=anchor.first())
            else:
                if anchor:
                    await anchor.first().remove()
                first = next(iter(self.query(TurnBlock)), None)
                await self.mount_all([b for b, _ in blocks], before=first) if first else await self.mount_all(
                    [b for b, _ in blocks])
        for block, widgets in blocks:
            if widgets:
                await block.mount_all(widgets)
            self._blocks[block.group_id] = block

    async def show_earlier(self) -> None:
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
        user = block.query(UserBubble)
        line = AttachmentLine(text, classes="attachment")
        if user:
            await block.mount(line, after=user.first())
        else:
            await block.mount(line, before=0 if block.children else None)

    # -- a live turn -------------------------------------------------------------------------------
    async def add_pending_turn(self, local_id: int, text: str) -> TurnBlock:
        block = TurnBlock(None, classes="turn -pending")
        self._pending[local_id] = block
        await self.mount(block)
        await block.mount(UserBubble(Text(text), classes="msg"))
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
        await block.mount_all(message_widgets(message, tier))
        self.scroll_end(animate=False)

    async def append_reply(self, local_id: int, fragment: str) -> None:
        bubble = self._replies.get(local_id)
        if bubble is None:
            block = self._block_for(local_id)
            if block is None:
                return
            bubble = AssistantBubble("", classes="msg -streaming")
            self._replies[local_id] = bubble
            await block.mount(bubble)
        await bubble.write(fragment)
        self.scroll_end(animate=False)

    async def add_pending_rebuild(self, local_id: int, text: str) -> TurnBlock:
        """A block for ``/context rebuild``: a note, then the model's reply streams below it."""
        block = TurnBlock(None, classes="turn rebuild -pending")
        self._pending[local_id] = block
        await self.mount(block)
        await block.mount(SystemNote(Text(text), classes="note rebuild-note"))
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
                await block.mount(UsageLine(checks, classes="usage-line"))
            if cancelled and bubble is None:
                await block.mount(SystemNote(Text(cancel_note), classes="note cancel-note"))
            if error:
                await block.mount(SystemNote(Text(f"✗ {error}"), classes="error-note"))
        self.scroll_end(animate=False)

    async def add_note(self, text: str | Text, *, error: bool = False) -> None:
        await self.mount(SystemNote(text if isinstance(text, Text) else Text(text),
                                    classes="error-note" if error else "note"))
        self.scroll_end(animate=False)
