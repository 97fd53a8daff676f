"""``ctxbench import FILE``: a recorded transcript becomes a new session (all or nothing)."""
from __future__ import annotations

from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, fail, get_config, resolve_db


@click.command("import", help="Import a transcript as a new session: OpenAI messages as JSONL (--format openai), "
               "a Claude Code session file (--format claude-code) or aider's .aider.chat.history.md "
               "(--format aider). The last line of output is the new session id.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", default="openai", show_default=True,
              help="Transcript format: openai, claude-code or aider.")
@click.option("--title", default=None, help="Session title (default: the file name).")
@db_option
@config_option
def command(file: Path, fmt: str, title: str | None, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.service.workbench import TRANSCRIPT_FORMATS, Workbench
    from ctxbench.records.transcripts import TranscriptError

    if fmt not in TRANSCRIPT_FORMATS:
        fail(f"transcript format {fmt!r} is not supported; supported: {', '.join(sorted(TRANSCRIPT_FORMATS))}", 2)
    config = get_config(config_path)
    try:
        with Workbench(resolve_db(db_path), config) as wb:
            wb.check_store()  # a damaged page is refused before anything is written
            session_id = wb.import_file(file, fmt, title=(title or "").strip() or None)
            info = wb.sessions.info(session_id)
    except TranscriptError as exc:
        fail(f"{file}: {exc}; nothing imported" if exc.line else f"{exc}; nothing imported", 2)
    click.echo(f"imported {info.message_count} messages in {info.group_count} groups from {file.name}")
    click.echo(session_id)
