#!/usr/bin/env python3
"""Record what code retrieval answers on the tune query sets, to show a refactoring changed nothing.

For every query of the tune codebases of ``benchmarks/codebases.toml`` whose folder is present (textual reads
the textual the project installs; ``python benchmarks/fetch_codebases.py click trio`` fetches the others), it runs
``Retriever.retrieve`` with the real embedding model three ways: as Light asks (no graph neighbours), as Heavy asks
(graph neighbours), Heavy again with the first Heavy hit pinned, the second active and the query's mentions
resolved (so the boosts and personalized PageRank run too), and with settings the defaults leave off: the keyword
feedback (Light), the score fusion (Heavy, pinned) and, for the codebases named by ``--capsules``, the capsule
component. Each answer is written as its RetrievalSet id (a hash
of every field of every hit: scores, components, why, excerpts) and its hit ids and scores.

    python benchmarks/retrieval_sameness.py --db /tmp/same/store.db --out /tmp/same/before.json
    python benchmarks/retrieval_sameness.py --db /tmp/same/store.db --out /tmp/same/after.json \
        --compare /tmp/same/before.json

The database keeps the index and the card vectors, so a second run embeds nothing. ``--time N`` instead times
``retrieve`` over the first 30 textual queries (Light and Heavy, query vectors kept: the encoding is not timed)
N times and prints the median wall and CPU time per call.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMED_QUERIES = 30  # fewer than the query vectors a retriever keeps (32): the timed passes encode nothing


def _specs(names: list[str]) -> list:
    from ctxbench.bench.code import load_manifest

    specs = []
    for spec in load_manifest(HERE / "codebases.toml"):
        if spec.role != "tune" or (names and spec.name not in names):
            continue
        repo = spec.repo
        if spec.name == "textual" and not repo.is_dir():
            import textual

            repo = Path(textual.__file__).resolve().parent
        if repo.is_dir():
            specs.append((spec, repo))
        else:
            print(f"skipped {spec.name}: {repo} is not there (fetch_codebases.py?)", file=sys.stderr)
    return specs


def _sources(config, mode: str) -> tuple[str, ...]:
    from ctxbench.retrieval.retriever import SOURCES

    profile = config.planner.mode(mode)
    return tuple(s for s in SOURCES if s != "graph" or profile.graph_neighbours)


def _record(rs) -> dict:
    return {"id": rs.id, "hits": [[h.symbol, h.score] for h in rs.hits]}


def _variant(retriever, **changes):
    """A retriever over the same index and connection with some retrieval settings changed."""
    import dataclasses

    capsule_weight = changes.pop("capsule_weight", None)
    sections = {"retrieval": dataclasses.replace(retriever.retrieval, **changes)}
    if capsule_weight is not None:
        sections["capsules"] = dataclasses.replace(retriever.capsule_config, retrieval_weight=capsule_weight)
    other = retriever.variant(**sections)
    other.prepare(wait_for_model=True)
    return other


def run_sets(retriever, config, queries) -> dict:
    """Per query: Light, Heavy, Heavy with a pin, an active symbol and the query's mentions, and (the default
    settings leave them off) the keyword feedback in Light, the score fusion in Heavy with a pin, and the capsule
    component in Heavy when the repository has capsules."""
    from ctxbench.retrieval.mentions import mentions

    light, heavy = _sources(config, "light"), _sources(config, "heavy")
    feedback = _variant(retriever, prf_keyword_weight=1.0)
    scored = _variant(retriever, fusion="score", prf_keyword_weight=1.0)
    capsules = _variant(retriever, capsule_weight=1.0) if retriever.index.capsules else None
    out = {}
    for q in queries:
        a = retriever.retrieve(q.query, sources=light)
        b = retriever.retrieve(q.query, sources=heavy)
        first = [h.symbol for h in b.hits[:2]]
        boosts = dict(pins=[f"card:{s}" for s in first[:1]], activation={f"card:{s}": 0.5 for s in first[1:]},
                      mentioned=mentions(q.query))
        c = retriever.retrieve(q.query, sources=heavy, **boosts)
        sets = {"light": _record(a), "heavy": _record(b), "pinned": _record(c),
                "feedback_light": _record(feedback.retrieve(q.query, sources=light)),
                "score_pinned": _record(scored.retrieve(q.query, sources=heavy, **boosts))}
        if capsules is not None:
            sets["capsules_heavy"] = _record(capsules.retrieve(q.query, sources=heavy))
        out[q.id] = sets
    return out


def _build_capsules(repo: Path, db: Path, config) -> None:
    from ctxbench.service.attach import index_repository
    from ctxbench.service.capsules import CapsuleService
    from ctxbench.service.workbench import Workbench

    with Workbench(db, config) as wb:
        index_repository(wb, repo, embed=False)
        CapsuleService(wb, config).build(repo)


def compare(before: dict, after: dict) -> int:
    differ = 0
    for repo, sets in before.items():
        for qid, modes in sets.items():
            for mode, rec in modes.items():
                other = after.get(repo, {}).get(qid, {}).get(mode)
                if other != rec:
                    differ += 1
                    if differ <= 10:
                        print(f"differs: {repo} {qid} {mode}", file=sys.stderr)
    total = sum(len(m) for s in before.values() for m in s.values())
    print(f"{total - differ} of {total} sets identical (ids, hit ids and scores)")
    return 1 if differ or after.keys() != before.keys() else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="the store (kept between runs: vectors embedded once)")
    parser.add_argument("--out", type=Path, help="write the sets here (JSON)")
    parser.add_argument("--compare", type=Path, help="a file an earlier run wrote: exit 1 when any set differs")
    parser.add_argument("--time", type=int, default=0, help="time retrieve over the textual queries this many passes")
    parser.add_argument("--capsules", action="append", default=[], metavar="NAME",
                        help="build this codebase's capsules first (their offers and component are then compared too)")
    parser.add_argument("names", nargs="*", help="only these tune codebases (default: all present)")
    args = parser.parse_args()

    from ctxbench.bench.code import load_queries
    from ctxbench.cli.repo_support import opened_retriever
    from ctxbench.config import Config

    config = Config()
    args.db.parent.mkdir(parents=True, exist_ok=True)
    if args.time:
        (spec, repo), = _specs(["textual"])
        queries = load_queries(spec.queries)[:TIMED_QUERIES]
        with opened_retriever(repo, args.db, config, semantic=True, quiet=True) as (retriever, _):
            retriever.prepare(wait_for_model=True)
            light, heavy = _sources(config, "light"), _sources(config, "heavy")
            for q in queries:  # warm: tables, query vectors, source lines
                retriever.retrieve(q.query, sources=light)
                retriever.retrieve(q.query, sources=heavy)
            passes, cpu = [], []
            for _ in range(args.time):
                start, start_cpu = time.perf_counter(), time.process_time()
                for q in queries:
                    retriever.retrieve(q.query, sources=light)
                    retriever.retrieve(q.query, sources=heavy)
                passes.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
        calls = 2 * len(queries)
        print(json.dumps({"passes_s": [round(p, 3) for p in passes], "cpu_s": [round(p, 3) for p in cpu],
                          "median_ms_per_retrieve": round(statistics.median(passes) / calls * 1000, 2),
                          "median_cpu_ms_per_retrieve": round(statistics.median(cpu) / calls * 1000, 2)}))
        return 0
    result: dict = {}
    for spec, repo in _specs(args.names):
        queries = load_queries(spec.queries)
        if spec.name in args.capsules:
            _build_capsules(repo, args.db, config)
        with opened_retriever(repo, args.db, config, semantic=True, quiet=True) as (retriever, _):
            retriever.prepare(wait_for_model=True)
            result[spec.name] = run_sets(retriever, config, queries)
        print(f"{spec.name}: {len(queries)} queries", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True), encoding="utf-8")
    if args.compare:
        return compare(json.loads(args.compare.read_text(encoding="utf-8")), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
