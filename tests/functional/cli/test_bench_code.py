"""``ctxbench bench code``: query files, recall, plan check, baselines side by side."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxbench.bench.code import (
    CodeQuery,
    QueryFileError,
    align_gold,
    load_queries,
    recall_at,
    run_code_bench,
    select_split,
)
from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.service.index_views import retriever_for
from ctxbench.store.db import connect

from retrieval_fixture import index_repo, view, write_repo
from plan_requests import plan_of

QUERIES = [
    {"id": "q1", "query": "download a web page over http", "gold": ["net.http.fetch_url"], "split": "tune"},
    {"id": "q2", "query": "evict the oldest cache entry when full", "gold": ["store.cache.LRUCache.set"],
     "split": "holdout"},
    {"id": "q3", "query": "format a table row as a padded line",
     "gold": ["render.table.TableRenderer._render_line", "render.text.pad"]},
]


def write_queries(path, rows=QUERIES):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_load_queries_and_splits(tmp_path):
    qs = load_queries(write_queries(tmp_path / "q.jsonl"))
    assert [q.id for q in qs] == ["q1", "q2", "q3"]
    assert qs[2].split == "tune" and qs[2].gold == ("render.table.TableRenderer._render_line", "render.text.pad")
    assert [q.id for q in select_split(qs, "tune")] == ["q1", "q3"]
    assert [q.id for q in select_split(qs, "holdout")] == ["q2"]
    assert len(select_split(qs, "all")) == 3
    with pytest.raises(ValueError):
        select_split(qs, "dev")


@pytest.mark.parametrize("line, message", [
    ("not json", "not JSON"),
    (json.dumps({"id": "x", "query": "q"}), "expected"),
    (json.dumps({"id": "x", "query": "q", "gold": "a.b"}), "list of symbol ids"),
    (json.dumps({"id": "x", "query": "q", "gold": ["a"], "split": "dev"}), "split"),
])
def test_bad_query_files_are_reported_with_the_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(QUERIES[0]) + "\n" + line + "\n")
    with pytest.raises(QueryFileError, match=message) as info:
        load_queries(path)
    assert ":2:" in str(info.value)


def test_duplicate_ids_are_refused(tmp_path):
    with pytest.raises(QueryFileError, match="duplicate"):
        load_queries(write_queries(tmp_path / "d.jsonl", [QUERIES[0], QUERIES[0]]))


def test_recall_at_k():
    assert recall_at(["a", "b"], ["x", "a", "y", "b"], 2) == 0.5
    assert recall_at(["a", "b"], ["x", "a", "y", "b"], 4) == 1.0
    assert recall_at(["a"], [], 10) == 0.0


def test_align_gold_adds_the_package_prefix_and_reports_unknown_ids():
    qs = [CodeQuery("1", "q", ("widget.Widget.focus", "nope.missing"))]
    aligned, unknown = align_gold(qs, {"textual.widget.Widget.focus"}, "textual")
    assert aligned[0].gold == ("textual.widget.Widget.focus", "nope.missing")
    assert unknown == ["nope.missing"]


def test_run_code_bench_figures_and_plan_check(tmp_path):
    repo = write_repo(tmp_path / "repo")
    conn = connect(tmp_path / "b.db")
    index = index_repo(repo, conn)
    retriever = retriever_for(conn, None, Config(), HashingEmbedder(), index=view(index))
    queries = load_queries(write_queries(tmp_path / "q.jsonl"))
    report = run_code_bench(retriever, queries, split="all")
    assert set(report.variants) == {"fused", "keyword", "semantic"}
    fused = report.variants["fused"]
    assert fused.queries == 3 and set(fused.recall) == {"5", "10", "20"}
    assert fused.recall["20"] == 1.0  # tiny repo: every gold is among 20 hits
    assert fused.plan_all_gold["heavy"] >= fused.plan_all_gold["light"] > 0
    outcome = {o.id: o for o in report.outcomes["fused"]}
    assert outcome["q1"].hits[0] == "net.http.fetch_url"
    assert dict(outcome["q1"].plan_all_gold) == {"light": True, "heavy": True}
    assert all(not o.semantic_available for o in report.outcomes["keyword"])
    data = report.to_json()
    assert set(data) >= {"queries", "recall", "plan_all_gold", "baselines"}
    assert set(data["baselines"]) == {"keyword", "semantic"}
    tune_only = run_code_bench(retriever, queries, split="tune", plans=False)
    assert tune_only.variants["fused"].queries == 2 and tune_only.variants["fused"].plan_all_gold == {}
    conn.close()


@pytest.mark.model
def test_bench_code_cli_json(tmp_path):
    repo = write_repo(tmp_path / "repo")
    queries = write_queries(tmp_path / "q.jsonl", QUERIES + [
        {"id": "q4", "query": "x", "gold": ["no.such.symbol"]}])
    result = CliRunner().invoke(main, ["bench", "code", "--queries", str(queries), "--repo", str(repo), "--db",
                                       str(tmp_path / "bench.db"), "--json", "--split", "all"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (one,) = data["repos"]
    assert one["queries"] == 4 and one["name"] == "repo" and one["role"] == "tune"
    assert set(one["recall"]) == {"5", "10", "20"}
    assert set(one["plan_all_gold"]) == {"light", "heavy"}
    assert set(one["baselines"]) == {"keyword", "semantic"}
    for baseline in one["baselines"].values():
        assert set(baseline["recall"]) == {"5", "10", "20"} and set(baseline["plan_all_gold"]) == {"light", "heavy"}
    assert one["semantic_available"] is True and one["baselines"]["semantic"]["semantic_available"] is True
    assert one["unknown_gold"] == ["no.such.symbol"]
    assert "not in the index" in result.stderr
    assert set(data["pooled"]) == {"tune"} and data["pooled"]["tune"]["queries"] == 4
    assert data["pooled"]["tune"]["fused"]["recall"] == one["recall"]  # one repository: pooled = its own


@pytest.mark.model
def test_manifest_runs_each_repository_and_pools_by_role(tmp_path):
    """Two repositories in a manifest, one tune and one held out: per-repository figures, pooled per role,
    held-out first in the table, and the share of questions naming a gold symbol verbatim."""
    write_repo(tmp_path / "a")
    write_repo(tmp_path / "b")
    write_queries(tmp_path / "a.jsonl", QUERIES[:1])
    write_queries(tmp_path / "b.jsonl", [dict(q, split="holdout") for q in QUERIES[1:]] + [
        {"id": "q9", "query": "what does fetch_url return?", "gold": ["net.http.fetch_url"], "split": "holdout"}])
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[codebase]]\nname = "alpha"\nrole = "tune"\nrepo = "a"\nqueries = "a.jsonl"\n'
                        '[[codebase]]\nname = "beta"\nrole = "holdout"\nrepo = "b"\nqueries = "b.jsonl"\n')
    args = ["bench", "code", "--manifest", str(manifest), "--db", str(tmp_path / "m.db"), "--no-pinned"]
    result = CliRunner().invoke(main, args + ["--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(r["name"], r["role"], r["queries"]) for r in data["repos"]] == [("alpha", "tune", 1), ("beta", "holdout", 3)]
    assert data["repos"][1]["gold_named"] == round(1 / 3, 4)  # q9 writes fetch_url
    assert data["pooled"]["holdout"]["repos"] == ["beta"] and data["pooled"]["holdout"]["queries"] == 3
    assert set(data["pooled"]["holdout"]) >= {"fused", "keyword", "semantic"}
    text = CliRunner().invoke(main, args + ["--role", "holdout"], catch_exceptions=False).output
    assert text.index("pooled holdout") < text.index("beta [holdout]") and "alpha" not in text
    assert "33% name a gold symbol verbatim" in text


@pytest.mark.parametrize("flags, message", [
    (["--queries", "q.jsonl"], "pairs"),
    (["--manifest", "m.toml", "--queries", "q.jsonl", "--repo", "."], "not both"),
])
def test_bench_code_refuses_unpaired_or_mixed_inputs(tmp_path, monkeypatch, flags, message):
    monkeypatch.chdir(tmp_path)
    write_queries(tmp_path / "q.jsonl")
    (tmp_path / "m.toml").write_text("", encoding="utf-8")
    result = CliRunner().invoke(main, ["bench", "code", *flags])
    assert result.exit_code == 2 and message in result.output


def test_manifest_errors_name_the_entry(tmp_path):
    from ctxbench.bench.code import load_manifest

    bad = tmp_path / "m.toml"
    bad.write_text('[[codebase]]\nname = "x"\nrole = "dev"\nrepo = "r"\nqueries = "q"\n', encoding="utf-8")
    with pytest.raises(QueryFileError, match="codebase 1: role"):
        load_manifest(bad)
    bad.write_text("", encoding="utf-8")
    with pytest.raises(QueryFileError, match="no \\[\\[codebase\\]\\]"):
        load_manifest(bad)


def test_manifest_and_cli_accept_every_held_out_round(tmp_path):
    """Each held-out round has its own role (holdout, holdout2..holdout6), in the manifest and in --role."""
    from ctxbench.bench.code import ROLES, load_manifest

    manifest = tmp_path / "m.toml"
    manifest.write_text("".join(f'[[codebase]]\nname = "{r}"\nrole = "{r}"\nrepo = "missing-{r}"\nqueries = "q.jsonl"\n'
                                for r in ROLES), encoding="utf-8")
    write_queries(tmp_path / "q.jsonl")
    assert [s.role for s in load_manifest(manifest)] == ["tune", "holdout", "holdout2", "holdout3", "holdout4",
                                                         "holdout5", "holdout6"]
    result = CliRunner().invoke(main, ["bench", "code", "--manifest", str(manifest), "--role", "holdout6",
                                       "--db", str(tmp_path / "m.db")])
    # the role is accepted and selects its one repository, which is missing here: a clear line, exit 2
    assert result.exit_code == 2 and "holdout6: repository" in result.output and "does not exist" in result.output


def test_kinds_lines_and_verbatim_names():
    rows = [{"id": "a", "query": "Why does pad() add spaces?", "gold": ["render.text.pad"], "kind": "why"}]
    line = json.dumps(rows[0])
    import tempfile, pathlib

    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "q.jsonl"
        path.write_text(line + "\n", encoding="utf-8")
        with pytest.raises(QueryFileError, match="kind must be one of"):
            load_queries(path)
        path.write_text(json.dumps(dict(rows[0], kind="how", lines={"render.text.other": [1, 2]})) + "\n")
        with pytest.raises(QueryFileError, match="not a gold symbol"):
            load_queries(path)
        path.write_text(json.dumps(dict(rows[0], kind="how", lines={"render.text.pad": [5, 2]})) + "\n")
        with pytest.raises(QueryFileError, match="first <= last"):
            load_queries(path)
        path.write_text(json.dumps(dict(rows[0], kind="how", lines={"render.text.pad": [2, 5]})) + "\n")
        (q,) = load_queries(path)
    assert q.kind == "how" and q.lines == (("render.text.pad", 2, 5),)
    assert q.names_gold  # "pad" is written as a whole word
    assert not CodeQuery("b", "padding the text", ("render.text.pad",)).names_gold  # not a whole word
    assert not CodeQuery("c", "Pad the text", ("render.text.pad",)).names_gold  # case-sensitive
    aligned, _ = align_gold([q], ["pkg.render.text.pad"], "pkg")
    assert aligned[0].lines == (("pkg.render.text.pad", 2, 5),)  # the ranges follow their gold id


def test_excerpt_check_counts_marked_lines_inside_the_heavy_excerpt(tmp_path):
    """The bench's excerpt figure: a how question whose marked lines are in the body of its gold function."""
    repo = write_repo(tmp_path / "repo")
    conn = connect(tmp_path / "b.db")
    retriever = retriever_for(conn, repo, Config(), HashingEmbedder(), index=view(index_repo(repo, conn)))
    body = [n for n, text in enumerate((repo / "store/cache.py").read_text().splitlines(), 1) if "evict" not in text
            and "self.data.pop" in text]
    inside = CodeQuery("e1", "evict the oldest cache entry when full", ("store.cache.LRUCache.set",), "tune", "how",
                       (("store.cache.LRUCache.set", body[0], body[0]),))
    outside = CodeQuery("e2", "evict the oldest cache entry when full", ("store.cache.LRUCache.set",), "tune", "how",
                        (("store.cache.LRUCache.set", 1, 1),))
    report = run_code_bench(retriever, [inside, outside], split="all", variants=("fused",), pinned=False)
    assert [o.excerpt_ok for o in report.outcomes["fused"]] == [True, False]
    fig = report.variants["fused"]
    assert fig.excerpt_questions == 2 and fig.excerpt_answer == 0.5
    conn.close()


