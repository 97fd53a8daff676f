"""Slash commands typed in the input, and the same actions in the command palette (ctrl+p).

A command is parsed here into a handler name and its arguments; the main screen runs it
(``MainScreen.cmd_<handler>``). The palette runs the very same command strings, so both paths
stay one.
"""
from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:  # pragma: no cover
    from ctxbench.tui.screens.main import MainScreen


@dataclass(frozen=True)
class SlashCommand:
    name: str  # words after the slash, e.g. "context window"
    args: str  # usage of the arguments, e.g. "N"
    help: str
    handler: str  # MainScreen.cmd_<handler>

    @property
    def usage(self) -> str:
        return f"/{self.name}" + (f" {self.args}" if self.args else "")


SLASH_COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("context window", "N", "keep the last N turns in the history window (0 = all)", "context_window"),
    SlashCommand("context show", "", "show the exact payload of the current plan", "context_show"),
    SlashCommand("context restore", "GID", "bring a dropped turn GID back into the context", "context_restore"),
    SlashCommand("context rebuild", "", "ask the model to write the ### STATE afresh from the current window",
                 "context_rebuild"),
    SlashCommand("context drop", "GID", "drop turn GID from the context (kept; /context restore GID brings it back)",
                 "context_drop"),
    SlashCommand("context", "", "open the context overlay", "context_overlay"),
    SlashCommand("undo", "", "remove the last turn (and rebuild the ### STATE if there is one)", "undo"),
    SlashCommand("message list", "", "list the session's turns", "message_list"),
    SlashCommand("message show", "GID", "show every message of turn GID", "message_show"),
    SlashCommand("message remove", "GID", "delete turn GID from the session for good", "message_remove"),
    SlashCommand("pin list", "", "list the session's pins", "pin_list"),
    SlashCommand("pin remove", "PIN", "remove a pin (its id, e.g. p3)", "pin_remove"),
    SlashCommand("pin lease", "TARGET [turn|task]", "lease a turn or card for this turn or this task", "pin_lease"),
    SlashCommand("pin text", "TEXT", "pin a note of your own", "pin_text"),
    SlashCommand("pin", "TARGET", "pin a turn (12 or group:12) or a card (card:pkg.mod.f) sticky", "pin"),
    SlashCommand("replay", "[N]", "step through the turns: the plan each would get under the current settings",
                 "replay"),
    SlashCommand("mode", "off|light|heavy", "set the Context Mode", "mode"),
    SlashCommand("budget", "N", "set the token budget of the plan", "budget"),
    SlashCommand("strategy", "window|hybrid|levels|semantic", "choose the history strategy", "strategy"),
    SlashCommand("theme", "NAME", "switch theme (no name lists them)", "theme"),
    SlashCommand("help", "", "list the commands", "help"),
    SlashCommand("quit", "", "leave ctxbench", "quit"),
)

_BY_NAME = {c.name: c for c in SLASH_COMMANDS}


class CommandError(ValueError):
    """A command line that cannot run; the message says why and what was meant."""


@dataclass(frozen=True)
class ParsedCommand:
    command: SlashCommand
    args: tuple[str, ...]


def close_commands(words: str, limit: int = 3) -> list[str]:
    """Command names near ``words`` (difflib), best first."""
    names = [c.name for c in SLASH_COMMANDS]
    close = difflib.get_close_matches(words, names, n=limit, cutoff=0.6)
    first = words.split(" ")[0]
    for name in difflib.get_close_matches(first, sorted({n.split(" ")[0] for n in names}), n=limit, cutoff=0.6):
        if name not in close:
            close.append(name)
    return close[:limit]


