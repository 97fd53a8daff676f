"""``ctxbench policy``: steering rules set once for every assistant that goes through ``ctxbench proxy --steer``."""
from __future__ import annotations

from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, fail, get_config, resolve_db, stored_db

HELP = """Steering rules set once for every proxied assistant (Claude Code, Codex, aider, Gemini CLI, any
client of `ctxbench proxy --steer`), whatever wire format it speaks: drops of any item by what it is, pinned
text, a budget for tool results. A rule changes only what it names: a request holding nothing a rule names goes
upstream byte for byte. Preview what the next request of a conversation becomes with /steer preview in
`ctxbench open --watch`; /steer policy there lists the same rules."""

DROP_HELP = """Leave out TARGET from every proxied request:

\b
  tool:NAME     a tool definition (* for any characters: tool:mcp__*); kept where a conversation calls it
  result:TOOL   each call of TOOL with its result (result:Bash, result:mcp__*), in the turns before the one
                in progress
  kind:KIND     every item of that kind: skill_list, todo_list, memory_file, environment, reminder,
                few_shot, repo_map, chat_files, deferred_tools, agent_types (a reminder block inside the
                user's message, a section of a system message, or a whole message of the client's)
  system:N      system block N, from 0 (system: every system block)

Only the matched items leave; the user's own words are never one of them."""


@click.group("policy", help=HELP)
def command() -> None:
    pass


def _workbench(db_path: Path | None, config_path: Path | None):
    from ctxbench.service.workbench import Workbench

    return Workbench(resolve_db(db_path), get_config(config_path))


def _add(kind: str, target: str, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.service.proxy.policy import add_rule

    with _workbench(db_path, config_path) as wb:
        try:
            rule = add_rule(wb, kind, target)
        except ValueError as exc:
            fail(str(exc), 2)
    click.echo(rule.describe())


def _rule_command(kind: str, argument: str, help: str) -> None:
    """``ctxbench policy KIND ARGUMENT``: add (or replace) a rule of ``kind`` (``service.proxy.policy.add_rule``)."""

    @command.command(kind, help=help)
    @click.argument(argument)
    @db_option
    @config_option
    def rule_command(db_path: Path | None, config_path: Path | None, **values: str) -> None:
        _add(kind, values[argument], db_path, config_path)


_rule_command("drop", "target", DROP_HELP)
_rule_command("results", "tokens", "Keep the tool results of each proxied request within TOKENS: whole tool calls "
                                   "with their results are left out, oldest first (never the turn in progress's or "
                                   "a pinned one). Replaces an earlier results rule.")
_rule_command("budget", "tokens", "The meter's limit for every proxied conversation without one of its own (the "
                                  "proxy never cuts a request to fit it; overflow findings measure against it).")
_rule_command("mode", "mode", "A Context Mode for every proxied conversation without one of its own: its truncation "
                              "tiers cut long tool results.")


@command.command("list", help="List the rules, numbered (remove one with `ctxbench policy remove N`).")
@db_option
@config_option
def list_command(db_path: Path | None, config_path: Path | None) -> None:
    with _workbench(db_path, config_path) as wb:
        rules = wb.proxy_policy.rules()
    if not rules:
        click.echo("no policy: each proxied conversation has only its own drops, pins and mode")
    for rule in rules:
        click.echo(rule.describe())


@command.command("pin", help="Pin TEXT in every proxied request of every client: it is added to each request's "
                             "system prompt (after the client compacts its history too), labelled --label.")
@click.argument("text")
@click.option("--label", default="", help="What the pin is called in the request and the plans (default: its start).")
@db_option
@config_option
def pin_command(text: str, label: str, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.service.proxy.policy import pin_text

    with _workbench(db_path, config_path) as wb:
        try:
            rule = pin_text(wb, text, label)
        except ValueError as exc:
            fail(str(exc), 2)
    click.echo(rule.describe())


@command.command("remove", help="Remove rule N (as `ctxbench policy list` numbers it).")
@click.argument("n", type=click.IntRange(min=1))
@db_option
@config_option
def remove_command(n: int, db_path: Path | None, config_path: Path | None) -> None:
    with _workbench(db_path, config_path) as wb:
        if not wb.proxy_policy.remove(n):
            fail(f"no policy rule {n} (`ctxbench policy list` lists them)", 2)
    click.echo(f"removed policy rule {n}")


@command.command("slim", help="Slim the tool lists: show which tool definitions a proxied conversation (--session, "
                              "default the latest) sends and has never called, what leaving them out saves a "
                              "request and what it costs the prompt cache; with --yes, set the rule (drop tool:*: "
                              "every conversation leaves out the tools it has not called). Never automatic.")
@click.option("--session", "session_id", default=None, help="The proxied conversation to measure (default: the latest).")
@click.option("--yes", is_flag=True, help="Set the rule after showing what it does.")
@db_option
@config_option
def slim_command(session_id: str | None, yes: bool, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.service.proxy.policy import add_rule
    from ctxbench.service.proxy.slim import SLIM_RULE, slim_offer
    from ctxbench.service.workbench import Workbench

    with Workbench(stored_db(db_path, "no proxied conversation"), get_config(config_path)) as wb:
        session_id = session_id or wb.proxy.latest_session()
        offer = slim_offer(wb, session_id) if session_id else None
        if offer is None:
            fail(f"no recorded request of {session_id or 'any proxied conversation'} to measure", 2)
        click.echo(offer.text())
        if yes:
            click.echo(add_rule(wb, "drop", SLIM_RULE).describe())
        elif offer.tools:
            click.echo("nothing set: run again with --yes to leave them out")
