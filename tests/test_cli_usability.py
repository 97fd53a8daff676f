"""What a user meets at the command line: every option explains itself, progress does not garble logs."""
import click
from click.testing import CliRunner

from ctxbench import cli


def _all_commands(group: click.Group, ctx: click.Context, prefix: str = ""):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        path = f"{prefix}{name}"
        yield path, command
        if isinstance(command, click.Group):
            yield from _all_commands(command, click.Context(command, parent=ctx), f"{path} ")


def test_every_option_of_every_command_has_help():
    ctx = click.Context(cli.main)
    missing = [f"{path} {'/'.join(param.opts)}"
               for path, command in [("", cli.main), *_all_commands(cli.main, ctx)]
               for param in command.params
               if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()]
    assert missing == []
