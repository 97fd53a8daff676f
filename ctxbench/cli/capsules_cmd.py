"""``ctxbench capsules``: list, build and show the capsules of code of indexed repositories (seed 002)."""
from __future__ import annotations

from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config, resolve_db

HELP = """List the capsules of code: short summaries of a module or of a process (an entry point and the calls it
makes), each with its source (extractive or model:NAME), confidence, when it was generated and the content hash
of every file it covers. A capsule whose covered file changed since is STALE (the index marks it when it sees
the change) and is shown dimmed with the file that changed. Capsules are a retrieval aid and the scaffold's
anchors, never ground truth.

--build writes the capsules a repository is missing and refreshes its stale ones (--rebuild: all of them):
extractive from docstrings and signatures by default (offline, deterministic), or written by the configured
model with --model. The repository must be indexed first (ctxbench index)."""


@click.command("capsules", help=HELP)
@click.option("--repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Only this repository's capsules (default: every indexed repository's; with --build: the "
                   "current directory).")
@click.option("--stale", is_flag=True, help="List only the stale capsules.")
@click.option("--build", is_flag=True, help="Write missing capsules and refresh stale ones first.")
@click.option("--rebuild", is_flag=True, help="With --build: write every capsule again, fresh ones too.")
@click.option("--model", "use_model", is_flag=True,
              help="With --build: the configured model ([llm]) writes the capsules, not the extractive builder.")
@click.option("--base-url", default=None, help="With --model: OpenAI-compatible endpoint that writes them.")
@click.option("--model-name", default=None, help="With --model: the model name at that endpoint.")
@click.option("--show", "show", default=None, metavar="ID", help="Print one capsule in full (c12 or 12).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (every field, the files with their hashes).")
@db_option
@config_option
def command(repo: Path | None, stale: bool, build: bool, rebuild: bool, use_model: bool, base_url: str | None,
            model_name: str | None, show: str | None, as_json: bool, db_path: Path | None,
            config_path: Path | None) -> None:
    from ctxbench.cli.repo_support import stderr_progress
    from ctxbench.records.errors import NotFound, ProviderError
    from ctxbench.service.capsules import CapsuleService, capsule_view
    from ctxbench.service.model import resolve_model
    from ctxbench.service.workbench import Workbench

    config = get_config(config_path)
    if (rebuild or use_model) and not build:
        fail("--rebuild and --model change how capsules are written: use them with --build", 2)
    if (base_url or model_name) and not use_model:
        fail("--base-url and --model-name choose the model of --model: add --model", 2)
    if show is not None and (build or stale):
        fail("--show prints one capsule: it takes no --build or --stale", 2)
    try:
        if base_url or model_name:
            config = resolve_model(config, base_url=base_url, model=model_name)
    except ProviderError as exc:
        fail(str(exc), 2)
    try:
        with Workbench(resolve_db(db_path), config) as wb:
            service = CapsuleService(wb, config)
            if show is not None:
                number = show[1:] if show[:1] in ("c", "C") else show
                if not number.isdigit():
                    fail(f"a capsule id is c12 or 12, not {show!r}", 2)
                capsule = service.get(int(number))
                if as_json:
                    emit_json(capsule.to_json())
                else:
                    click.echo(capsule_view(capsule))
                return
            built = None
            if build:
                with stderr_progress(quiet=as_json) as tick:
                    progress = None if tick is None else (lambda subject, done, total: tick("capsules", done, total))
                    built = service.build(repo or Path.cwd(), use_model=use_model, rebuild=rebuild, progress=progress)
                repo = Path(built.repo)
            capsules = service.list(repo, stale=True if stale else None)
    except NotFound as exc:
        fail(str(exc), 2)
        return
    except ProviderError as exc:
        fail(str(exc))
        return
    if as_json:
        data = {"capsules": [c.to_json() for c in capsules]}
        if built is not None:
            data = {"build": {k: v for k, v in built.to_json().items() if k != "written"}
                    | {"written": [c.id for c in built.written]}, **data}
        emit_json(data)
        return
    if built is not None:
        click.echo(f"built capsules of {built.repo} ({built.source}): {len(built.written)} written, {built.kept} "
                   f"fresh kept" + (f", {built.removed} removed (their module is gone)" if built.removed else ""))
        for line in built.calls:
            click.echo(f"  model call {line}")
    _listing(capsules, stale, config.capsules.headline_chars)


def _listing(capsules, only_stale: bool, headline_chars: int) -> None:
    if not capsules:
        click.echo("no stale capsules" if only_stale else
                   "no capsules yet: build them with `ctxbench capsules --build --repo PATH`")
        return
    by_repo: dict[str, list] = {}
    for c in capsules:
        by_repo.setdefault(c.repo, []).append(c)
    for root, found in by_repo.items():
        stale = sum(1 for c in found if c.stale)
        noun = "capsule" if len(found) == 1 else "capsules"
        what = f"stale {noun}" if only_stale else f"{noun} ({stale} stale)"
        click.echo(f"{root}: {len(found)} {what}")
        width = max(len(c.title) for c in found)
        for c in found:
            head = f"  {c.label:<5} {c.title:<{width}}  {c.source:<12} {c.confidence:.2f}  {c.generated_at[:10]}  "
            if c.stale:
                click.echo(click.style(head + f"STALE: {c.stale_note()}", dim=True))
            else:
                click.echo(head + c.headline(headline_chars))
