"""The workbench's section (``[ui]``)."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import PositiveInt


@dataclass(frozen=True)
class UIConfig:
    theme: str = "ctxbench-dark"
    """the workbench's colour theme"""
    keymap: tuple[tuple[str, str], ...] = ()
    """(binding id, keys) overrides"""
    chat_groups: PositiveInt = 8
    """turns the chat pane opens a session on (the newest); scrolling to its top, or the button there, loads as many
    earlier ones. Each turn shown costs the opening ~35 ms of layout (40 turns were ~1.5 s of a warm demo start)"""
    budget_step: PositiveInt = 1000
    """tokens added or removed by the budget keys"""
    live_preview: bool = True
    """replan for the draft in the input (the meter shows what it would cost)"""
    preview_delay_s: float = 0.4
    """pause in typing before the draft is planned"""
    preview_source_lines: PositiveInt = 60
    """lines of a symbol's source an item preview shows under what is sent"""
