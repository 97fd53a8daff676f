"""``ctxbench chat MESSAGE``: one turn with the tool loop, headless.

The reply streams to stdout; tool calls, retries and the usage badge go to stderr. Everything is
stored (the user's message first, the plans, tool calls and results, usage, state). ``--json``
prints ``{session_id, plan_id, reply, usage: {estimated_prompt_tokens, reported_prompt_tokens,
cache_read_input_tokens, cache_creation_input_tokens, ...}}``
once the turn is done. When the endpoint fails the command exits 1 with a one-line reason; a budget too small
for what every call must send (system prompt, tool definitions, the message, sticky pins) is refused before
anything is sent (exit 2), never sent over budget. A turn
that got no reply at all leaves nothing behind in a new session (the session is removed: the message
is still on the command line) and, in a continued one, is kept but left out of later plans (flagged
``unanswered``), so the next turn never sends two user messages in a row; a partial reply is always
stored and the line names its session (``--session ID`` continues it). SIGTERM stores the partial
reply like Ctrl-C does, and so does SIGHUP (the terminal closed); a reply is saved as it streams, so even
``kill -9`` leaves its text, and the next turn settles a turn that ended with its process (its message, if
unanswered, is flagged and left out; see :class:`ctxbench.records.turns.TurnRecovered`). Two ``chat`` turns on one session take turns: the second says it waits. An
empty message is refused (exit 2) before anything is stored.
"""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from ctxbench.cli.common import TOKENS, config_option, db_option, emit_json, fail, get_config, resolve_db

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM
EXIT_HUNG_UP = 129  # 128 + SIGHUP


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (the terminal closed), raised where Ctrl-C would be, so the partial reply is stored the
    same way."""

    def __init__(self, how: str = "terminated", code: int = EXIT_TERMINATED) -> None:
        super().__init__(how)
        self.how, self.code = how, code


def _on_sigterm(signum: int, frame: object) -> None:
    if signum == getattr(signal, "SIGHUP", None):
        raise _Terminated("hung up (the terminal closed)", EXIT_HUNG_UP)
    raise _Terminated()


@click.command("chat", help="Run one turn (with the tool loop) against the configured model and print the reply.")
@click.argument("message")
@click.option("--session", "session_id", default=None, help="Continue this session (default: a new one).")
@click.option("--repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Repository whose code index feeds retrieval and request_code_context.")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1.")
@click.option("--model", default=None, help="Model name at that endpoint.")
@click.option("--api-key-env", default=None, help="Name of the environment variable holding the API key.")
@click.option("--context-limit", type=TOKENS, default=None,
              help="The model's context window in tokens (default: $CTXBENCH_LLM_CONTEXT_LIMIT or [llm] context_limit).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds to wait for the endpoint (default: $CTXBENCH_LLM_TIMEOUT or [llm] timeout_s).")
@click.option("--deadline", "reply_deadline_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds one model call may take in all, streaming included; the reply so far is kept "
                   "(default: $CTXBENCH_LLM_DEADLINE or [llm] reply_deadline_s).")
@click.option("--max-reply-tokens", type=click.IntRange(min=1), default=None,
              help="Reply-token cap sent as max_tokens (default: $CTXBENCH_LLM_MAX_REPLY_TOKENS or "
                   "[llm] max_reply_tokens).")
@click.option("--mode", default=None,
              help="Context Mode: off, light, heavy or one defined in the config; kept for the session's later turns.")
@click.option("--budget", type=TOKENS, default=None,
              help="Token budget of the plans; kept for the session's later turns.")
@click.option("--semantic/--no-semantic", default=True,
              help="With --repo: load the embedding model and wait for it (default), or retrieve with keyword "
                   "and graph only and no model.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of the streamed reply.")
@db_option
@config_option
def command(message: str, session_id: str | None, repo: Path | None, base_url: str | None, model: str | None,
            api_key_env: str | None, context_limit: int | None, timeout_s: float | None,
            reply_deadline_s: float | None, max_reply_tokens: int | None, mode: str | None,
            budget: int | None, semantic: bool, as_json: bool, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.config import ConfigError
    from ctxbench.records.errors import ProviderError, UnknownSession
    from ctxbench.records.turns import (ReplyDelta, Retrying, ToolFinished, ToolStarted, TurnFailed, TurnFinished,
                                        TurnRecovered, TurnStarted, TurnWaiting, UsageRecorded)
    from ctxbench.records.errors import EmbedderError
    from ctxbench.service.attach import attach_repository
    from ctxbench.service.model import make_runner, resolve_model
    from ctxbench.service.session import CancelToken
    from ctxbench.service.workbench import Workbench

    if not message.strip():
        fail("empty message: say something to the model", 2)
    config = get_config(config_path)
    if repo is not None:
        from ctxbench.cli.repo_support import fit_root

        fit_root(repo)  # a folder that is no repository: refused before anything is stored
    if mode is not None:
        try:
            config.planner.mode(mode)  # before anything is stored
        except ConfigError as exc:
            fail(str(exc), 2)
    try:
        config = resolve_model(config, base_url=base_url, model=model, api_key_env=api_key_env,
                               context_limit=context_limit, timeout_s=timeout_s,
                               reply_deadline_s=reply_deadline_s, max_reply_tokens=max_reply_tokens)
    except ProviderError as exc:
        fail(str(exc), 2)
    cancel = CancelToken()
    finished: TurnFinished | None = None
    refused = False  # the plan did not fit the budget: nothing was sent (bad input, exit 2)
    checks: list = []  # every call's usage: the turn's cost where the model's price is known
    new_session = session_id is None
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
        if hasattr(signal, "SIGHUP"):
            signal.signal(signal.SIGHUP, _on_sigterm)
    except ValueError:  # not the main thread (an embedding caller): SIGTERM and SIGHUP keep their default
        pass
    try:
        with Workbench(resolve_db(db_path), config, repo=repo) as wb:
            attached = None
            if repo is not None:
                from ctxbench.cli.repo_support import NO_SEMANTIC, checked_repository

                checked_repository(wb, repo, quiet=as_json)
                attached = attach_repository(wb, repo, semantic=semantic, semantic_off=NO_SEMANTIC)
            if session_id is None:
                runner = make_runner(wb, config, attached.code if attached is not None else None)
                session_id = wb.new_session(" ".join(message.split())[:60], repo)
            else:
                wb.sessions.info(session_id)
                runner = make_runner(wb, config, attached.code if attached is not None else None)
            out = _Out()
            group_id: int | None = None
            turn = runner.run(session_id, message, cancel=cancel, mode=mode, budget=budget)
            try:
                for event in turn:
                    if isinstance(event, TurnStarted):
                        group_id = event.group_id
                    if isinstance(event, TurnFailed) and event.kind == "over_budget":
                        refused = True
                    if isinstance(event, UsageRecorded):
                        checks.append(event.usage)
                    if isinstance(event, TurnFinished):
                        finished = event
                    elif isinstance(event, TurnRecovered):
                        out.note(f"· {event.note}")
                    elif isinstance(event, TurnWaiting):
                        out.note(f"· another turn of session {session_id} is running ({event.holder}); "
                                 "waiting for it to finish…")
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
            except KeyboardInterrupt as exc:
                cancel.cancel()
                turn.close()  # the runner stores the partial reply (or marks the message unanswered) first
                out.end_line()
                how, code = ((exc.how, exc.code) if isinstance(exc, _Terminated)
                             else ("interrupted", EXIT_INTERRUPTED))
                fail(f"{how}; {_kept(wb, session_id, group_id, new_session)}", code)
            out.end_line()
            if finished is not None and finished.status != "ok":
                kept = _kept(wb, session_id, group_id, new_session)
            elif finished is not None and (mode is not None or budget is not None):
                # the session's settings from now on (as `open --mode` does): the next turn plans the same way
                wb.update_settings(session_id, **{k: v for k, v in (("mode", mode), ("budget", budget)) if v is not None})
    except UnknownSession as exc:
        fail(str(exc), 2)
    except EmbedderError as exc:
        fail(f"{exc} (--no-semantic chats without the model)", 1)
    assert finished is not None
    if finished.status != "ok":
        fail(f"{finished.error or finished.status}; {kept}", 2 if refused else 1)
    from ctxbench.records.turns import cost_text, turn_cost

    cost = turn_cost(checks)  # None unless the model's price is known ([[llm.prices]]): never a guess
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
                "cache_read_input_tokens": usage.cache_read if usage else None,
                "cache_creation_input_tokens": usage.cache_write if usage else None,
                "mismatch": usage.mismatch if usage else False,
                "reply_tokens": sum(c.completion or 0 for c in checks) if checks else None,
                "cost_usd": round(cost, 6) if cost is not None else None,
            },
            "state_block": finished.state_block,
        })
        return
    plan_id = finished.plan_ids[-1] if finished.plan_ids else None
    kept_settings = " and ".join(f"{name} {value}" for name, value in (("mode", mode), ("budget", budget))
                                 if value is not None)
    where = (f"session {finished.session_id}" + (f" · plan {plan_id}" if plan_id else "")
             + (f" · cost {cost_text(cost)}" if cost is not None else "")
             + (f" · {kept_settings} kept for the session" if kept_settings else ""))
    click.echo(f"{where} (continue with --session {finished.session_id}"
               + (f"; ctxbench show {plan_id} --messages prints what was sent)" if plan_id else ")"), err=True)


def _kept(wb: object, session_id: str, group_id: int | None, new_session: bool) -> str:
    """What a turn (``group_id``, None when it never started) that did not finish left behind, for its error
    line. A new session that got no reply at all is removed (nothing in it but the message on the command
    line)."""
    from ctxbench.records.vocab import UNANSWERED_FLAG

    messages = wb.messages.all(session_id)  # type: ignore[attr-defined]
    turn = [m for m in messages if m.group_id == group_id]
    if any(m.role == "assistant" for m in turn):
        partial = any(m.partial for m in turn if m.role == "assistant")
        return f"{'the partial reply is' if partial else 'what arrived is'} stored (session {session_id})"
    if new_session and all(m.role == "user" and UNANSWERED_FLAG in m.flags for m in messages):
        wb.delete_session(session_id)  # type: ignore[attr-defined]
        return "no reply, so nothing was stored (the new session was removed)"
    return (f"the message is kept in session {session_id} but, unanswered, left out of later plans "
            "(/context restore brings it back)")


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
