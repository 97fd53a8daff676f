"""Slash commands typed in the input: the table, the parser, the help and the completions.

Every command is a row of :data:`SLASH_COMMANDS`; :mod:`ctxbench.tui.slash` runs a parsed command with
the handler registered for its name (a test checks that every row has one and every handler a row).
The palette (:mod:`ctxbench.tui.palette`) runs the very same command strings, so both paths stay one.
"""
from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass

from ctxbench.config import DEFAULT_MODES
from ctxbench.records.vocab import PIN_TARGET_PREFIXES, STRATEGIES


@dataclass(frozen=True)
class SlashCommand:
    name: str  # words after the slash, e.g. "context window"
    args: str  # usage of the arguments, e.g. "N"
    help: str

    @property
    def usage(self) -> str:
        return f"/{self.name}" + (f" {self.args}" if self.args else "")

    @property
    def needs_args(self) -> bool:
        """It does nothing useful without an argument (its usage names one that is not in brackets)."""
        return bool(self.args) and not self.args.startswith("[")

    @property
    def line(self) -> str:
        """What the palette runs for it: the command, or (it needs an argument) the command and a space, which
        the palette puts in the input for the user to finish."""
        return f"/{self.name} " if self.needs_args else f"/{self.name}"


SLASH_COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("context window", "N", "keep the last N turns in the history window (0 = all)"),
    SlashCommand("context show", "", "show the exact payload of the current plan"),
    SlashCommand("context restore", "GID", "bring a dropped turn GID back into the context"),
    SlashCommand("context rebuild", "", "ask the model to write the ### STATE afresh from the current window"),
    SlashCommand("context drop", "GID", "drop turn GID from the context (kept; /context restore GID brings it back)"),
    SlashCommand("context", "", "open the context overlay"),
    SlashCommand("undo", "", "remove the last turn; the ### STATE goes back to the version before it"),
    SlashCommand("message list", "", "list the session's turns"),
    SlashCommand("message show", "GID", "show every message of turn GID"),
    SlashCommand("message remove", "GID", "delete turn GID from the session for good"),
    SlashCommand("pin list", "", "list the session's pins"),
    SlashCommand("pin remove", "PIN", "remove a pin (its id, e.g. p3)"),
    SlashCommand("pin lease", "TARGET [turn|task]", "lease a turn or card for this turn or this task"),
    SlashCommand("pin text", "TEXT", "pin a note of your own"),
    SlashCommand("pin", "TARGET", "pin a turn (12 or group:12) or a card (card:pkg.mod.f) sticky"),
    SlashCommand("replay", "[N]", "step through the turns: the plan each would get under the current settings"),
    SlashCommand("branch", "", "list the session's branches (fork point, head turn, turns)"),
    SlashCommand("fork", "[NAME] [at GID]", "fork the active branch (after turn GID; default: now) and switch to it"),
    SlashCommand("switch", "NAME", "switch to another branch"),
    SlashCommand("diff", "", "what changed between this turn's plan and the previous turn's, and why"),
    SlashCommand("whatif", "", "try budgets, modes and strategies on the next call without storing anything"),
    SlashCommand("export", "[FILE]", "write this branch as OpenAI JSONL (ctxbench import reads it back)"),
    SlashCommand("compact undo", "[sN]", "undo the newest summary (or sN): its turns are sent again"),
    SlashCommand("compact auto", "N%|off|default", "warn in the meter when the history needs N% of the budget"),
    SlashCommand("compact task", "TASK", "preview a summary of a finished task's turns"),
    SlashCommand("compact", "[TOKENS]", "preview summarising older turns: toggle turns, then apply or cancel"),
    SlashCommand("instruction", "TURN [off]", "mark turn TURN a standing instruction (kept from compaction), off unmarks"),
    SlashCommand("task start", "NAME", "start a task with the next turn (task leases live as long as it)"),
    SlashCommand("task end", "", "end the open task and its task leases"),
    SlashCommand("task", "", "list this branch's tasks"),
    SlashCommand("steer preview", "", "proxied conversation: the next request as steering will send it (a diff) "
                                      "and what it costs the prompt cache"),
    SlashCommand("steer findings", "", "proxied conversation: waste in the latest request (repeated results, unused "
                                       "tools, repeated blocks, an overflow coming) and what a steer saves and costs"),
    SlashCommand("steer defer", "ITEM", "proxied conversation: drop ITEM once the prompt cache breaks before it anyway "
                                        "(or expires), keeping the cache until then"),
    SlashCommand("steer policy", "", "the steering rules set for every proxied conversation"),
    SlashCommand("steer everywhere", "drop tool:NAME|result:TOOL|kind:KIND|system:N · pin ITEM · results N · "
                                     "mode M · budget N · remove N",
                 "a steering rule for every proxied assistant (results N: tool results a request, oldest out first)"),
    SlashCommand("mode", "|".join(m.name for m in DEFAULT_MODES), "set the Context Mode"),
    SlashCommand("budget", "N", "set the token budget of the plan"),
    SlashCommand("strategy", "|".join(STRATEGIES), "choose the history strategy"),
    SlashCommand("bench", "[DIR]", "the last benchmark results: recall per strategy and budget, speed"),
    SlashCommand("theme", "NAME", "switch theme (no name lists them)"),
    SlashCommand("help", "", "list the commands"),
    SlashCommand("quit", "", "leave ctxbench"),
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


# -- arguments --------------------------------------------------------------------------------------

def int_arg(args: tuple[str, ...], what: str) -> int:
    """The one number of ``args`` (``12``, ``group:12``, ``8,000`` and ``8_000`` read as numbers)."""
    if len(args) != 1:
        raise ValueError(f"expected one {what}")
    try:
        return int(args[0].removeprefix("group:").replace(",", "").replace("_", ""))
    except ValueError:
        raise ValueError(f"{args[0]!r} is not a number") from None


PIN_TARGET_HINT = "give a turn id (12), group:12 or card:SYMBOL"


def pin_target(args: tuple[str, ...]) -> str:
    """The one pin target of ``args``: a turn id becomes ``group:ID``; prefixed targets are taken as given."""
    if len(args) != 1:
        raise ValueError("expected one target: a turn id (12, group:12), card:SYMBOL or pin:ID")
    raw = args[0]
    if raw.isdigit():
        return f"group:{raw}"
    if raw.startswith((*PIN_TARGET_PREFIXES, "pin:")):  # pin:ID re-pins an existing pin
        return raw
    raise ValueError(f"cannot pin {raw!r}: {PIN_TARGET_HINT}")
