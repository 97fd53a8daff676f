"""A Footer that is made again only when the keys it shows change.

Textual's ``Footer`` makes its keys again (a recompose: ~10 key widgets unmounted, mounted and styled) whenever its
screen's bindings are refreshed, which a screen does each time it is shown: every opening of the context overlay, and
every return to the main screen, made the same footer again (~10 ms of the UI thread, before what the key opened was
painted). :class:`StableFooter` compares what it would show with what it shows and makes it again only when they
differ."""
from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer


class StableFooter(Footer):
    """A Footer made again only when the keys it would show differ from those it shows."""

    _shown: tuple[Any, ...] | None = None  # what the last composition showed

    def _keys(self) -> tuple[Any, ...]:
        """What the footer shows: each binding shown (key, its label, action, description, group), enabled or not,
        its tooltip, and the command palette's key."""
        bindings = self.screen.active_bindings
        shown = tuple((b.key, self.app.get_key_display(b), b.action, b.description, b.group, enabled, tooltip)
                      for (_, b, enabled, tooltip) in bindings.values() if b.show)
        palette = self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE
        return shown, palette and self.app.COMMAND_PALETTE_BINDING in bindings, self.compact

    def compose(self):
        self._shown = self._keys() if self._bindings_ready else None
        yield from super().compose()

    def bindings_changed(self, screen: Screen) -> None:
        if self._shown is not None and self.is_attached and screen is self.screen and self._keys() == self._shown:
            return
        super().bindings_changed(screen)
