"""``ctxbench diff PLAN_A PLAN_B``: what changed between two stored plans (any sessions, any branches)."""
from __future__ import annotations

from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config, stored_db


@click.command("diff", help="Compare two stored plans: the items that entered, left or changed, with their reasons.")
@click.argument("plan_a")
@click.argument("plan_b")
@click.option("--json", "as_json", is_flag=True,
              help="Print {entered, left, changed} with each item's id, section, tokens and reasons.")
@db_option
@config_option
def command(plan_a: str, plan_b: str, as_json: bool, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.records.errors import UnknownPlan
    from ctxbench.service.timeline import diff_stored
    from ctxbench.service.workbench import Workbench

    try:
        with Workbench(stored_db(db_path, f"unknown plan {plan_a!r}"), get_config(config_path)) as wb:
            diff = diff_stored(wb, plan_a, plan_b)
    except UnknownPlan as exc:
        fail(str(exc), 2)
    if as_json:
        emit_json(diff.to_json())
    else:
        from ctxbench.service.text import diff_lines

        click.echo("\n".join(diff_lines(diff)))
