"""``ctxbench bench code``: retrieval quality on a query set with gold symbols (fused vs keyword vs semantic)."""
from __future__ import annotations

import os
from pathlib import Path

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config


@click.command(help="Code retrieval quality: Recall@5/10/20 of gold symbols, share of queries whose gold all "
                    "reach a Light / Heavy plan at 8k, for fused, keyword-only and semantic-only retrieval.")
@click.option("--queries", "queries_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSONL file of {id, query, gold: [symbol ids], split?}.")
@click.option("--repo", "repo", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Repository the gold symbol ids refer to (indexed first if needed).")
@click.option("--split", type=click.Choice(["tune", "holdout", "all"]), default="all", show_default=True,
              help="Which queries to run: the tune split (used to pick weights), the held-out split, or all.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--no-plans", is_flag=True, help="Skip the Light/Heavy plan check (recall only).")
@db_option
@config_option
def command(queries_path: Path, repo: Path, split: str, as_json: bool, no_plans: bool, db_path: Path | None,
            config_path: Path | None) -> None:
    from ctxbench.bench.code import QueryFileError, align_gold, load_queries, run_code_bench, select_split
    from ctxbench.cli.repo_support import opened_retriever, stderr_progress
    from ctxbench.records.errors import EmbedderError

    config = get_config(config_path)
    try:
        queries = select_split(load_queries(queries_path), split)
    except QueryFileError as exc:
        fail(str(exc), 2)
        return
    if not queries:
        fail(f"no queries in split {split!r} of {queries_path}", 2)
        return
    try:
        with opened_retriever(repo, db_path, config, semantic=True) as (retriever, index):
            prefix = os.path.basename(str(index.root)) if (Path(index.root) / "__init__.py").is_file() else ""
            queries, unknown = align_gold(queries, index.cards, prefix)
            for gold in unknown:
                click.echo(f"warning: gold symbol {gold} is not in the index of {index.root}", err=True)
            # updated in place on a terminal, one line per finished variant in a log
            with stderr_progress(quiet=as_json) as tick:
                report = run_code_bench(retriever, queries, split=split, plans=not no_plans, progress=tick)
    except EmbedderError as exc:
        fail(str(exc))
        return
    if as_json:
        data = report.to_json()
        data["unknown_gold"] = unknown
        emit_json(data)
        return
    click.echo(f"code retrieval on {index.root}: {len(queries)} queries (split {split}), "
               f"{len(index.cards)} symbols")
    header = f"{'retrieval':<10} {'R@5':>6} {'R@10':>6} {'R@20':>6}"
    if not no_plans:
        header += f" {'light all gold':>15} {'heavy all gold':>15}"
    header += f" {'ms/query':>9}"
    click.echo(header)
    for name, fig in report.variants.items():
        line = f"{name:<10} {fig.recall['5']:>6.3f} {fig.recall['10']:>6.3f} {fig.recall['20']:>6.3f}"
        if not no_plans:
            line += f" {fig.plan_all_gold['light']:>15.3f} {fig.plan_all_gold['heavy']:>15.3f}"
        line += f" {fig.ms_per_query:>9.1f}"
        click.echo(line)
    if report.pinned is not None and report.pinned.cases:
        pinned = report.pinned
        click.echo(f"pinned follow-up ({pinned.queries} queries, {pinned.cases} cases), other gold R@5 / R@10: "
                   + ", ".join(f"{mode} {r['5']:.3f} / {r['10']:.3f}" for mode, r in pinned.recall.items()))
    misses = report.to_json()["misses"]
    if misses:
        click.echo(f"{len(misses)} queries with gold missing from the first 10 fused hits:")
        for miss in misses:
            click.echo(f"  {miss['id']}: {', '.join(miss['missing_at_10'])}")
