"""The ``ctxbench`` command line. Commands live one per module and are imported lazily,
so ``ctxbench --help`` and quick commands never pay for textual, torch or faiss."""
from __future__ import annotations

import importlib
import os
import sys

import click

# command name -> "module:attribute"; each module owns one command.
COMMANDS: dict[str, str] = {
    "import": "ctxbench.cli.import_cmd:command",
    "sessions": "ctxbench.cli.sessions_cmd:command",
    "plan": "ctxbench.cli.plan_cmd:command",
    "show": "ctxbench.cli.show_cmd:command",
    "index": "ctxbench.cli.index_cmd:command",
    "retrieve": "ctxbench.cli.retrieve_cmd:command",
    "bench": "ctxbench.cli.bench_cmd:command",
    "demo": "ctxbench.cli.demo_cmd:command",
    "chat": "ctxbench.cli.chat_cmd:command",
    "replay": "ctxbench.cli.replay_cmd:command",
    "open": "ctxbench.cli.open_cmd:command",
    "branch": "ctxbench.cli.branch_cmd:command",
    "diff": "ctxbench.cli.diff_cmd:command",
    "export": "ctxbench.cli.export_cmd:command",
    "proxy": "ctxbench.cli.proxy_cmd:command",
    "wrap": "ctxbench.cli.wrap_cmd:command",
    "mcp": "ctxbench.cli.mcp_cmd:command",
    "serve": "ctxbench.cli.serve_cmd:command",
    "compact": "ctxbench.cli.compact_cmd:command",
    "capsules": "ctxbench.cli.capsules_cmd:command",
    "policy": "ctxbench.cli.policy_cmd:command",
}

STORE_ERROR_EXIT = 2  # the database given (--db, $CTXBENCH_DB) cannot be opened or used

HELP = """ctxbench: see and steer what goes into an LLM coding assistant's context window.

Run without a command to open the workbench on the repository in the current directory."""


class LazyGroup(click.Group):
    """A click group whose commands are imported only when used."""

    registry: dict[str, str] = COMMANDS

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in self.registry if _importable(self.registry[name]))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = self.registry.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        return getattr(module, attr)


    def invoke(self, ctx: click.Context) -> object:
        """Run the command; a store that cannot be opened or used is a one-line error (exit 2) for every command, a
        full disk one too (exit 1)."""
        import sqlite3

        from ctxbench.records.errors import StoreError, disk_full, is_disk_full

        try:
            return super().invoke(ctx)
        except StoreError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(getattr(exc, "exit_code", STORE_ERROR_EXIT))
        except (sqlite3.Error, OSError) as exc:  # a write outside a transaction() that found the disk full
            if isinstance(exc, sqlite3.DatabaseError) and "malformed" in str(exc):  # a damaged page met on the way
                click.echo(f"error: the database is damaged ({exc}); restore a copy, or try sqlite3's .recover",
                           err=True)
                ctx.exit(STORE_ERROR_EXIT)
            if not is_disk_full(exc):
                raise
            full = disk_full()
            click.echo(f"error: {full}", err=True)
            ctx.exit(full.exit_code)


def _importable(target: str) -> bool:
    module_name = target.split(":")[0]
    return importlib.util.find_spec(module_name) is not None


@click.group(cls=LazyGroup, invoke_without_command=True, help=HELP)
@click.version_option(package_name="ctxbench")
@click.pass_context
def main(ctx: click.Context, **workbench_options: object) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    given = {k: v for k, v in workbench_options.items() if v not in (None, False)}
    if ctx.invoked_subcommand is None:
        from ctxbench.cli.open_cmd import command as open_command

        ctx.invoke(open_command, **workbench_options)
    elif given:
        opts = {p.name: p.opts[0] for p in main.params}
        flags = ", ".join(opts.get(k, k) for k in given)
        raise click.UsageError(f"{flags} before a command only apply to the workbench; "
                               f"put them after '{ctx.invoked_subcommand}'")


def _attach_workbench_options() -> None:
    """``ctxbench --db X --mode heavy`` opens the workbench: the group takes ``open``'s flags."""
    from ctxbench.cli.open_cmd import command as open_command

    known = {p.name for p in main.params}
    main.params.extend(p for p in open_command.params if p.name not in known)


_attach_workbench_options()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
