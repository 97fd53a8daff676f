"""``ctxbench plan QUERY``: build, store and show the ContextPlan for a user turn.

With ``--transcript FILE`` the transcript is imported into the database as a session titled
``transcript: NAME`` (the session id is said on stderr) and the plan is stored there, so ``show
PLAN_ID`` works afterwards; planning over the same, unchanged transcript again reuses that session.

With ``--repo PATH`` the repository is indexed first (incrementally) and the plan gets its
orientation scaffold and the symbol cards retrieval finds for the query; the embedding model is
loaded and waited for unless ``--no-semantic``.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config, resolve_db
from ctxbench.config import MAX_TOKENS
from ctxbench.records.plans import ContextPlan
from ctxbench.records.sessions import SessionSettings
from ctxbench.records.vocab import EMBEDDING_STRATEGIES, NO_MODE, STRATEGIES
from ctxbench.records.item_refs import card_symbol

if TYPE_CHECKING:  # the CLI imports the service when a command runs
    from ctxbench.config import Config
    from ctxbench.service.workbench import Workbench

TRANSCRIPT_TITLE = "transcript: {name}"
EMPTY_QUERY = "empty query: say what to plan or search for"
MIN_LABEL_WIDTH = 20
TITLE_CHARS = 60  # characters of the query a new session is titled with
TABLE_CHROME = 24  # cell padding, column gaps and edges of the plan table, in characters


def render_plan(plan: ContextPlan, *, footer: str = "", origin=None) -> None:
    """Print a plan as a readable header and one table row per item (included first)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(width=max(120, Console().width), highlight=False, soft_wrap=False)
    share = f"{100.0 * plan.used_tokens / plan.budget:.1f}%" if plan.budget else "-"
    console.print(Text(f"plan {plan.plan_id}   session {plan.session_id}" + _branch_line(origin)))
    console.print(Text(f"query: {plan.query}"))
    console.print(Text(
        f"mode {plan.mode or NO_MODE} · strategy {plan.strategy} · budget {plan.budget} · used {plan.used_tokens} "
        f"({share})"
        + (" · estimated counts" if plan.estimated else "")
    ))
    if plan.over_budget:
        console.print(Text(f"OVER BUDGET: {plan.over_budget_reason}"))
    console.print(Text("sections: " + " · ".join(f"{name} {tokens}" for name, tokens in plan.sections)))
    for note in plan.notes:
        console.print(Text(f"note: {note}"))
    redacted = [i for i in plan.items if i.redacted]
    if redacted:
        console.print(Text(f"redacted: {sum(i.redacted for i in redacted)} secrets masked in "
                           + ", ".join(f"{i.id} ({i.redacted})" for i in redacted)))
    included = sorted(plan.included, key=lambda i: i.order)

    def fit(values: list[str], title: str) -> int:
        return max([len(title), *map(len, values)])

    # every column but the label keeps its full width; the label takes what is left and is cut with …
    widths = {
        "#": fit([str(len(plan.items))], "#"),
        "in": fit(["yes"], "in"),
        "kind": fit([i.kind for i in plan.items], "kind"),
        "tokens": fit([str(i.tokens) for i in plan.items], "tokens"),
        "reason": fit([i.reason for i in plan.items], "reason"),
        "pin": fit([i.pin for i in plan.items], "pin"),
    }
    label_width = max(MIN_LABEL_WIDTH, console.width - sum(widths.values()) - TABLE_CHROME)
    table = Table(box=box.SIMPLE_HEAD, show_lines=False)
    table.add_column("#", justify="right", no_wrap=True, width=widths["#"])
    table.add_column("in", no_wrap=True, width=widths["in"])
    table.add_column("kind", no_wrap=True, width=widths["kind"])
    table.add_column("label", overflow="ellipsis", no_wrap=True, max_width=label_width)
    table.add_column("tokens", justify="right", no_wrap=True, width=widths["tokens"])
    table.add_column("reason", no_wrap=True, width=widths["reason"])
    table.add_column("pin", no_wrap=True, width=widths["pin"])
    for position, item in enumerate(included + list(plan.excluded), start=1):
        table.add_row(
            str(position),
            "yes" if item.included else "no",
            item.kind,
            Text(item.label),
            str(item.tokens),
            item.reason,
            item.pin,
        )
    console.print(table)
    console.print(Text(f"{len(included)} included, {len(plan.excluded)} excluded"))
    if footer:
        console.print(Text(footer))