def test_the_light_plan_is_checked_on_the_set_the_app_retrieves_in_light(tmp_path):
    """_blank is only a graph neighbour of pad here: Heavy expands the graph and gets it, Light does not —
    in the app (ModeRetrieval strips graph expansion in Light) and therefore in the bench too."""
    from ctxbench.service.attach import ModeRetrieval
    from ctxbench.service.workbench import Workbench

    repo = write_repo(tmp_path / "repo")
    conn = connect(tmp_path / "b.db")
    index = index_repo(repo, conn)
    retriever = retriever_for(conn, None, Config(), HashingEmbedder(), index=view(index))
    query = CodeQuery("g1", "Fill with spaces", ("render.text.pad", "render.text._blank"))
    report = run_code_bench(retriever, [query], split="all", variants=("fused",))
    flags = dict(report.outcomes["fused"][0].plan_all_gold)
    with Workbench(tmp_path / "app.db", Config()) as wb:
        wb.retriever = ModeRetrieval(retriever, wb.config, wb.tokenizer)
        sid = wb.new_session()
        app = {mode: {i.id.removeprefix("card:") for i in plan_of(wb, sid, query.query, mode=mode, budget=8000,
                                                                   store=False).included if i.kind == "symbol_card"}
               for mode in ("light", "heavy")}
    assert flags == {"light": all(g in app["light"] for g in query.gold),
                     "heavy": all(g in app["heavy"] for g in query.gold)}
    assert flags == {"light": False, "heavy": True}
    assert set(report.to_json()["recall_light"]) == {"5", "10", "20"}
    conn.close()


