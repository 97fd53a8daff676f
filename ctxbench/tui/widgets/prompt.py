"""The input row: the Context Mode indicator beside a single-line prompt with slash-command completion."""
from __future__ import annotations

from textual.suggester import SuggestFromList
from textual.widgets import Input

from ctxbench.tui.commands import slash_suggestions


class PromptInput(Input):
    """Type a message (Enter sends) or a /command; ``→`` accepts the completion."""

    def __init__(self, **kwargs) -> None:
        super().__init__(
            placeholder="Message, or /command — /help lists them, ctrl+p opens the palette",
            suggester=SuggestFromList(slash_suggestions(), case_sensitive=False),
            **kwargs,
        )
