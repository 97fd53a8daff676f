"""``ctxbench chat MESSAGE``: one turn with the tool loop, headless.

The reply streams to stdout; tool calls, retries and the usage badge go to stderr. Everything is
stored (the user's message first, the plans, tool calls and results, usage, state). ``--json``
prints ``{session_id, plan_id, reply, usage: {estimated_prompt_tokens, reported_prompt_tokens}}``
once the turn is done. When the endpoint fails the command exits 1 with a one-line reason that
names the session holding the stored message (``--session ID`` continues it). An empty message
is refused (exit 2) before anything is stored.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config, resolve_db

EXIT_INTERRUPTED = 130


@click.command("chat", help="Run one turn (with the tool loop) against the configured model and print the reply.")
@click.argument("message")
@click.option("--session", "session_id", default=None, help="Continue this session (default: a new one).")
@click.option("--repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Repository whose code index feeds retrieval and request_code_context.")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1.")
@click.option("--model", default=None, help="Model name at that endpoint.")
@click.option("--api-key-env", default=None, help="Name of the environment variable holding the API key.")
@click.option("--context-limit", type=click.IntRange(min=1), default=None,
              help="The model's context window in tokens (default: $CTXBENCH_LLM_CONTEXT_LIMIT or [llm] context_limit).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds to wait for the endpoint (default: $CTXBENCH_LLM_TIMEOUT or [llm] timeout_s).")
@click.option("--mode", default=None,
              help="Context Mode for this turn: off, light, heavy or one defined in the config.")
@click.option("--budget", type=click.IntRange(min=1), default=None, help="Token budget for this turn's plans.")
@click.option("--semantic/--no-semantic", default=True,
              help="With --repo: load the embedding model and wait for it (default), or retrieve with keyword "
                   "and graph only and no model.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of the streamed reply.")
@db_option
@config_option
def command(message: str, session_id: str | None, repo: Path | None, base_url: str | None, model: str | None,
            api_key_env: str | None, context_limit: int | None, timeout_s: float | None, mode: str | None,
            budget: int | None, semantic: bool, as_json: bool, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.config import ConfigError
    from ctxbench.records.errors import ProviderError, UnknownSession
    from ctxbench.records.turns import ReplyDelta, Retrying, ToolFinished, ToolStarted, TurnFinished, UsageRecorded
    from ctxbench.records.errors import EmbedderError
    from ctxbench.service.attach import attach_repository
    from ctxbench.service.model import make_runner, resolve_model
    from ctxbench.service.session import CancelToken
    from ctxbench.service.workbench import Workbench

    if not message.strip():
        fail("empty message: say something to the model", 2)
    config = get_config(config_path)
    if mode is not None:
        try:
            config.planner.mode(mode)  # before anything is stored
        except ConfigError as exc:
            fail(str(exc), 2)
    try:
        config = resolve_model(config, base_url=base_url, model=model, api_key_env=api_key_env,
                               context_limit=context_limit, timeout_s=timeout_s)
    except ProviderError as exc:
        fail(str(exc), 2)
    cancel = CancelToken()
    finished: TurnFinished | None = None
    try:
        with Workbench(resolve_db(db_path), config, repo=repo) as wb:
            attached = attach_repository(wb, repo, semantic=semantic) if repo is not None else None
            if session_id is None:
                session_id = wb.new_session(" ".join(message.split())[:60], repo)
            else:
                wb.sessions.info(session_id)
            runner = make_runner(wb, config, attached.code if attached is not None else None)
            out = _Out()
            try:
                for event in runner.run(session_id, message, cancel=cancel, mode=mode, budget=budget):
                    if isinstance(event, TurnFinished):
                        finished = event
                    elif as_json:
                        continue  # only the summary is printed
                    elif isinstance(event, ReplyDelta):
                        out.text(event.text)
                    elif isinstance(event, ToolStarted):
                        out.note(f"· {event.call.name} {_short(event.call.arguments)}")
                    elif isinstance(event, ToolFinished) and not event.ok:
                        out.note(f"  {event.call.name} failed: {_short(event.message.content)}")
                    elif isinstance(event, Retrying):
                        out.note(f"· retrying in {event.wait_s:.1f}s after: {event.reason}")
                    elif isinstance(event, UsageRecorded) and event.usage.mismatch:
                        out.note(f"· {event.usage.badge}")
            except KeyboardInterrupt:
                cancel.cancel()
                out.end_line()
                fail(f"interrupted; the partial reply is stored (session {session_id})", EXIT_INTERRUPTED)
            out.end_line()
    except UnknownSession as exc:
        fail(str(exc), 2)
    except EmbedderError as exc:
        fail(f"{exc} (--no-semantic chats without the model)", 1)
    assert finished is not None
    if finished.status != "ok":
        kept = "; the partial reply is stored" if finished.reply else ""
        fail(f"{finished.error or finished.status}{kept} (session {finished.session_id})", 1)
    if as_json:
        usage = finished.usage
        emit_json({
            "session_id": finished.session_id,
            "plan_id": finished.plan_ids[-1] if finished.plan_ids else None,
            "plan_ids": list(finished.plan_ids),
            "reply": finished.reply,
            "usage": {
                "estimated_prompt_tokens": usage.estimated if usage else None,
                "reported_prompt_tokens": usage.reported if usage else None,
                "mismatch": usage.mismatch if usage else False,
            },
            "state_block": finished.state_block,
        })
        return
    plan_id = finished.plan_ids[-1] if finished.plan_ids else None
    where = f"session {finished.session_id}" + (f" · plan {plan_id}" if plan_id else "")
    click.echo(f"{where} (continue with --session {finished.session_id}"
               + (f"; ctxbench show {plan_id} --messages prints what was sent)" if plan_id else ")"), err=True)


class _Out:
    """The reply on stdout as it streams, notes on stderr, each note on a line of its own."""

    def __init__(self) -> None:
        self.mid_line = False

    def text(self, piece: str) -> None:
        click.echo(piece, nl=False)
        sys.stdout.flush()
        if piece:
            self.mid_line = not piece.endswith("\n")

    def end_line(self) -> None:
        if self.mid_line:
            click.echo("")
            self.mid_line = False

    def note(self, line: str) -> None:
        self.end_line()
        click.echo(line, err=True)


def _short(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