def test_pinned_followup_pins_each_gold_of_multi_gold_queries(tmp_path):
    repo = write_repo(tmp_path / "repo")
    conn = connect(tmp_path / "b.db")
    retriever = retriever_for(conn, None, Config(), HashingEmbedder(), index=view(index_repo(repo, conn)))
    report = run_code_bench(retriever, load_queries(write_queries(tmp_path / "q.jsonl")), split="all", plans=False)
    pinned = report.pinned
    assert (pinned.queries, pinned.cases) == (1, 2)  # q3 has two gold symbols, each pinned once
    assert set(pinned.recall) == {"light", "heavy"} and pinned.recall["heavy"]["10"] == 1.0
    assert report.to_json()["pinned_followup"]["cases"] == 2
    assert run_code_bench(retriever, [], split="all", pinned=False).pinned is None
    conn.close()


def test_the_shipped_manifest_keeps_each_held_out_round_apart():
    """benchmarks/codebases.toml loads; httpx and js-yaml are the second held-out pair (role holdout2),
    dateutil and query-core the third (role holdout3), sortedcontainers and semver the fourth (role holdout4),
    mistune and immer the fifth (role holdout5), transitions and mobx the sixth (role holdout6), each apart from
    the earlier held-out sets and from the tuning repositories."""
    from ctxbench.bench.code import load_manifest

    specs = load_manifest(Path(__file__).resolve().parents[3] / "benchmarks" / "codebases.toml")
    roles: dict[str, list[str]] = {}
    for spec in specs:
        roles.setdefault(spec.role, []).append(spec.name)
    assert roles == {"tune": ["textual", "click", "trio"], "holdout": ["flask", "marshmallow", "commander"],
                     "holdout2": ["httpx", "js-yaml"], "holdout3": ["dateutil", "query-core"],
                     "holdout4": ["sortedcontainers", "semver"], "holdout5": ["mistune", "immer"],
                     "holdout6": ["transitions", "mobx"]}
    for spec in specs:
        assert spec.queries.is_file(), spec.queries


