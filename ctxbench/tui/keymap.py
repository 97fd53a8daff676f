"""Every key binding of the workbench, each with an id the config file can rebind.

Rebinding: in the config file

    [ui.keymap]
    "ctxbench.mode_cycle" = "ctrl+k"
    "overlay.pin_sticky" = "ctrl+s,f2"

Ids are grouped by where they act: ``ctxbench.*`` anywhere on the main screen, ``overlay.*``
in the context overlay, ``viewer.*`` in the payload / preview / listing views, ``replay.*`` in
the replay screen, ``whatif.*`` in the what-if screen, ``compact.*`` in the compaction preview.
"""
from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class KeySpec:
    id: str
    keys: str
    action: str
    description: str
    show: bool = True
    priority: bool = False
    key_display: str | None = None


MAIN_KEYS: tuple[KeySpec, ...] = (
    # priority: ctrl+t must cycle the mode even while the input has focus
    KeySpec("ctxbench.mode_cycle", "ctrl+t", "cycle_mode", "Mode", priority=True),
    KeySpec("ctxbench.overlay", "ctrl+o", "open_overlay", "Context", priority=True),
    KeySpec("ctxbench.payload", "ctrl+g", "show_payload", "Payload", priority=True),
    KeySpec("ctxbench.budget_up", "ctrl+up,ctrl+right_square_bracket", "budget_step(1)", "Budget+",
            priority=True, key_display="^↑"),
    KeySpec("ctxbench.budget_down", "ctrl+down,ctrl+left_square_bracket", "budget_step(-1)", "Budget-",
            priority=True, key_display="^↓"),
    KeySpec("ctxbench.cancel", "escape", "cancel_turn", "Cancel", show=False),
    KeySpec("ctxbench.focus_input", "ctrl+l", "focus_input", "Input", show=False),
    # open --watch: switch the proxied conversation between steering and pass-through
    KeySpec("ctxbench.steer_toggle", "ctrl+r", "toggle_steer", "Steer", show=False, priority=True),
)

OVERLAY_KEYS: tuple[KeySpec, ...] = (
    KeySpec("overlay.close", "escape,ctrl+o", "close", "Close", priority=True, key_display="esc"),
    KeySpec("overlay.preview", "enter", "preview", "Preview", priority=True),
    KeySpec("overlay.pin_sticky", "ctrl+s", "pin_sticky", "Pin", priority=True),
    KeySpec("overlay.lease_turn", "ctrl+e", "lease('turn')", "Lease turn", priority=True),
    KeySpec("overlay.lease_task", "ctrl+k", "lease('task')", "Lease task", priority=True),
    KeySpec("overlay.unpin", "ctrl+u", "unpin", "Unpin", priority=True),
    KeySpec("overlay.drop", "ctrl+d", "drop", "Drop", priority=True),
    KeySpec("overlay.accept", "ctrl+y", "accept", "Accept", priority=True),
    KeySpec("overlay.reject", "ctrl+n", "reject", "Reject", priority=True),
    KeySpec("overlay.cursor_down", "down", "cursor(1)", "Down", show=False, priority=True),
    KeySpec("overlay.cursor_up", "up", "cursor(-1)", "Up", show=False, priority=True),
    KeySpec("overlay.page_down", "pagedown", "cursor(10)", "Page down", show=False, priority=True),
    KeySpec("overlay.page_up", "pageup", "cursor(-10)", "Page up", show=False, priority=True),
)

VIEWER_KEYS: tuple[KeySpec, ...] = (
    KeySpec("viewer.close", "escape,q", "close", "Close", key_display="esc"),
    KeySpec("viewer.copy", "c", "copy", "Copy"),
    KeySpec("viewer.save", "s", "save", "Save JSON"),
)

WHATIF_KEYS: tuple[KeySpec, ...] = (
    KeySpec("whatif.close", "escape,q", "close", "Cancel", priority=True, key_display="esc"),
    KeySpec("whatif.keep", "enter", "keep", "Keep", priority=True),
    KeySpec("whatif.less", "left", "budget(-1)", "Budget-", priority=True, key_display="←"),
    KeySpec("whatif.more", "right", "budget(1)", "Budget+", priority=True, key_display="→"),
    KeySpec("whatif.halve", "down", "scale(0.5)", "½", priority=True, key_display="↓"),
    KeySpec("whatif.double", "up", "scale(2)", "×2", priority=True, key_display="↑"),
    KeySpec("whatif.mode", "m", "cycle_mode", "Mode", priority=True),
    KeySpec("whatif.strategy", "s", "cycle_strategy", "Strategy", priority=True),
)


COMPACT_KEYS: tuple[KeySpec, ...] = (
    KeySpec("compact.close", "escape,q", "close", "Cancel", priority=True, key_display="esc"),
    KeySpec("compact.toggle", "space", "toggle", "Kept/summarised", priority=True),
    KeySpec("compact.apply", "a", "apply", "Apply", priority=True),
)


def bindings(specs: tuple[KeySpec, ...]) -> list[Binding]:
    return [
        Binding(s.keys, s.action, s.description, show=s.show, priority=s.priority, key_display=s.key_display,
                id=s.id)
        for s in specs
    ]


REPLAY_KEYS: tuple[KeySpec, ...] = (
    KeySpec("replay.close", "escape,q", "close", "Close", priority=True, key_display="esc"),
    KeySpec("replay.prev", "left,p", "step(-1)", "Prev turn", priority=True, key_display="←"),
    KeySpec("replay.next", "right,n", "step(1)", "Next turn", priority=True, key_display="→"),
    KeySpec("replay.first", "home", "jump('first')", "First", priority=True),
    KeySpec("replay.last", "end", "jump('last')", "Last", priority=True),
    KeySpec("replay.mode", "m", "cycle_mode", "Mode", priority=True),
    KeySpec("replay.strategy", "s", "cycle_strategy", "Strategy", priority=True),
    KeySpec("replay.payload", "enter", "payload", "Payload", priority=True),
)

ALL_KEYS: tuple[KeySpec, ...] = MAIN_KEYS + OVERLAY_KEYS + VIEWER_KEYS + REPLAY_KEYS + WHATIF_KEYS + COMPACT_KEYS
BINDING_IDS: frozenset[str] = frozenset(s.id for s in ALL_KEYS)


def keymap_from_config(pairs: tuple[tuple[str, str], ...]) -> tuple[dict[str, str], list[str]]:
    """The config's ``ui.keymap`` as a Textual keymap, and the ids it names that do not exist."""
    keymap: dict[str, str] = {}
    unknown: list[str] = []
    for binding_id, keys in pairs:
        if binding_id not in BINDING_IDS:
            unknown.append(binding_id)
            continue
        keymap[binding_id] = str(keys)
    return keymap, unknown


def describe_key(binding_id: str, keymap: dict[str, str] | None = None) -> str:
    """The key a user presses for ``binding_id``, for hints like ``ctrl+o details``."""
    if keymap and binding_id in keymap:
        return keymap[binding_id].split(",")[0]
    for spec in ALL_KEYS:
        if spec.id == binding_id:
            return spec.keys.split(",")[0]
    return ""
