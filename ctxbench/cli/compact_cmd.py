"""``ctxbench compact SESSION``: preview (and with ``--apply`` store) a summary of a session's older turns."""
from __future__ import annotations

from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config, stored_db

HELP = """Preview a compaction of SESSION: which turns are kept verbatim, summarised or dropped, which are
protected and why (sticky pins, standing instructions, the STATE block, the open task's leases), the summary
text, and tokens before -> after. Nothing changes without --apply. An applied compaction can be undone
(--undo): the turns stay in the store and come back.

The summary is written by the configured model ([llm], or --base-url/--model) and otherwise, or with
--extractive, by the offline extractive summariser."""


@click.command("compact", help=HELP)
@click.argument("session_id")
@click.option("--target-tokens", type=click.IntRange(min=0), default=None,
              help="Compact the history to about this many tokens (default: [compaction] target_ratio of it).")
@click.option("--keep", default=None, metavar="TURNS", help="Keep these turns verbatim, e.g. 4,7-9.")
@click.option("--summarise", "summarise", default=None, metavar="TURNS", help="Summarise these turns, e.g. 2,3.")
@click.option("--task", default=None, metavar="TASK",
              help="Summarise exactly the turns of this finished task (t3 or its name).")
@click.option("--apply", "apply_", is_flag=True, help="Store the summary the preview shows.")
@click.option("--undo", "undo", is_flag=False, flag_value="latest", default=None, metavar="[SUMMARY]",
              help="Undo a compaction (default: the newest; or s3): its turns are sent again.")
@click.option("--extractive", is_flag=True, help="Use the offline extractive summariser even when a model is set.")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint that writes the summary.")
@click.option("--model", default=None, help="Model name at that endpoint.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: tokens_before, tokens_after, protected, summarised_groups, summary_ids, turns, ...")
@db_option
@config_option
def command(session_id: str, target_tokens: int | None, keep: str | None, summarise: str | None, task: str | None,
            apply_: bool, undo: str | None, extractive: bool, base_url: str | None, model: str | None,
            as_json: bool, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.records.errors import NotFound, ProviderError
    from ctxbench.service.compaction import Compactor, parse_choices
    from ctxbench.service.model import resolve_model
    from ctxbench.service.workbench import Workbench

    config = get_config(config_path)
    try:
        if base_url or model:
            config = resolve_model(config, base_url=base_url, model=model)
        choices = parse_choices(keep, summarise)
    except (ValueError, ProviderError) as exc:
        fail(str(exc), 2)
    if undo is not None and (apply_ or keep or summarise or task):
        fail("--undo takes no other compaction options", 2)
    try:
        with Workbench(stored_db(db_path, f"unknown session {session_id!r}"), config) as wb:
            wb.sessions.info(session_id)
            compactor = Compactor(wb, config)
            if undo is not None:
                number = None if undo == "latest" else _summary_number(undo)
                undone = compactor.undo(session_id, number)
                if as_json:
                    emit_json({"undone": undone.id, "turns": list(undone.group_ids)})
                else:
                    click.echo(f"undid summary s{undone.id}: {undone.span} are sent again ({len(undone.group_ids)} turns)")
                return
            preview = compactor.preview(session_id, target_tokens=target_tokens, choices=choices, task=task,
                                        use_model=False if extractive else None)
            summary_ids: tuple[int, ...] = ()
            if apply_ and not preview.refusal:
                summary_ids = (compactor.apply(preview).id,)
    except (NotFound, ValueError, ProviderError) as exc:
        fail(str(exc), 2)
    if as_json:
        emit_json(preview.to_json(summary_ids))
        return
    click.echo(render_preview(preview))
    if summary_ids:
        click.echo(f"applied: summary s{summary_ids[0]} stands in for {len(preview.summarised_groups)} turns "
                   f"from the next plan on (undo: ctxbench compact {session_id} --undo)")
    elif apply_:
        click.echo(preview.refusal)
    elif preview.refusal and preview.changes_anything:
        click.echo(preview.refusal)
    elif preview.changes_anything:
        click.echo("preview only: nothing changed (add --apply to store this summary)")


def _summary_number(text: str) -> int:
    value = text.strip().lower().lstrip("s")
    if not value.isdigit():
        raise ValueError(f"a summary is named like s3, got {text!r}")
    return int(value)


def render_preview(preview) -> str:
    """The preview as text: totals, protected turns, a table of turns (runs of the same disposition folded),
    the summary."""
    lines = [f"tokens {preview.tokens_before:,} -> {preview.tokens_after:,} (target {preview.target_tokens:,}); "
             f"summary {preview.summary_tokens:,} tokens of {len(preview.summarised_groups)} turns"
             + (f", {preview.ratio:.1f}x" if preview.summary_tokens else "") + f"; source {preview.source}"]
    if preview.cost_note:
        lines.append(preview.cost_note)
    lines.extend(f"note: {n}" for n in preview.notes)
    if preview.protected:
        lines.append("protected (never summarised):")
        lines.extend(f"  turn {r.group_id}: {r.reason}" for r in preview.protected)
    lines.append("turns:")
    run: list = []

    def flush() -> None:
        if not run:
            return
        first, last = run[0], run[-1]
        span = f"turn {first.group_id}" if first is last else f"turns {first.group_id}-{last.group_id}"
        tokens = sum(r.tokens for r in run)
        words = f"  {first.first_words}" if first is last else ""
        lines.append(f"  {span:<16} {first.disposition:<10} {tokens:>8,}  {first.reason}{words}")
        run.clear()

    for row in preview.rows:
        if run and (row.disposition, row.reason) != (run[-1].disposition, run[-1].reason):
            flush()
        run.append(row)
    flush()
    if preview.summary_text:
        lines.append("summary:")
        lines.extend("  " + line for line in preview.summary_text.splitlines())
    return "\n".join(lines)
