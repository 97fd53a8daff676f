"""The overlay's filter input."""
from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


class FilterInput(Input, inherit_bindings=False):
    """The overlay's filter: plain editing keys only, so the overlay's ctrl keys are free for actions."""

    BINDINGS = [
        Binding("left", "cursor_left", show=False),
        Binding("right", "cursor_right", show=False),
        Binding("ctrl+left", "cursor_left_word", show=False),
        Binding("ctrl+right", "cursor_right_word", show=False),
        Binding("backspace", "delete_left", show=False),
        Binding("delete", "delete_right", show=False),
        Binding("ctrl+w", "delete_left_word", show=False),
        Binding("home", "home", show=False),
        Binding("end", "end", show=False),
        Binding("ctrl+v", "paste", show=False),
    ]
