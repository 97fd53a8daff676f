"""``ctxbench`` / ``ctxbench open``: the workbench on the repository in the current directory.

Opens the most recent session of that repository, or a new one. Only click and the config
are imported here; the app module (textual) is imported when the command runs, and the
engine only inside the app's workers, so the first paint never waits for them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import click

from ctxbench.cli.common import TOKENS, config_option, db_option, get_config

from ctxbench.records.vocab import STRATEGIES


def workbench_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The flags ``open`` and ``demo`` share."""
    options = [
        db_option,
        config_option,
        click.option("--session", "session_id", default=None, help="Open this session id."),
        click.option("--new", "new_session", is_flag=True, help="Start a new session."),
        click.option("--mode", default=None,
                     help="Context Mode (remembered by the session): off, light, heavy or one defined in the config."),
        click.option("--budget", type=TOKENS, default=None, help="Token budget of the plan."),
        click.option("--strategy", type=click.Choice(STRATEGIES), default=None, help="History strategy."),
        click.option("--theme", default=None, help="Theme name (ctxbench-dark, ctxbench-light, or any Textual theme)."),
        click.option("--no-index", is_flag=True, help="Do not index the repository (plans carry no symbol cards)."),
        click.option("--base-url", default=None,
                     help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (Ollama) or a vLLM server."),
        click.option("--model", default=None, help="Model name at that endpoint (shown in the status line)."),
        click.option("--api-key-env", default=None,
                     help="Name of the environment variable holding the API key (the key is never stored)."),
        click.option("--context-limit", type=TOKENS, default=None,
                     help="The model's context window in tokens (a plan needing more is not sent)."),
        click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="Seconds to wait for the endpoint before retrying."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def find_repo_root(start: Path) -> Path:
    """The enclosing repository (a folder holding .git, .hg or .svn), else ``start`` itself."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in (".git", ".hg", ".svn")):
            return folder
    return start


def check_model(config, options) -> None:
    """Fail with a one-line reason before the app starts when the model flags cannot make a client, or
    ``--mode`` names no Context Mode of the config."""
    from ctxbench.cli.common import fail
    from ctxbench.config import ConfigError
    from ctxbench.records.errors import ProviderError
    from ctxbench.service.model import resolve_model

    if options.mode is not None:
        try:
            config.planner.mode(options.mode)
        except ConfigError as exc:
            fail(str(exc), 2)
    try:
        resolve_model(config, from_env=options.llm_from_env, **options.llm_flags())
    except ProviderError as exc:
        fail(str(exc), 2)


def proxied_session(db_path: Path | None, config, session_id: str | None) -> str:
    """The proxied conversation ``open --watch`` follows: ``session_id`` (checked) or the newest one."""
    from ctxbench.cli.common import fail, resolve_db
    from ctxbench.service.workbench import Workbench

    with Workbench(resolve_db(db_path), config) as wb:
        if session_id is None:
            session_id = wb.proxy.latest_session()
            if session_id is None:
                fail("no proxied conversation yet: start `ctxbench proxy --upstream URL`, point your assistant "
                     "at it, and send a request", 2)
        elif wb.proxy.conversation(session_id) is None:
            fail(f"session {session_id} is not a proxied conversation (see `ctxbench sessions`)", 2)
    return str(session_id)


def run_workbench(options, config) -> None:
    from ctxbench.tui.app import CtxbenchApp

    app = CtxbenchApp(options, config)
    app.run()
    if app.return_code not in (None, 0):
        raise SystemExit(app.return_code)


@click.command(name="open", help="Open the workbench on a repository (default: the one in the current directory).")
@click.option("--repo", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Repository to work on (default: the enclosing repository of the current directory).")
@click.option("--watch", is_flag=True,
              help="Follow a proxied conversation live (ctxbench proxy): its newest one, or --session ID.")
@workbench_options
def command(repo: Path | None, watch: bool, db_path: Path | None, config_path: Path | None, session_id: str | None,
            new_session: bool, mode: str | None, budget: int | None, strategy: str | None, theme: str | None,
            no_index: bool, base_url: str | None, model: str | None, api_key_env: str | None,
            context_limit: int | None, timeout_s: float | None) -> None:
    from ctxbench.service.options import LaunchOptions

    from ctxbench.cli.repo_support import fit_root

    config = get_config(config_path)
    root = repo.resolve() if repo is not None else find_repo_root(Path.cwd())
    if watch:
        session_id = proxied_session(db_path, config, session_id)
    else:
        root = fit_root(root)
    options = LaunchOptions(
        db_path=db_path, repo=None if watch else root, session_id=session_id, mode=mode, budget=budget,
        strategy=strategy, theme=theme, new_session=new_session and not watch, title=root.name,
        index_repo=not no_index and not watch, watch=watch,
        llm_base_url=base_url, llm_model=model, llm_api_key_env=api_key_env, llm_context_limit=context_limit,
        llm_timeout_s=timeout_s,
    )
    check_model(config, options)
    run_workbench(options, config)

