"""The command reference (``docs/cli-reference.md``), generated from the commands themselves.

Every command's ``--help`` text, in the order ``ctxbench --help`` lists them, subcommands under their group,
so the page cannot say anything the code does not. ``tests/unit/project/test_docs.py`` compares the file with what this
module renders; regenerate it after changing a command::

    python -m ctxbench.cli.reference --write
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli-reference.md"
WIDTH = 110  # help text is wrapped at this width, whatever the terminal that renders the page

HEADER = """# Command reference

Generated from the code by `python -m ctxbench.cli.reference --write`; a test fails when this page and the
commands disagree. What the commands are for, with examples: [Commands](commands.md).
"""


def _help(command: click.Command, path: list[str], parent: click.Context | None) -> str:
    ctx = click.Context(command, info_name=path[-1], parent=parent, terminal_width=WIDTH, max_content_width=WIDTH)
    return command.get_help(ctx)


def _walk(command: click.Command, path: list[str], parent: click.Context | None):
    ctx = click.Context(command, info_name=path[-1], parent=parent, terminal_width=WIDTH, max_content_width=WIDTH)
    yield path, _help(command, path, parent)
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, [*path, name], ctx)


def render() -> str:
    """The whole page, as ``--write`` saves it."""
    from ctxbench.cli import main

    parts = [HEADER]
    for path, text in _walk(main, ["ctxbench"], None):
        title = " ".join(path)
        parts.append(f"\n## `{title}`\n\n```text\n{text.rstrip()}\n```\n")
    return "".join(parts)


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxbench.cli.reference", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {PAGE.name} instead of printing it")
    args = parser.parse_args(argv)
    page = render()
    if args.write:
        PAGE.write_text(page, encoding="utf-8")
        print(f"wrote {PAGE}", file=sys.stderr)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
