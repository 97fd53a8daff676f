"""``ctxbench show PLAN_ID``: re-render a stored plan, or print its exact messages payload."""
from __future__ import annotations

from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config, stored_db


@click.command("show", help="Show a stored plan: a table, its JSON, or the exact messages payload it sent.")
@click.argument("plan_id")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--messages", "as_messages", is_flag=True, help="Print exactly the OpenAI `messages` payload.")
@db_option
@config_option
def command(plan_id: str, as_json: bool, as_messages: bool, db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.cli.plan_cmd import render_plan
    from ctxbench.service.workbench import Workbench
    from ctxbench.records.errors import UnknownPlan

    if as_json and as_messages:
        fail("give --json or --messages, not both", 2)
    try:
        with Workbench(stored_db(db_path, f"unknown plan {plan_id!r}"), get_config(config_path)) as wb:
            plan = wb.plans.get(plan_id)
            origin = wb.plans.origin(plan_id)
    except UnknownPlan as exc:
        fail(f"{exc} (list a session's plans in the workbench, or run `ctxbench plan`)", 2)
    if as_messages:
        emit_json(plan.messages())
    elif as_json:
        emit_json(plan.to_json())
    else:
        render_plan(plan, origin=origin)