def parse(line: str) -> ParsedCommand:
    """``/context window 5`` → (context window, ("5",)). Raises CommandError for unknown commands."""
    text = line.strip()
    if not text.startswith("/"):
        raise CommandError("commands start with /")
    try:
        words = shlex.split(text[1:])
    except ValueError as exc:
        raise CommandError(f"cannot read the command: {exc}") from exc
    if not words:
        raise CommandError("empty command; /help lists them")
    words[0] = words[0].lower()
    if len(words) >= 2 and f"{words[0]} {words[1].lower()}" in _BY_NAME:
        return ParsedCommand(_BY_NAME[f"{words[0]} {words[1].lower()}"], tuple(words[2:]))
    if words[0] in _BY_NAME:
        command = _BY_NAME[words[0]]
        if words[1:] and not command.args:
            subs = [c.usage for c in SLASH_COMMANDS if c.name.startswith(words[0] + " ")]
            typed = " ".join(words[:2])
            close = [c for c in close_commands(typed) if c.startswith(words[0] + " ")]
            known = ", ".join("/" + c for c in close) if close else ", ".join(subs) or command.usage
            raise CommandError(f"unknown command /{typed}; did you mean {known}?")
        return ParsedCommand(command, tuple(words[1:]))
    groups = {c.name.split(" ")[0] for c in SLASH_COMMANDS if " " in c.name}
    typed = " ".join(words[:2]) if len(words) > 1 and words[0] in groups else words[0]
    close = close_commands(typed) or close_commands(words[0])
    hint = f"; did you mean {', '.join('/' + c for c in close)}?" if close else "; /help lists the commands"
    raise CommandError(f"unknown command /{typed}{hint}")


HELP_USAGE_WIDTH = 22  # a longer usage puts its help on the next line, so /help reads at 80 columns


def help_text() -> str:
    width = min(HELP_USAGE_WIDTH, max(len(c.usage) for c in SLASH_COMMANDS))
    lines = []
    for c in SLASH_COMMANDS:
        if len(c.usage) > width:
            lines += [c.usage, f"{'':<{width}}  {c.help}"]
        else:
            lines.append(f"{c.usage:<{width}}  {c.help}")
    return "\n".join(lines)


def slash_suggestions() -> list[str]:
    """Completions for the input: every command name, two-word ones first."""
    names = sorted((c.name for c in SLASH_COMMANDS), key=lambda n: (-n.count(" "), n))
    return ["/" + n + " " if _BY_NAME[n].args else "/" + n for n in names]


# -- command palette ------------------------------------------------------------------------------

PALETTE_ENTRIES: tuple[tuple[str, str, str], ...] = (
    ("Context Mode: cycle Off → Light → Heavy", "", "cycle"),
    ("Context Mode: Off", "never auto-retrieve", "/mode off"),
    ("Context Mode: Light", "scaffold + thin cards", "/mode light"),
    ("Context Mode: Heavy", "more cards, excerpts, graph neighbours", "/mode heavy"),
    ("Context: open the overlay", "every candidate with its reason", "/context"),
    ("Context: show the payload", "the exact messages sent to the model", "/context show"),
    ("Context: rebuild the ### STATE", "the model rewrites it from the current window", "/context rebuild"),
    ("Replay: step through the turns", "the plan each turn would get under the current settings", "/replay"),
    ("Context: history window all turns", "", "/context window 0"),
    ("Context: history window last 10 turns", "", "/context window 10"),
    ("Context: history window last 25 turns", "", "/context window 25"),
    ("Budget: 4,000 tokens", "", "/budget 4000"),
    ("Budget: 8,000 tokens", "", "/budget 8000"),
    ("Budget: 16,000 tokens", "", "/budget 16000"),
    ("Budget: 32,000 tokens", "", "/budget 32000"),
    ("Strategy: window", "last N turns", "/strategy window"),
    ("Strategy: hybrid", "keyword + recency (RRF)", "/strategy hybrid"),
    ("Strategy: levels", "permanent / session / working / volatile", "/strategy levels"),
    ("Strategy: semantic", "embedding similarity + recency + importance", "/strategy semantic"),
    ("Undo", "remove the last turn (and rebuild the ### STATE)", "/undo"),
    ("Messages: list the turns", "", "/message list"),
    ("Pins: list", "", "/pin list"),
    ("Help: slash commands", "", "/help"),
)


class WorkbenchCommands(Provider):
    """The workbench's actions in the command palette; each runs the matching slash command."""

    def _screen(self) -> "MainScreen | None":
        from ctxbench.tui.screens.main import MainScreen

        for screen in reversed(self.app.screen_stack):
            if isinstance(screen, MainScreen):
                return screen
        return None

    def _run(self, command: str) -> None:
        screen = self._screen()
        if screen is None:
            return
        if command == "cycle":
            screen.action_cycle_mode()
        else:
            screen.run_slash(command)

    async def discover(self) -> Hits:
        for title, help_, command in PALETTE_ENTRIES:
            yield DiscoveryHit(title, partial(self._run, command), help=help_ or command)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_, command in PALETTE_ENTRIES:
            score = matcher.match(f"{title} {command}")
            if score > 0:
                yield Hit(score, matcher.highlight(title), partial(self._run, command), help=help_ or command)
