"""``ctxbench bench code``: retrieval quality on query sets with gold symbols (fused vs keyword vs semantic),
per repository and pooled over the tune and the held-out repositories."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ctxbench.cli.common import config_option, db_option, emit_json, fail, get_config


@click.command(help="Code retrieval quality: Recall@5/10/20 of gold symbols, the share of queries whose gold all "
                    "reach a Light / Heavy plan at 8k, and the share of how/bug questions whose answering lines "
                    "are inside the Heavy excerpts, for fused, keyword-only and semantic-only retrieval; per "
                    "repository, then pooled over the tune and the held-out repositories. Give --queries/--repo "
                    "pairs (in order) or a --manifest.")
@click.option("--queries", "queries_paths", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSONL file of {id, query, gold: [symbol ids], split?, kind?, lines?}; repeat with --repo.")
@click.option("--repo", "repos", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Repository the gold symbol ids of the matching --queries refer to (indexed first if needed).")
@click.option("--manifest", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="TOML file of [[codebase]] tables (name, role = tune|holdout|holdout2..6, repo, queries), "
                   "e.g. benchmarks/codebases.toml.")
@click.option("--role", type=click.Choice(["tune", "holdout", "holdout2", "holdout3", "holdout4", "holdout5", "holdout6",
                                         "all"]),
              default="all", show_default=True,
              help="With --manifest: run the tune repositories, the held-out ones (holdout2..holdout6: the second "
                   "to sixth held-out sets, each written after the one before had been looked at), or all.")
@click.option("--split", type=click.Choice(["tune", "holdout", "all"]), default="all", show_default=True,
              help="Which queries of each file to run, by their own split field.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--no-plans", is_flag=True, help="Skip the Light/Heavy plan checks (recall only).")
@click.option("--no-pinned", is_flag=True, help="Skip the pinned follow-up measurement.")
@click.option("--capsules", "with_capsules", is_flag=True,
              help="Build the extractive capsules of each repository first (missing and stale ones) and also run "
                   "the fused retrieval with capsules in its symbol ranking: variant 'capsules', on vs off in one run.")
@click.option("--capsule-weight", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --capsules: the capsule component's weight (default: [capsules] retrieval_weight, or 1.0 "
                   "when that is 0).")
@click.option("--encoder", "encoders", multiple=True, metavar="NAME",
              help="Also run fused and semantic-only retrieval with this embedding model (an [embedding] model_name: "
                   "a packaged encoder such as code-minilm), beside the configured one in the same run, over the "
                   "same index: variants 'fused@NAME' and 'semantic@NAME'. Repeatable.")
@db_option
@config_option
def command(queries_paths: tuple[Path, ...], repos: tuple[Path, ...], manifest: Path | None, role: str, split: str,
            as_json: bool, no_plans: bool, no_pinned: bool, with_capsules: bool, capsule_weight: float | None,
            encoders: tuple[str, ...], db_path: Path | None, config_path: Path | None) -> None:
    from ctxbench.bench.code import (ROLES, QueryFileError, RepoReport, RepoSpec, align_gold, gold_named_share,
                                     load_manifest, load_queries, pool, run_code_bench, select_split)
    from ctxbench.cli.repo_support import opened_retriever, stderr_progress
    from ctxbench.records.errors import EmbedderError

    config = get_config(config_path)
    if capsule_weight is not None and not with_capsules:
        fail("--capsule-weight sets the weight of --capsules: add --capsules", 2)
    if manifest is not None and (queries_paths or repos):
        fail("give either --manifest or --queries/--repo pairs, not both", 2)
    try:
        if manifest is not None:
            specs = [s for s in load_manifest(manifest) if role == "all" or s.role == role]
        else:
            if not queries_paths or len(queries_paths) != len(repos):
                fail("give --queries and --repo in pairs (the same number of each), or --manifest", 2)
            specs = [RepoSpec(_name(repo), repo.resolve(), q.resolve(), _role_of(q, load_queries))
                     for q, repo in zip(queries_paths, repos)]
        sets = [(spec, select_split(load_queries(spec.queries), split)) for spec in specs]
    except QueryFileError as exc:
        fail(str(exc), 2)
        return
    for spec, queries in sets:
        if not spec.repo.is_dir():
            fail(f"{spec.name}: repository {spec.repo} does not exist (run benchmarks/fetch_codebases.py?)", 2)
        if not queries:
            fail(f"{spec.name}: no queries in split {split!r} of {spec.queries}", 2)
    reports: list[RepoReport] = []
    try:
        for spec, queries in sets:
            if with_capsules:
                _build_capsules(spec.repo, db_path, config, quiet=as_json)
            with opened_retriever(spec.repo, db_path, config, semantic=True, quiet=as_json) as (retriever, index):
                capsule_retriever = _capsule_retriever(retriever, capsule_weight) if with_capsules else None
                prefix = os.path.basename(str(index.root)) if (Path(index.root) / "__init__.py").is_file() else ""
                queries, unknown = align_gold(queries, index.cards, prefix)
                for gold in unknown:
                    click.echo(f"warning: {spec.name}: gold symbol {gold} is not in the index of {index.root}",
                               err=True)
                with stderr_progress(quiet=as_json) as tick:
                    progress = None if tick is None else (lambda v, d, t, _n=spec.name: tick(f"{_n} {v}", d, t))
                    extra = {"capsule_retriever": capsule_retriever} if capsule_retriever is not None else {}
                    report = run_code_bench(retriever, queries, config, split=split, plans=not no_plans, progress=progress,
                                            pinned=not no_pinned, **extra)
                    for name in encoders:
                        other = _encoder_retriever(retriever, name, tick, spec.name)
                        extra_report = run_code_bench(other, queries, config, split=split, variants=("fused", "semantic"),
                                                      plans=not no_plans, progress=progress, pinned=False)
                        for variant in ("fused", "semantic"):
                            report.variants[f"{variant}@{name}"] = extra_report.variants[variant]
                            report.outcomes[f"{variant}@{name}"] = extra_report.outcomes[variant]
                reports.append(RepoReport(spec, len(index.cards), report, gold_named_share(queries), tuple(unknown)))
    except EmbedderError as exc:
        fail(str(exc))
        return
    roles = [r for r in ROLES if any(rep.spec.role == r for rep in reports)]
    pooled = {r: pool(reports, r, plans=not no_plans) for r in roles}
    if as_json:
        emit_json({"split": split, "repos": [r.to_json() for r in reports],
                   "pooled": {r: {"repos": [rep.spec.name for rep in reports if rep.spec.role == r],
                                  "queries": figs["fused"].queries,
                                  **{name: fig.to_json() for name, fig in figs.items()}}
                              for r, figs in pooled.items()}})
        return
    # held-out first (the freshest set, then the older ones): the figures on code nobody tuned on
    order = {r: i for i, r in enumerate(reversed(ROLES))}  # ROLES runs from tune to the freshest held-out set
    for r in sorted(roles, key=order.__getitem__):
        names = ", ".join(rep.spec.name for rep in reports if rep.spec.role == r)
        click.echo(f"pooled {r} ({names}): {pooled[r]['fused'].queries} queries")
        _table(pooled[r], no_plans)
        click.echo("")
    for rep in sorted(reports, key=lambda x: order[x.spec.role]):
        click.echo(f"{rep.spec.name} [{rep.spec.role}] {rep.spec.repo}: {rep.report.variants['fused'].queries} "
                   f"queries, {rep.symbols} symbols, {rep.gold_named:.0%} name a gold symbol verbatim")
        _table(rep.report.variants, no_plans)
        pinned = rep.report.pinned
        if pinned is not None and pinned.cases:
            click.echo(f"  pinned follow-up ({pinned.queries} queries, {pinned.cases} cases), other gold R@5 / R@10: "
                       + ", ".join(f"{mode} {v['5']:.3f} / {v['10']:.3f}" for mode, v in pinned.recall.items()))
        misses = rep.report.to_json()["misses"]
        if misses:
            click.echo(f"  {len(misses)} queries with gold missing from the first 10 fused hits:")
            for miss in misses:
                click.echo(f"    {miss['id']}: {', '.join(miss['missing_at_10'])}")
        click.echo("")


def _build_capsules(repo: Path, db_path: Path | None, config: Any, *, quiet: bool) -> None:
    """Index ``repo`` (no embedding yet: the retriever does that next) and build its extractive capsules."""
    from ctxbench.cli.common import resolve_db
    from ctxbench.service.attach import index_repository
    from ctxbench.service.capsules import CapsuleService
    from ctxbench.service.workbench import Workbench

    with Workbench(resolve_db(db_path), config) as wb:
        index_repository(wb, repo, embed=False)
        built = CapsuleService(wb, config).build(repo)
    if not quiet:
        click.echo(f"capsules of {built.repo}: {len(built.written)} written, {built.kept} kept", err=True)


def _capsule_retriever(retriever: Any, weight: float | None) -> Any:
    """A retriever over the same index and connection whose symbol ranking has the capsule component on."""
    import dataclasses

    capsules = retriever.capsule_config
    chosen = weight if weight is not None else (capsules.retrieval_weight or 1.0)
    other = retriever.variant(capsules=dataclasses.replace(capsules, retrieval_weight=chosen))
    other.prepare()
    return other


def _encoder_retriever(retriever: Any, name: str, tick: Any, label: str) -> Any:
    """A retriever over the same index and connection whose embedding model is ``name``, its cards embedded (under
    that model's own vector key) before it answers."""
    import dataclasses

    from ctxbench.retrieval.embedder import Embedder
    from ctxbench.retrieval.retriever import Retriever

    chosen = dataclasses.replace(retriever.embedding_config, model_name=name, model_path="")
    embedder = Embedder(chosen)
    embedder.start_loading()
    other = Retriever(retriever.conn, retriever.root, retriever.retrieval, embedder, index=retriever.index,
                      index_config=retriever.index_config, embedding=chosen, capsules=retriever.capsule_config)
    progress = None if tick is None else (lambda d, t: tick(f"{label} embedding for {name}", d, t))
    other.prepare(progress, wait_for_model=True)
    if embedder.error is not None:
        raise embedder.error
    return other


def _name(repo: Path) -> str:
    return repo.resolve().name


def _role_of(queries: Path, load: Any) -> str:
    """A query file given on the command line is held out when all its queries say so, else tuning."""
    splits = {q.split for q in load(queries)}
    return "holdout" if splits == {"holdout"} else "tune"


def _table(variants: dict[str, Any], no_plans: bool) -> None:
    header = f"  {'retrieval':<10} {'R@5':>6} {'R@10':>6} {'R@20':>6}"
    if not no_plans:
        header += f" {'light all gold':>15} {'heavy all gold':>15} {'excerpt answers':>16}"
    header += f" {'ms/query':>9} {'p95 ms':>7}"
    click.echo(header)
    for name, fig in variants.items():
        line = f"  {name:<10} {fig.recall['5']:>6.3f} {fig.recall['10']:>6.3f} {fig.recall['20']:>6.3f}"
        if not no_plans:
            excerpt = f"{fig.excerpt_answer:.3f} ({fig.excerpt_questions})" if fig.excerpt_questions else "-"
            line += f" {fig.plan_all_gold['light']:>15.3f} {fig.plan_all_gold['heavy']:>15.3f} {excerpt:>16}"
        line += f" {fig.ms_per_query:>9.1f} {fig.ms_p95:>7.1f}"
        click.echo(line)
    fused = variants.get("fused")
    if fused is not None and fused.capsule_queries:
        click.echo(f"  capsules offered for {fused.capsule_queries} of {fused.queries} queries; one covers a gold "
                   f"symbol's file in {fused.capsule_covers_gold:.1%} of all queries")
