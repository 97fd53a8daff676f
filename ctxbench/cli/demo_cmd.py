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
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

from ctxbench.cli.common import get_config
from ctxbench.cli.open_cmd import check_model, run_workbench, workbench_options

SESSION_FILES = ("long_session.jsonl", "short_session.jsonl")


@dataclass(frozen=True)
class DemoFiles:
    repo: Path
    session_file: Path | None


def fixtures_dir() -> Path | None:
    """``fixtures/`` beside the package (a checkout or an editable install), or $CTXBENCH_FIXTURES."""
    env = os.environ.get("CTXBENCH_FIXTURES")
    candidates = [Path(env)] if env else []
    package_dir = Path(__file__).resolve().parent.parent
    candidates += [package_dir.parent / "fixtures", package_dir / "fixtures"]
    return next((c for c in candidates if (c / "demo_repo").is_dir()), None)


def demo_files(session_name: str | None = None) -> DemoFiles:
    """The demo repository and session; ctxbench's own source when the fixtures are not installed."""
    root = fixtures_dir()
    package_dir = Path(__file__).resolve().parent.parent
    if root is None:
        return DemoFiles(package_dir, None)
    names = (session_name,) if session_name else SESSION_FILES
    session = next((root / "sessions" / n for n in names if (root / "sessions" / n).is_file()), None)
    return DemoFiles(root / "demo_repo", session)


def offline(config):
    """The demo always talks to the offline model, whatever the config file says."""
    return dataclasses.replace(config, llm=dataclasses.replace(config.llm, provider="offline", model="offline",
                                                               base_url=""))


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
    from ctxbench.service.options import LaunchOptions

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
    check_model(config, options)
    try:
        if no_tui:
            print_demo_plan(options, config)
        else:
            run_workbench(options, config)
    finally:
        if tmp is not None:
            if keep_db:
                click.echo(f"demo database kept: {db_path}", err=True)
            else:
                shutil.rmtree(tmp, ignore_errors=True)


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