@pytest.mark.model
@pytest.mark.slow
def test_an_encoder_named_on_the_command_line_runs_beside_the_configured_one_over_the_same_index(tmp_path, monkeypatch):
    """``--encoder NAME``: the packaged model's fused and semantic-only figures join the report as their own
    variants, its vectors stored under its own key; the bundled MiniLM packed as int8 rows finds what it finds."""
    from safetensors.numpy import load_file, save_file

    from ctxbench.retrieval import packaged_models as pm
    from ctxbench.retrieval.model_dir import bundled_model_path, file_sha256

    source = bundled_model_path()
    shipped = tmp_path / "models" / "packed-minilm"
    shipped.mkdir(parents=True)
    for item in source.iterdir():
        if item.is_file() and item.name not in ("model.safetensors", "README.md"):
            (shipped / item.name).write_bytes(item.read_bytes())
        elif item.is_dir():
            (shipped / item.name).mkdir()
            for inner in item.iterdir():
                (shipped / item.name / inner.name).write_bytes(inner.read_bytes())
    save_file(pm.pack(load_file(str(source / "model.safetensors"))), str(shipped / pm.PACKED_WEIGHTS))
    (shipped / pm.CHECKSUM_FILE).write_text(file_sha256(shipped / pm.PACKED_WEIGHTS) + "\n")
    monkeypatch.setattr(pm, "MODELS_DIR", tmp_path / "models")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))

    repo = write_repo(tmp_path / "repo")
    queries = write_queries(tmp_path / "q.jsonl")
    db = tmp_path / "bench.db"
    result = CliRunner().invoke(main, ["bench", "code", "--queries", str(queries), "--repo", str(repo), "--db", str(db),
                                       "--json", "--no-plans", "--no-pinned", "--encoder", "packed-minilm"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (one,) = json.loads(result.stdout)["repos"]
    assert set(one["baselines"]) == {"keyword", "semantic", "fused@packed-minilm", "semantic@packed-minilm"}
    assert one["baselines"]["semantic@packed-minilm"]["semantic_available"] is True
    assert one["baselines"]["semantic@packed-minilm"]["recall"] == one["baselines"]["semantic"]["recall"]
    keys = {row[0] for row in connect(db).execute("SELECT DISTINCT model FROM card_vectors")}
    assert len(keys) == 2 and any(k.startswith("packed-minilm#") for k in keys)
