"""``ctxbench replay SESSION``: step through a session's turns and show the plan each would get."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import click

from ctxbench.cli.common import TOKENS, config_option, db_option, fail, get_config, stored_db
from ctxbench.records.vocab import STRATEGIES

_QUERY_CHARS = 48


@click.command("replay", help="Show, turn by turn, the plan each user turn of SESSION would get under the "
               "given (or the session's) mode, budget and strategy.")
@click.argument("session_id")
@click.option("--mode", default=None,
              help="Context mode to replay under: off, light, heavy or one defined in the config "
                   "(default: the session's).")
@click.option("--budget", type=TOKENS, default=None,
              help="Token budget of each plan (default: the session's).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default=None,
              help="History strategy (default: the session's).")
@click.option("--window", "window_groups", type=click.IntRange(min=0), default=None,
              help="Groups in the rolling window (0 = all).")
@click.option("--turn", "only_turn", type=click.IntRange(min=1), default=None,
              help="Show only this turn (1-based), with its full plan table.")
@click.option("--tools/--no-tools", "offer_tools", default=False,
              help="Budget the tool definitions a chat call sends with its messages, as `chat` and the workbench "
                   "do (default: no tools, plans of the messages alone, as `plan`).")
@click.option("--store", is_flag=True, help="Store the replayed plans (then `ctxbench show PLAN_ID` works).")
@click.option("--json", "as_json", is_flag=True, help="A JSON array, one object per turn (plan summary and item ids), "
                                                   "written a line per turn as each is planned.")
@db_option
@config_option
def command(session_id: str, mode: str | None, budget: int | None, strategy: str | None, window_groups: int | None,
            only_turn: int | None, offer_tools: bool, store: bool, as_json: bool, db_path: Path | None,
            config_path: Path | None) -> None:
    from ctxbench.llm.replay import replay
    from ctxbench.service.workbench import Workbench
    from ctxbench.records.errors import SettingsError, UnknownSession

    rows = 0
    try:
        config = get_config(config_path)
        with Workbench(stored_db(db_path, f"unknown session {session_id!r}"), config) as wb:
            wb.sessions.info(session_id)
            tools_tokens = 0
            if offer_tools:
                from ctxbench.service.model import offered_tools_tokens

                tools_tokens = offered_tools_tokens(config, wb.tokenizer)
            for step in replay(wb, session_id, mode=mode, budget=budget, strategy=strategy,
                               window_groups=window_groups, store=store, only_turn=only_turn,
                               tools_tokens=tools_tokens):
                if only_turn is not None and not as_json:
                    from ctxbench.cli.plan_cmd import render_plan

                    click.echo(f"turn {step.turn} (group {step.group_id})")
                    render_plan(step.plan)
                    return
                row = _row(step)
                rows += 1
                # a long session prints as it goes: the table line by line, the JSON array one object a line
                if as_json:
                    click.echo(("[\n" if rows == 1 else ",\n") + json.dumps(row, ensure_ascii=False), nl=False)
                else:
                    if rows == 1:
                        click.echo(_HEADER)
                    click.echo(_line(row))
    except UnknownSession as exc:
        fail(str(exc), 2)
    except SettingsError as exc:
        fail(str(exc), 2)
    except BrokenPipeError:
        as_json = False  # the reader went away (`| head`): nothing more to close
        raise
    finally:
        if as_json and rows:
            click.echo("\n]")  # the array is closed whatever else stopped it (Ctrl-C, an error)
    if only_turn is not None and not rows:
        fail(f"session {session_id} has no turn {only_turn}", 2)
    if as_json:
        if not rows:
            click.echo("[]")
        return
    if not rows:
        click.echo("no user turns to replay")


_HEADER = f"{'turn':>4} {'group':>5}  {'plan':<26} {'used':>7} {'cached':>7} {'budget':>7}  {'hist in/out':>11}  query"


def _line(r: dict) -> str:
    flag = (" OVER" if r["over_budget"] else "") + (" (dropped since)" if r["dropped"] else "")
    hist = f"{r['history_included']}/{r['history_excluded']}"
    query = " ".join(r["query"].split())
    query = query if len(query) <= _QUERY_CHARS else query[: _QUERY_CHARS - 1] + "…"
    return (f"{r['turn']:>4} {r['group_id']:>5}  {r['plan_id']:<26} {r['used_tokens']:>7} {r['prefix_tokens']:>7}"
            f" {r['budget']:>7}"
            f"  {hist:>11}  {query}{flag}")


def _row(step) -> dict:
    plan = step.plan
    history = [i for i in plan.items if i.kind == "history_atom"]
    return {
        "turn": step.turn,
        "group_id": step.group_id,
        "query": step.user_message.content,
        "dropped": step.user_message.status == "dropped",  # dropped since: replayed as it was sent
        "plan_id": plan.plan_id,
        "mode": plan.mode,
        "strategy": plan.strategy,
        "budget": plan.budget,
        "used_tokens": plan.used_tokens,
        "prefix_tokens": step.prefix_tokens,  # shared as a prefix with the previous turn's plan (cacheable)
        "over_budget": plan.over_budget,
        "sections": dict(plan.sections),
        "history_messages": step.history_messages,
        "history_included": sum(1 for i in history if i.included),
        "history_excluded": sum(1 for i in history if not i.included),
        "excluded_reasons": dict(Counter(i.reason for i in plan.excluded)),
        "included": [i.id for i in sorted(plan.included, key=lambda i: i.order)],
    }