def _branch_line(origin) -> str:
    """``   branch try-b (forked from main at message 812)`` for a stored plan that recorded its branch."""
    if origin is None or not origin.branch_name:
        return ""
    fork = f" (forked from {origin.parent_name} at message {origin.fork_message_id})" if origin.parent_name else ""
    return f"   branch {origin.branch_name}{fork}"


def attach_retrieval(wb: Workbench, repo: Path, *, semantic: bool, quiet: bool) -> Any:
    """Index ``repo`` incrementally (progress on stderr unless ``quiet``) and plug its retrieval into ``wb``.

    With ``semantic`` the embedding model is loaded and waited for, the cards are embedded, and the
    same model ranks earlier turns for the semantic history strategy (``service.attach.attach_repository``).
    """
    from ctxbench.cli.repo_support import NO_SEMANTIC, checked_repository, stderr_progress
    from ctxbench.service.attach import attach_repository

    checked_repository(wb, repo, quiet=quiet)
    with stderr_progress(quiet) as progress:
        return attach_repository(wb, repo, progress, semantic=semantic, semantic_off=NO_SEMANTIC)


def warm_history(wb: Workbench, session_id: str, strategy: str, *, quiet: bool) -> None:
    """Embed what the strategy compares with the query (messages for fused, turns for semantic) that has no vector
    yet, with progress on stderr; saved as it goes, so the next plan (or a run after Ctrl-C) starts where this one
    stopped."""
    from ctxbench.cli.repo_support import stderr_progress

    with stderr_progress(quiet) as progress:
        wb.history.warm(session_id, (lambda done, total: progress("embedding history", done, total)) if progress else None,
                        strategy=strategy)


def pin_targets(wb: Workbench, session_id: str, targets: tuple[str, ...], attached: Any) -> None:
    """Pin every target sticky, or none: each is checked first (a target that names nothing is a ValueError)."""
    from ctxbench.service.pin_targets import check_pin_target

    index = attached.index if attached is not None else None
    for target in targets:
        check_pin_target(wb, session_id, target, index)
    with wb.transaction():
        for target in targets:
            content = ""
            symbol = card_symbol(target)
            if symbol is not None and index is not None:
                content = index.cards[symbol].render()
            wb.pins.add(session_id, target, "sticky", label=target, content=content)


def transcript_session(wb: Workbench, transcript: Path) -> tuple[str, bool]:
    """The session holding ``transcript``: (id, reused). An earlier import of the same file whose session is
    unchanged (the same messages, no pins, state block or scratchpad) is reused; otherwise it is imported now."""
    parsed = wb.parse_transcript(transcript)
    title = TRANSCRIPT_TITLE.format(name=transcript.name)
    wanted = [(m.role, m.content, tuple(m.tool_calls), m.tool_call_id) for m in parsed.messages]
    for info in wb.sessions.list(wb.repo):
        if info.title != title or info.message_count != len(wanted):
            continue
        stored = [(m.role, m.content, tuple(m.tool_calls), m.tool_call_id) for m in wb.messages.all(info.id)]
        if stored == wanted and not (wb.pins.list(info.id) or wb.memory.state(info.id) or wb.memory.scratchpad(info.id)):
            return info.id, True
    return wb.import_transcript(parsed, title=title), False


@click.command("plan", help="Build the ContextPlan for QUERY as the next user turn of a session, store it and show it.")
@click.argument("query")
@click.option("--session", "session_id", default=None, help="Session id (default: the most recently active).")
@click.option("--transcript", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Plan over this OpenAI JSONL transcript: imported into the database as a session titled "
                   "'transcript: NAME' (reused while unchanged), the plan stored with it.")
