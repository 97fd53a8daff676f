"""``ctxbench bench compaction``: the early rule after compaction (long session) and LoCoMo recall with summaries."""
from __future__ import annotations

import tempfile
from pathlib import Path

import click

from ctxbench.cli.common import bench_progress, config_option, fail, get_config, report_bench

LONG_SESSION = Path(__file__).resolve().parents[2] / "fixtures" / "sessions" / "long_session.jsonl"
HELD_OUT = "47,48,49,50"


@click.command(help="What compaction keeps. (1) The recorded long session is compacted (extractive) to --share of "
                    "its history tokens; every later turn is replayed under each strategy and budget with the summary "
                    "and without it: how many plans still send the early rule, and the history tokens sent. (2) With "
                    "--locomo DIR: the held-out LoCoMo conversations are compacted to half their history and to the "
                    "auto-compact target of --locomo-budget; evidence recall under the default strategy with and "
                    "without the summary (verbatim, and crediting evidence the summary quotes). Results are saved.")
@click.option("--session", "session", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A transcript with the rule (default: fixtures/sessions/long_session.jsonl).")
@click.option("--rule", "rule_prefix", default=None, metavar="TEXT",
              help="The rule message starts with TEXT (default: the long session's 'Ground rule before we change').")
@click.option("--no-session", is_flag=True, help="Skip the long-session part.")
@click.option("--budgets", default="8000,16000,32000", show_default=True, help="Budgets of the long-session replay.")
@click.option("--strategies", default="window,hybrid,levels,semantic,fused", show_default=True,
              help="Strategies of the long-session replay.")
@click.option("--share", type=click.FloatRange(0.05, 0.95), default=0.5, show_default=True,
              help="Compact the long session to this share of its history tokens.")
@click.option("--locomo", "locomo_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder of LoCoMo conversation files (N.json).")
@click.option("--conversations", default=HELD_OUT, show_default=True, help="LoCoMo conversations (held-out ones).")
@click.option("--locomo-budgets", "locomo_budgets", default="1024,2048", show_default=True,
              help="The plan budgets of the LoCoMo questions (comma-separated).")
@click.option("--auto", "with_auto", is_flag=True, help="Also compact LoCoMo to the auto-compact target of each budget.")
@click.option("--no-baselines", is_flag=True, help="Leave out the plain baselines of the LoCoMo part.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the results file goes (default: bench.results_dir of the config).")
@click.option("--no-save", is_flag=True, help="Do not write the results file.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@config_option
def command(session: Path | None, rule_prefix: str | None, no_session: bool, budgets: str, strategies: str, share: float,
            locomo_dir: Path | None, conversations: str, locomo_budgets: str, with_auto: bool, no_baselines: bool,
            out_dir: Path | None, no_save: bool, as_json: bool, config_path) -> None:
    from ctxbench.bench import compaction
    from ctxbench.bench.locomo_data import LocomoError, find_conversations
    from ctxbench.records.errors import EmbedderError
    from ctxbench.records.vocab import STRATEGIES

    config = get_config(config_path)
    try:
        sizes = tuple(int(b) for b in budgets.split(",") if b.strip())
    except ValueError:
        fail(f"--budgets: whole numbers separated by commas, got {budgets!r}", 2)
    if not sizes or min(sizes) <= 0:
        fail("--budgets: give one or more positive budgets", 2)
    try:
        locomo_budget = tuple(int(b) for b in locomo_budgets.split(",") if b.strip())
    except ValueError:
        fail(f"--locomo-budgets: whole numbers separated by commas, got {locomo_budgets!r}", 2)
    if not locomo_budget or min(locomo_budget) < 64:
        fail("--locomo-budgets: give one or more budgets of 64 tokens or more", 2)
    names = tuple(s.strip() for s in strategies.split(",") if s.strip())
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown:
        fail(f"unknown strategy {', '.join(unknown)}; known: {', '.join(STRATEGIES)}", 2)
    transcript = None if no_session else (session or LONG_SESSION)
    if transcript is not None and not transcript.is_file():
        fail(f"{transcript}: no such transcript", 2)
    paths: list[Path] = []
    if locomo_dir is not None:
        try:
            paths = find_conversations(locomo_dir, [c.strip() for c in conversations.split(",") if c.strip()])
        except LocomoError as exc:
            fail(str(exc), 2)
    if transcript is None and not paths:
        fail("nothing to run: give --locomo DIR or leave out --no-session", 2)
    progress = bench_progress(as_json)
    with tempfile.TemporaryDirectory(prefix="ctxbench-compaction-") as tmp:
        try:
            report = compaction.run(config, db_dir=Path(tmp), session=transcript, locomo_paths=paths, budgets=sizes,
                                    strategies=names, share=share, locomo_budget=locomo_budget, progress=progress,
                                    rule_prefix=rule_prefix or compaction.RULE_PREFIX, auto=with_auto,
                                    baselines=not no_baselines)
        except (LocomoError, EmbedderError, ValueError) as exc:
            fail(str(exc), 2)
    report_bench("compaction", report, _print, as_json=as_json, no_save=no_save, out_dir=out_dir,
                 results_dir=config.bench.results_dir)


def _print(report) -> None:
    done = report.long_session
    if done is not None:
        click.echo(f"long session compacted: {done.tokens_before:,} -> {done.tokens_after:,} history tokens, summary "
                   f"{done.summary_tokens:,} tokens for {done.summarised_turns} turns, {done.seconds:.2f} s; "
                   f"protected: {'; '.join(done.protected) or 'none'}")
        click.echo(f"{'strategy':<10}{'budget':>8}  {'rule sent (compacted)':>22}  {'rule sent (not)':>16}"
                   f"  {'history tok (compacted / not)':>30}")
        pairs: dict[tuple[str, int], dict[bool, object]] = {}
        for row in report.rule_rows:
            pairs.setdefault((row.strategy, row.budget), {})[row.compacted] = row
        for (strategy, budget), pair in pairs.items():
            yes, no = pair.get(True), pair.get(False)
            click.echo(f"{strategy:<10}{budget:>8,}  {f'{yes.rule_sent}/{yes.plans}':>22}  {f'{no.rule_sent}/{no.plans}':>16}"
                       f"  {f'{yes.history_tokens:,.0f} / {no.history_tokens:,.0f}':>30}")
    if report.locomo_rows:
        click.echo(f"\nLoCoMo {', '.join(report.conversations)} ({report.locomo_rows[0].questions} questions; "
                   f"'plain' rows: the baselines, never compacted)")
        click.echo(f"{'budget':>7}  {'compaction':<11}{'strategy':<24}{'recall':>8}{'x none':>8}"
                   f"{'with summary credit':>21}{'summary sent':>14}")
        uncompacted = {r.budget: r.recall for r in report.locomo_rows if r.variant == "none"}
        for row in report.locomo_rows:
            ratio = f"{row.recall / uncompacted[row.budget]:.3f}" if uncompacted.get(row.budget) and \
                row.variant != "plain" else "-"
            click.echo(f"{row.budget:>7,}  {row.variant:<11}{row.strategy:<24}{row.recall:>8.3f}{ratio:>8}"
                       f"{row.credited:>21.3f}{row.summary_included:>14.2f}")
