"""``ctxbench bench locomo``: evidence recall of every history strategy and the plain baselines on LoCoMo."""
from __future__ import annotations

import tempfile
from pathlib import Path

import click

from ctxbench.cli.common import bench_progress, config_option, fail, get_config, report_bench

BAR_WIDTH = 40


def _ints(value: str, what: str) -> tuple[int, ...]:
    try:
        out = tuple(int(v.replace("_", "")) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{what} are whole numbers separated by commas, e.g. 512,1024") from None
    if not out or any(v <= 0 for v in out):
        raise click.BadParameter(f"give one or more positive {what}")
    return out


@click.command(help="Evidence recall on LoCoMo conversations: each question is planned under every history "
                    "strategy and ctxbench's default (row 'default'), mode off, and scored by the share of its "
                    "evidence turns the plan includes; plain BM25+recency, MiniLM and RRF baselines run beside "
                    "them. Prints strategy x budget, per category, and a chart; --json prints "
                    "{results: [{strategy, budget, recall, questions, ...}]}. Results are saved for /bench.")
@click.option("--data", "data", required=True, type=click.Path(path_type=Path),
              help="Folder of LoCoMo conversation files (N.json).")
@click.option("--budgets", default="512,1024,2048,4096", show_default=True, help="Token budgets, comma-separated.")
@click.option("--conversations", default="", help="Conversation ids to run, comma-separated (default: every file).")
@click.option("--strategies", default="", help="History strategies to run, comma-separated (default: all).")
@click.option("--roles", default="ab", show_default=True,
              help="Which speaker is the user: ab (speaker_a), ba (speaker_b) or both (rows for each).")
@click.option("--orders", default="", help="Payload orders to plan in, comma-separated: relevance, cache "
              "(default: [planner] order). Each order gets its rows; the prefix and cost columns compare them.")
@click.option("--no-baselines", is_flag=True, help="Leave the plain baselines out.")
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Keep the imported sessions and vectors in this database (default: a temporary one).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the results file goes (default: bench.results_dir of the config).")
@click.option("--no-save", is_flag=True, help="Do not write the results file.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@config_option
def command(data: Path, budgets: str, conversations: str, strategies: str, roles: str, orders: str, no_baselines: bool,
            db_path: Path | None, out_dir: Path | None, no_save: bool, as_json: bool, config_path) -> None:
    from ctxbench.bench import locomo
    from ctxbench.bench.locomo_data import LocomoError, find_conversations
    from ctxbench.records.errors import EmbedderError
    from ctxbench.planner.cache import PLAN_ORDERS
    from ctxbench.records.vocab import STRATEGIES

    config = get_config(config_path)
    sizes = _ints(budgets, "budgets")
    names = tuple(s.strip() for s in strategies.split(",") if s.strip()) or STRATEGIES
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown:
        fail(f"unknown strategy {', '.join(unknown)}; known: {', '.join(STRATEGIES)}", 2)
    order_names = tuple(o.strip() for o in orders.split(",") if o.strip()) or None
    unknown = [o for o in order_names or () if o not in PLAN_ORDERS]
    if unknown:
        fail(f"unknown order {', '.join(unknown)}; known: {', '.join(PLAN_ORDERS)}", 2)
    try:
        mappings = locomo.check_roles(roles)
        paths = find_conversations(data, [c.strip() for c in conversations.split(",") if c.strip()] or None)
    except (ValueError, LocomoError) as exc:
        fail(str(exc), 2)
    progress = bench_progress(as_json)
    with tempfile.TemporaryDirectory(prefix="ctxbench-locomo-") as tmp:
        try:
            report = locomo.run(paths, config, db_path=db_path or Path(tmp) / "locomo.db", budgets=sizes,
                                strategies=names, roles=mappings, baselines=not no_baselines, progress=progress,
                                orders=order_names)
        except (LocomoError, EmbedderError) as exc:
            fail(str(exc), 2)
    report_bench("locomo", report, _print, as_json=as_json, no_save=no_save, out_dir=out_dir,
                 results_dir=config.bench.results_dir)


def _print(report) -> None:
    from ctxbench.bench.locomo_data import CATEGORY_NAMES

    budgets = report.budgets
    click.echo(f"LoCoMo evidence recall: conversations {', '.join(report.conversations)}, "
               f"{report.rows[0].questions if report.rows else 0} questions, roles {'/'.join(report.roles)}, "
               f"default = {report.default_strategy}; ctxbench plans pay a {report.system_prompt_tokens}-token system "
               "prompt, the question and message framing, the plain rows count turn text only")
    click.echo(f"{'strategy':<24}{'roles':<6}" + "".join(f"{b:>9,}" for b in budgets) + f"{'p95 ms':>9}")
    for (name, roles), rows in _by_name(report.rows).items():
        p95 = max((r.plan_p95_ms for r in rows if r.plan_p95_ms is not None), default=None)
        click.echo(f"{name:<24}{roles:<6}" + "".join(f"{r.recall:>9.3f}" for r in rows)
                   + (f"{p95:>9.1f}" if p95 is not None else f"{'':>9}"))
    categories = sorted({c for r in report.rows for c, _x, _n in r.categories})
    for budget in budgets:
        click.echo(f"\nper category at {budget:,} tokens: "
                   + ", ".join(f"{c} {CATEGORY_NAMES.get(c, '')}" for c in categories))
        click.echo(f"{'strategy':<24}{'roles':<6}" + "".join(f"{c:>8}" for c in categories))
        for (name, roles), rows in _by_name(report.rows).items():
            row = next(r for r in rows if r.budget == budget)
            recall = {c: x for c, x, _n in row.categories}
            click.echo(f"{name:<24}{roles:<6}" + "".join(f"{recall.get(c, 0.0):>8.3f}" for c in categories))
    click.echo("")
    for budget in budgets:
        click.echo(f"recall at {budget:,} tokens")
        for (name, roles), rows in _by_name(report.rows).items():
            row = next(r for r in rows if r.budget == budget)
            bar = "█" * int(round(row.recall * BAR_WIDTH))
            click.echo(f"  {(name + ' ' + roles).strip():<28}{bar:<{BAR_WIDTH}} {row.recall:.3f}")
    _print_cache(report)


def _print_cache(report) -> None:
    """Per strategy, order and budget: the share of a plan's tokens that is a prefix of the previous question's
    plan, and the cost per turn without and with cache reads."""
    rows = [r for r in report.rows if r.cache is not None]
    if not rows:
        return
    click.echo(f"\nprompt cache: consecutive questions' plans of one session; prefix = share of a plan's tokens that "
               f"the previous plan opened with; $/turn without / with cache reads ({report.cache_price})")
    click.echo(f"{'strategy':<24}{'roles':<6}{'order':<11}" + "".join(f"{b:>24,}" for b in report.budgets))
    for (name, roles, order), group in _by_order(rows).items():
        cells = "".join(f"{r.cache.prefix_share:>8.2f} {r.cache.uncached_usd:>7.4f}/{r.cache.cached_usd:<7.4f}"
                        for r in group)
        click.echo(f"{name:<24}{roles:<6}{order:<11}{cells}")


def _by_order(rows):
    out: dict[tuple[str, str, str], list] = {}
    for row in rows:
        out.setdefault((row.strategy, row.roles, row.order), []).append(row)
    return out


def _by_name(rows):
    """Rows by (name, roles): the strategy, and its payload order when the report has more than one."""
    several = len({r.order for r in rows if r.order}) > 1
    out: dict[tuple[str, str], list] = {}
    for row in rows:
        name = f"{row.strategy} [{row.order}]" if several and row.order else row.strategy
        out.setdefault((name, row.roles), []).append(row)
    return out
