"""What one turn renders to in the chat pane: user and assistant bubbles, the ``### STATE`` panel, tool
traffic collapsed, the attachment and usage lines, notes."""
from __future__ import annotations

import json

from rich.syntax import Syntax
from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Collapsible, Markdown, Static

from ctxbench.records.state import is_state_heading
from ctxbench.records.vocab import UNANSWERED_FLAG
from ctxbench.tui.markdown_parser import reply_parser
from ctxbench.tui.present import CANCELLED_EARLY, one_line, split_state, state_line_parts, usage_text
from ctxbench.tui.tiers import Tier, tier_note


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


UNANSWERED_NOTE = "⋯ unanswered: no reply was stored; left out of later plans (/context restore brings it back)"
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
        md = Markdown(parts.before, classes="reply", parser_factory=reply_parser)
        md.display = bool(parts.before) or not parts.state
        yield md
        if parts.state:
            yield StatePanel(parts.state, classes="state-block" + (" -after-text" if parts.before else ""))
        if parts.after:
            yield Markdown(parts.after, classes="reply reply-after", parser_factory=reply_parser)
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
                    await self.mount(Markdown(parts.after, classes="reply reply-after", parser_factory=reply_parser))
            else:
                panel = self.state_panel()
                if panel is not None:
                    await panel.remove()
            self.markdown.display = bool(parts.before) or not parts.state
        self._partial = partial
        self.set_class(partial, "-partial")
        if partial and not self.query(".partial-note"):
            await self.mount(Static(PARTIAL_NOTES.get(reason, PARTIAL_NOTES[""]), classes="partial-note"))




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

    def __init__(self, group_id: int | None, *children, **kwargs) -> None:
        super().__init__(*children, **kwargs)
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


def message_widgets(message, tier: Tier | None, note: str | None = None) -> list:
    """The widgets one stored message renders to (``note``: a tool result's size note as it was sent, which
    replaces the tier's)."""
    out: list = []
    if message.role == "user":
        out.append(UserBubble(Text(message.content), classes="msg"))
        if UNANSWERED_FLAG in message.flags:
            out.append(Static(UNANSWERED_NOTE, classes="partial-note"))
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
        note = tier_note(len(message.content), tier) if note is None else note
        title = f"↳ {message.tool_name or 'tool'} result · #{message.id} · {note}"
        out.append(Collapsible(Static(Text(message.content)), title=title, collapsed=True, classes="tool-result"))
    return out
