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

import difflib
import re
from dataclasses import dataclass

from textual.binding import Binding
from textual.keys import KEY_NAME_REPLACEMENTS, key_to_character


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
    """The config's ``ui.keymap`` as a Textual keymap (keys written as Textual names them, so ``"ctrl+k, f2"``
    binds f2 too), and the ids it names that do not exist."""
    keymap: dict[str, str] = {}
    unknown: list[str] = []
    for binding_id, keys in pairs:
        if binding_id not in BINDING_IDS:
            unknown.append(binding_id)
            continue
        keymap[binding_id] = ",".join(_key_names(str(keys)))
    return keymap, unknown


# screens with a text input that has the focus: a key that types a character must reach it
TYPING_SCOPES = ("ctxbench", "overlay")
SCOPE_NAMES = {"ctxbench": "the main screen", "overlay": "the context overlay", "viewer": "the viewers",
               "replay": "the replay screen", "whatif": "the what-if screen"}
MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")
_KEY_NAME = re.compile(rf"^(({'|'.join(MODIFIERS)})\+)*([a-z0-9_]+|[^\sA-Z+]|[A-Z])$")


def keymap_problems(pairs: tuple[tuple[str, str], ...]) -> list[str]:
    """What is wrong with the config's ``ui.keymap``, one line per problem naming the key: an unknown binding
    id, a key that is not a key name, a key bound twice on one screen (by the keymap, or by the keymap and a
    default left as it is), a key the app keeps (quit, the command palette), or a key that types a character
    bound on a screen where the user types."""
    from textual.app import App

    problems: list[str] = []
    given = dict(pairs)
    reserved = {b.key: b.description or b.action for b in Binding.make_bindings(App.BINDINGS)}
    reserved[App.COMMAND_PALETTE_BINDING] = "command palette"
    for binding_id, keys in pairs:
        where = f"ui.keymap.{binding_id}"
        if binding_id not in BINDING_IDS:
            problems.append(f"{where}: unknown binding id; {_closest_id(binding_id)}")
            continue
        scope = binding_id.split(".")[0]
        for key in [k.strip() for k in str(keys).split(",")]:
            if not _KEY_NAME.match(key):
                problems.append(f"{where}: {key!r} is not a key name (write keys as Textual names them: ctrl+k, f2, "
                                "escape, space, a)")
            elif _key_names(key)[0] in reserved:
                problems.append(f"{where}: {key} is the app's own key ({reserved[_key_names(key)[0]]})")
            elif scope in TYPING_SCOPES and _types_a_character(key):
                problems.append(f"{where}: {key} types a character, and on {_scope(scope)} you type: bind a key "
                                "with ctrl+ or alt+, or a function key")
    for scope in dict.fromkeys(spec.id.split(".")[0] for spec in ALL_KEYS):
        owners: dict[str, list[str]] = {}
        for spec in ALL_KEYS:
            if spec.id.split(".")[0] == scope:
                for key in _key_names(given.get(spec.id, spec.keys)):
                    owners.setdefault(key, []).append(spec.id)
        for key, ids in owners.items():
            mine = [i for i in ids if i in given]
            if len(ids) > 1 and mine:
                others = ", ".join(i for i in ids if i != mine[0])
                problems.append(f"ui.keymap.{mine[0]}: {key} is bound twice on {_scope(scope)}: also to {others}"
                                f"{'' if all(i in given for i in ids) else ' (its default key)'}")
    return problems


def _closest_id(binding_id: str) -> str:
    """The id meant: the closest name on the same screen, else the closest id, else the ids there are."""
    scope, _, name = binding_id.partition(".")
    same = [spec.id for spec in ALL_KEYS if spec.id.split(".")[0] == scope]
    close = (difflib.get_close_matches(name, [i.partition(".")[2] for i in same], n=1, cutoff=0.6) if same else
             difflib.get_close_matches(binding_id, [spec.id for spec in ALL_KEYS], n=1, cutoff=0.6))
    if close:
        return f"did you mean {scope + '.' + close[0] if same else close[0]}?"
    if same:
        return f"known on {_scope(scope)}: {', '.join(same)}"
    return "ids start with " + ", ".join(f"{s}." for s in dict.fromkeys(i.id.split(".")[0] for i in ALL_KEYS))


def _key_names(keys: str) -> list[str]:
    """Keys as Textual names them (``,`` -> comma), blanks around them dropped."""
    return [b.key for k in keys.split(",") if k.strip() for b in Binding.make_bindings([Binding(k.strip(), "noop")])]


def _types_a_character(key: str) -> bool:
    base = key.removeprefix("shift+")
    if "+" in base.rstrip("+"):
        return False
    if base in KEY_NAME_REPLACEMENTS.values():  # minus, plus, slash, ...
        return True
    character = base if len(base) == 1 else key_to_character(base)
    return character is not None and character.isprintable()


def _scope(scope: str) -> str:
    return SCOPE_NAMES.get(scope, f"the {scope} screen")


def describe_key(binding_id: str, keymap: dict[str, str] | None = None) -> str:
    """The key a user presses for ``binding_id``, for hints like ``ctrl+o details``."""
    if keymap and binding_id in keymap:
        return keymap[binding_id].split(",")[0]
    for spec in ALL_KEYS:
        if spec.id == binding_id:
            return spec.keys.split(",")[0]
    return ""
