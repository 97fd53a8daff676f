"""The workbench's actions in the command palette (ctrl+p): each runs the matching slash command.

One table drives both: every row of ``commands.SLASH_COMMANDS`` is an entry (a command that needs an
argument, ``/pin TARGET``, puts ``/pin `` in the input to finish), beside the ready-made ones below (a mode,
a budget, a strategy, a theme by name). The provider posts :class:`RunCommand` to the app, which hands it to
the main screen, so the palette and the input run the very same command strings.
"""
from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.message import Message

from ctxbench.records.vocab import STRATEGIES
from ctxbench.tui.commands import SLASH_COMMANDS

CYCLE_MODE = "cycle"  # the palette's entry for the mode hotkey (not a slash command)

STRATEGY_HELP = {
    "window": "last N turns",
    "hybrid": "keyword + recency (RRF)",
    "levels": "permanent / session / working / volatile",
    "semantic": "embedding similarity + recency + importance",
    "fused": "single messages by meaning + keywords + neighbours (the default)",
}

PRESETS: tuple[tuple[str, str, str], ...] = (
    ("Context Mode: cycle Off → Light → Heavy", "", CYCLE_MODE),
    ("Context Mode: Off", "never auto-retrieve", "/mode off"),
    ("Context Mode: Light", "scaffold + thin cards", "/mode light"),
    ("Context Mode: Heavy", "more cards, excerpts, graph neighbours", "/mode heavy"),
    ("Context: open the overlay", "every candidate with its reason", "/context"),
    ("Context: show the payload", "the exact messages sent to the model", "/context show"),
    ("Context: rebuild the ### STATE", "the model rewrites it from the current window", "/context rebuild"),
    ("Replay: step through the turns", "the plan each turn would get under the current settings", "/replay"),
    ("Branches: list", "fork point, head turn and turns of each", "/branch"),
    ("Branches: fork here", "a new timeline from this turn; switches to it", "/fork"),
    ("Plan: diff with the previous turn", "what entered, left or changed, and why", "/diff"),
    ("Plan: what if…", "budget, mode and strategy tried live, nothing stored", "/whatif"),
    ("Export this branch as JSONL", "OpenAI messages; ctxbench import reads them back", "/export"),
    ("Context: history window all turns", "", "/context window 0"),
    ("Context: history window last 10 turns", "", "/context window 10"),
    ("Context: history window last 25 turns", "", "/context window 25"),
    ("Budget: 4,000 tokens", "", "/budget 4000"),
    ("Budget: 8,000 tokens", "", "/budget 8000"),
    ("Budget: 16,000 tokens", "", "/budget 16000"),
    ("Budget: 32,000 tokens", "", "/budget 32000"),
    *((f"Strategy: {name}", STRATEGY_HELP.get(name, ""), f"/strategy {name}") for name in STRATEGIES),
    ("Benchmarks: the last results", "recall per strategy and budget, plan time, speed targets", "/bench"),
    ("Undo", "remove the last turn (the ### STATE goes back to the one before it)", "/undo"),
    ("Messages: list the turns", "", "/message list"),
    ("Pins: list", "", "/pin list"),
    ("Help: slash commands", "", "/help"),
)


def _entries() -> tuple[tuple[str, str, str], ...]:
    """(title, help, command line) of every palette entry: the ready-made ones, then each slash command that has no
    ready-made entry of its own line."""
    taken = {command for _title, _help, command in PRESETS}
    table = tuple((c.usage, c.help, c.line) for c in SLASH_COMMANDS if c.line not in taken)
    return PRESETS + table


PALETTE_ENTRIES: tuple[tuple[str, str, str], ...] = _entries()


def needs_finishing(command: str) -> bool:
    """A palette line the user finishes in the input (``/pin `` : the target is theirs to type)."""
    return command.endswith(" ")


def run_line(screen, command: str) -> None:
    """Run a palette entry on the main screen: the mode hotkey, a line for the user to finish in the input (put
    there, with the focus), or a slash command line."""
    if command == CYCLE_MODE:
        screen.action_cycle_mode()
    elif needs_finishing(command):
        screen.prompt.value = command
        screen.prompt.cursor_position = len(command)
        screen.prompt.focus()
    else:
        screen.run_slash(command)


class RunCommand(Message):
    """Run a slash command line (or :data:`CYCLE_MODE`) on the main screen."""

    def __init__(self, command: str) -> None:
        super().__init__()
        self.command = command


class WorkbenchCommands(Provider):
    """The workbench's actions in the command palette; each runs the matching slash command."""

    def _run(self, command: str) -> None:
        self.app.post_message(RunCommand(command))

    def _all(self) -> tuple[tuple[str, str, str], ...]:
        themes = tuple((f"Theme: {name}", "switch theme", f"/theme {name}") for name in sorted(self.app.available_themes))
        return PALETTE_ENTRIES + themes

    async def discover(self) -> Hits:
        for title, help_, command in self._all():
            yield DiscoveryHit(title, partial(self._run, command), help=help_ or command)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_, command in self._all():
            score = matcher.match(f"{title} {command}")
            if score > 0:
                yield Hit(score, matcher.highlight(title), partial(self._run, command), help=help_ or command)
