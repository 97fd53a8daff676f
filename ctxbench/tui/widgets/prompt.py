"""The input row: the Context Mode indicator beside a single-line prompt with slash-command completion."""
from __future__ import annotations

from textual.suggester import SuggestFromList
from textual.widgets import Input

from ctxbench.tui.commands import slash_suggestions

# longest first; the prompt shows the longest that fits (at 80 columns the long one was cut mid-sentence)
PLACEHOLDERS = (
    "Message, or /command — /help lists them, ctrl+p opens the palette",
    "Message or /command · /help · ctrl+p palette",
    "Message or /command",
)


class PromptInput(Input):
    """Type a message (Enter sends) or a /command; ``→`` accepts the completion."""

    def __init__(self, **kwargs) -> None:
        super().__init__(
            placeholder=PLACEHOLDERS[0],
            suggester=SuggestFromList(slash_suggestions(), case_sensitive=False),
            **kwargs,
        )

    def on_resize(self) -> None:
        width = self.content_region.width
        self.placeholder = next((p for p in PLACEHOLDERS if len(p) < width), PLACEHOLDERS[-1])