@click.option("--mode", default=None, help="Context mode: off, light or heavy (default: the session's).")
@click.option("--budget", type=int, default=None, help="Token budget (default: the session's).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default=None, help="History strategy.")
@click.option("--window", "window_groups", type=int, default=None, help="Window size in groups (0 = all).")
@click.option("--repo", "repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Index this repository (incrementally) and plan with its scaffold and symbol cards.")
@click.option("--semantic/--no-semantic", default=True,
              help="Load the embedding model and wait for it (default), or plan with keyword and graph "
                   "retrieval only and no model (the semantic history strategy then falls back to recency, fused ranks by keywords).")
@click.option("--tools/--no-tools", "offer_tools", default=False,
              help="Budget the tool definitions a chat call sends with its messages (default: no tools, "
                   "a plan of the messages alone).")
@click.option("--pin", "pins", multiple=True, metavar="TARGET",
              help="Pin TARGET sticky in the session before planning (repeatable): card:SYMBOL or path:FILE "
                   "(with --repo), group:ID, memo:ID. A target that names nothing is refused and nothing is pinned.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@db_option
@config_option
def command(
    query: str,
    session_id: str | None,
    transcript: Path | None,
    mode: str | None,
    budget: int | None,
    strategy: str | None,
    window_groups: int | None,
    repo: Path | None,
    semantic: bool,
    offer_tools: bool,
    pins: tuple[str, ...],
    as_json: bool,
    db_path: Path | None,
    config_path: Path | None,
) -> None:
    from ctxbench.records.errors import EmbedderError
    from ctxbench.service.workbench import Workbench
    from ctxbench.records.transcripts import TranscriptError
    from ctxbench.records.errors import NotFound, SettingsError

    if not query.strip():
        fail(EMPTY_QUERY, 2)
    if session_id and transcript:
        fail("give --session or --transcript, not both", 2)
    if budget is not None and not 0 < budget <= MAX_TOKENS:
        fail(f"--budget must be a number of tokens from 1 to {MAX_TOKENS:,}, got {budget}", 2)
    if window_groups is not None and window_groups < 0:
        fail(f"--window must be >= 0 (0 = all groups), got {window_groups}", 2)
    config = get_config(config_path)
    if repo is not None:
        from ctxbench.cli.repo_support import fit_root

        fit_root(repo)  # a folder that is no repository: refused before the store is opened
    fresh: str | None = None  # a session made here for a database that has none
    try:
        with Workbench(resolve_db(db_path), config, repo=repo or Path.cwd()) as wb:
            if transcript is not None:
                try:
                    session_id, reused = transcript_session(wb, transcript)
                except TranscriptError as exc:  # say which file, as `ctxbench import` does
                    fail(f"{transcript.name}: {exc}", 2)
                if not as_json:
                    click.echo(f"{'using' if reused else 'imported'} {transcript.name} as session {session_id}",
                               err=True)
            elif session_id is None:
                session_id = wb.sessions.latest()
                if session_id is None:  # a fresh database: the plan of a first turn, with an empty history
                    session_id = wb.new_session(_title(query), repo)
                    fresh = session_id
                    if not as_json:
                        click.echo(f"no sessions yet: planning with an empty history in a new session {session_id}",
                                   err=True)
            settled = wb.recover_turn(session_id)  # a turn that ended with its process mid-turn
            if settled and not as_json:
                click.echo(f"· {settled}", err=True)
            try:
                settings = wb.settings(session_id).with_choices(mode=mode, budget=budget, strategy=strategy,
                                                                window_groups=window_groups)
                plan = _plan(wb, config, session_id, query, repo, semantic, pins, offer_tools, as_json, settings)
            except BaseException:
                if fresh is not None:  # the new session holds nothing but what failed: leave no trace
                    wb.delete_session(fresh)
                raise
    except (NotFound, SettingsError, TranscriptError) as exc:
        fail(str(exc), 2)
    except EmbedderError as exc:
        fail(f"{exc} (--no-semantic plans without the model)", 1)
    if as_json:
        emit_json(plan.to_json())
        return
    render_plan(plan, footer=f"stored; show it again with: ctxbench show {plan.plan_id}")


def _title(query: str) -> str:
    return " ".join(query.split())[:TITLE_CHARS]


def _plan(wb: Workbench, config: Config, session_id: str, query: str, repo: Path | None, semantic: bool,
          pins: tuple[str, ...], offer_tools: bool, as_json: bool, settings: SessionSettings) -> ContextPlan:
    """Attach the repository (when given), pin the targets, and build and store the plan."""
    from ctxbench.service.attach import load_embedder

    attached = None
    effective = settings.strategy
    if repo is not None:
        attached = attach_retrieval(wb, repo, semantic=semantic, quiet=as_json)
    elif semantic and effective in EMBEDDING_STRATEGIES:
        wb.embedder = load_embedder(config)
    if semantic and effective in EMBEDDING_STRATEGIES:
        warm_history(wb, session_id, effective, quiet=as_json)
    if pins:
        try:
            pin_targets(wb, session_id, pins, attached)
        except ValueError as exc:
            fail(str(exc), 2)
    tools_tokens = 0
    if offer_tools:
        from ctxbench.service.model import offered_tools_tokens

        tools_tokens = offered_tools_tokens(config, wb.tokenizer)
    from ctxbench.records.plan_request import PlanRequest

    return wb.planning.plan(PlanRequest(session_id, query, settings, tools_tokens=tools_tokens, store=True))
