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
            reports = wb.plans.usage_reports(plan_id)
            config = wb.config
    except UnknownPlan as exc:
        fail(f"{exc} (list a session's plans in the workbench, or run `ctxbench plan`)", 2)
    if as_messages:
        emit_json(plan.messages())
    elif as_json:
        data = plan.to_json()
        if reports:  # the model calls made with this plan, as the provider reported them
            data["usage"] = [usage_json(r, config) for r in reports]
        emit_json(data)
    else:
        render_plan(plan, origin=origin, footer="\n".join(usage_line(r, config) for r in reports))


def _check(report, config):
    from ctxbench.llm.reflection import check_usage

    return check_usage(report.plan_id, report.estimated, report.reported, report.model, config.llm.usage_mismatch_ratio,
                       completion=report.completion, price=config.llm.price_for_model(report.model),
                       cache_read=report.cache_read, cache_write=report.cache_write)


def usage_line(report, config) -> str:
    """One model call of the plan: estimated vs reported prompt tokens, the cache reads and writes the provider
    reported, the reply tokens and the cost where the price table names the model."""
    from ctxbench.records.turns import cost_text

    check = _check(report, config)
    reported = f"reported {report.reported:,}" if report.reported is not None else "no usage reported"
    cache = f" ({check.cache_text})" if check.cache_text else ""
    reply = f" · reply {report.completion:,} tok" if report.completion is not None else ""
    cost = f" · {cost_text(check.cost_usd)}" if check.cost_usd is not None else ""
    return f"model call: est {report.estimated:,} · {reported} prompt tok{cache}{reply}{cost} · {report.model}"


def usage_json(report, config) -> dict:
    check = _check(report, config)
    return {"estimated_prompt_tokens": report.estimated, "reported_prompt_tokens": report.reported,
            "cache_read_input_tokens": report.cache_read, "cache_creation_input_tokens": report.cache_write,
            "reply_tokens": report.completion, "model": report.model,
            "cost_usd": round(check.cost_usd, 6) if check.cost_usd is not None else None}
