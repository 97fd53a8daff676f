"""``ctxbench bench plan-latency``: p50/p95 planning time on a long synthetic session."""
from __future__ import annotations

import click

from ctxbench.cli.common import TOKENS, config_option, emit_json, get_config


@click.command(help="Planning latency: p50/p95 ms per plan for every strategy at 8k and 32k on a synthetic session.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--turns", type=click.IntRange(min=1), default=1000, show_default=True, help="Turns in the synthetic session.")
@click.option("--repeat", type=click.IntRange(min=1), default=50, show_default=True, help="Timed plans per strategy and budget.")
@click.option("--budget", "budgets", type=TOKENS, multiple=True, help="Budget(s) to time (default 8000 and 32000).")
@config_option
def command(as_json: bool, turns: int, repeat: int, budgets: tuple[int, ...], config_path) -> None:
    from ctxbench.bench import plan_latency
    from ctxbench.tokens import TokenizerUnavailable, get_tokenizer

    config = get_config(config_path)
    try:
        tokenizer = get_tokenizer(config.tokenizer.name, config.tokenizer.cache_size)
    except TokenizerUnavailable as exc:
        raise click.ClickException(str(exc)) from exc
    report = plan_latency.run(
        tokenizer, config.planner, turns=turns, repeat=repeat, budgets=budgets or plan_latency.DEFAULT_BUDGETS,
        progress=None if as_json else (lambda what: click.echo(f"timing {what} ...", err=True)),
    )
    if as_json:
        emit_json(report.to_json())
        return
    click.echo(f"plan latency: {report.turns} turns ({report.messages} messages), {report.repeat} plans each, "
               f"tokenizer {tokenizer.name}")
    click.echo(f"{'strategy':<10} {'budget':>7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'used tokens':>12}"
               f" {'frozen p50':>11} {'frozen p95':>11}")
    for t in report.plans:
        click.echo(f"{t.name:<10} {t.budget:>7} {t.p50_ms:>8.2f} {t.p95_ms:>8.2f} {t.max_ms:>8.2f} {t.mean_used_tokens:>12.0f}"
                   f" {t.frozen_p50_ms or 0:>11.2f} {t.frozen_p95_ms or 0:>11.2f}")
    click.echo("(frozen: the same plans after ctxbench.heap.settle(), as the workbench does after loading: "
               "full garbage collections then skip the long-lived heap)")
    k = report.keyword_query
    click.echo(f"FTS5 BM25 keyword query (hybrid input, not in the figures above): p50 {k.p50_ms:.2f} ms, "
               f"p95 {k.p95_ms:.2f} ms over {k.runs} queries")
    if report.reloaded is not None:
        r = report.reloaded
        click.echo(f"window @ {r.budget} over reloaded history (equal messages, new objects, as the session loads them): "
                   f"p50 {r.p50_ms:.2f} ms, p95 {r.p95_ms:.2f} ms")
    click.echo(f"full garbage collections during the timed plans: {report.gc_full_collections}, "
               f"longest pause {report.gc_max_pause_ms:.1f} ms (they make the tail)")
    click.echo(f"cold first plan (every turn rendered and counted): {report.cold_first_plan_ms:.1f} ms")
    def verdict(ms: float) -> str:
        return "meets" if ms <= report.target_p95_ms else "MISSES"

    click.echo(f"worst p95 as the workbench runs (heap settled after loading): {report.worst_frozen_p95_ms:.2f} ms "
               f"{verdict(report.worst_frozen_p95_ms)} the target of {report.target_p95_ms:.0f} ms; "
               f"without settling: {report.worst_p95_ms:.2f} ms {verdict(report.worst_p95_ms)}")
