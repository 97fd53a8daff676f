"""``ctxbench demo``: the workbench on the bundled demo repository and recorded session.

Works with no network and no configuration: the recorded session is imported into a
database of the demo's own (a temporary one unless ``--db`` is given), the repository is
``fixtures/demo_repo`` and the model is the offline one, whatever the config file and the
``CTXBENCH_LLM_*`` variables say. Only ``--base-url`` / ``--model`` given on the demo's own
command line point it at an endpoint. ``--no-tui`` prints the plan of the
session's last turn instead of opening the app (for terminals without a TUI, and CI).
"""
from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

import click

from ctxbench.cli.common import get_config
from ctxbench.cli.open_cmd import check_model, run_workbench, workbench_options
from ctxbench.service.demo import SESSION_FILES, demo_files, offline



@click.command(name="demo", help="Open the workbench on the bundled demo (offline model, no network, no config).")
@workbench_options
@click.option("--transcript", "session_name", type=click.Choice(SESSION_FILES), default=None,
              help="Which recorded session to load (default: the long one).")
@click.option("--no-tui", is_flag=True, help="Print the plan of the demo session's last turn instead of the app.")
@click.option("--keep-db", is_flag=True, help="Keep the temporary demo database and print its path.")
def command(db_path: Path | None, config_path: Path | None, session_id: str | None, new_session: bool,
            mode: str | None, budget: int | None, strategy: str | None, theme: str | None, no_index: bool,
            base_url: str | None, model: str | None, api_key_env: str | None, context_limit: int | None,
            timeout_s: float | None, session_name: str | None, no_tui: bool, keep_db: bool) -> None:
    from ctxbench.service import phase_log
    from ctxbench.service.options import LaunchOptions

    phase_log.mark("command")
    config = offline(get_config(config_path))
    files = demo_files(session_name)
    tmp: str | None = None
    if db_path is None:
        tmp = tempfile.mkdtemp(prefix="ctxbench-demo-")
        db_path = Path(tmp) / "demo.db"
    import_file = files.session_file if (session_id is None and not new_session) else None
    if import_file is not None and db_path.exists() and _has_sessions(db_path, config):
        import_file = None  # a demo database given again: open its latest session, do not import twice
    options = LaunchOptions(
        db_path=db_path, repo=files.repo, session_id=session_id, mode=mode, budget=budget, strategy=strategy,
        theme=theme, new_session=new_session and session_id is None, title=f"demo · {files.repo.name}",
        import_file=import_file, index_repo=not no_index,
        llm_base_url=base_url, llm_model=model, llm_api_key_env=api_key_env, llm_context_limit=context_limit,
        llm_timeout_s=timeout_s, llm_from_env=False,
    )
    digest = "" if no_index else _demo_digest(files)
    if digest:  # the session seeds its database from what an earlier demo kept (in its worker)
        from ctxbench.service.demo_seed import seed_file
        from ctxbench.service.demo_vectors import cache_file

        options = dataclasses.replace(options, kept_vectors=cache_file(digest),
                                      seed_db=seed_file(digest, config) if import_file is not None else None)
    check_model(config, options)
    try:
        if no_tui:
            print_demo_plan(options, config)
        else:
            run_workbench(options, config)
    finally:
        if digest:
            _keep_vectors(db_path, digest, config)
            if import_file is not None:
                _write_seed(files, digest, config, options.title, db_path)
        if tmp is not None:
            if keep_db:
                click.echo(f"demo database kept: {db_path}", err=True)
            else:
                shutil.rmtree(tmp, ignore_errors=True)


def _demo_digest(files) -> str:
    """The demo content's digest: what its kept vectors are filed under (``service.demo_vectors``)."""
    from ctxbench.service.demo_vectors import demo_digest

    return demo_digest(files)


def _keep_vectors(db_path: Path, digest: str, config) -> None:
    from ctxbench.service.demo_vectors import keep
    from ctxbench.service.workbench import Workbench

    try:
        with Workbench(db_path=db_path, config=config) as wb:
            keep(wb, digest)
    except OSError as exc:  # a full or read-only disk: the next demo embeds again, nothing else is lost
        click.echo(f"the demo's vectors were not kept: {exc}", err=True)


def _write_seed(files, digest: str, config, title: str, ran: Path) -> None:
    """Keep the demo's session imported and its repository indexed for the next start (once per content), with the
    token counts and maskings the demo that ran (database ``ran``) kept for it."""
    import sqlite3

    from ctxbench.service.demo_seed import seed_file, write_seed

    if seed_file(digest, config).is_file():
        return
    click.echo("keeping the demo's session and index for the next start…", err=True)
    try:
        write_seed(files, digest, config, title, derived_from=ran)
    except (OSError, sqlite3.Error) as exc:  # a full or read-only disk: the next demo imports and indexes again
        click.echo(f"the demo's session and index were not kept: {exc}", err=True)


def _has_sessions(db_path: Path, config) -> bool:
    from ctxbench.service.workbench import Workbench

    with Workbench(db_path=db_path, config=config) as wb:
        return bool(wb.sessions.list())


def print_demo_plan(options, config) -> None:
    """Open the demo session as the workbench would and print the plan of its last turn."""
    from ctxbench.cli.plan_cmd import render_plan
    from ctxbench.service.session import WorkbenchSession
    from ctxbench.tui.present import attachment_for

    session = WorkbenchSession(options, config)
    try:
        snapshot = session.open()
        session.attach_repository(lambda progress: None)
        view = session.plan(store=True)
        click.echo(f"session {snapshot.session_id} · {snapshot.title} · {len(snapshot.history)} messages")
        render_plan(view.plan, footer=attachment_for(view.plan).text())
    finally:
        session.close()
