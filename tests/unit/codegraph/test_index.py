"""The code index in the store: build, incremental runs, consistency of edges, loading, the CLI."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest
from click.testing import CliRunner

from codegraph_helpers import copy_multi, small_config
from ctxbench.codegraph.index import EmbedStats, IndexNotFound, build_index, indexed_roots, load_index
from ctxbench.store.db import connect


@pytest.fixture()
def repo(tmp_path):
    return copy_multi(tmp_path)


@pytest.fixture()
def conn(tmp_path):
    c = connect(tmp_path / "index.db")
    yield c
    c.close()


def edges_of(conn, repo_root, kind=None):
    index = load_index(repo_root, conn, small_config())
    return {(a, b) for a, b, d in index.graph.edges(data=True) if kind is None or kind in d["kinds"]}


def bump_mtime(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_build_reports_counts_skips_and_errors(repo, conn):
    result = build_index(repo, conn, small_config())
    assert result.files_parsed == result.files == 18  # big.py is over the test size limit
    assert result.symbols == result.cards > 50
    assert result.edges > 50
    assert result.changed and result.generation == 1
    errors = {e.path: e.error for e in result.parse_errors}
    assert set(errors) == {"broken.py", "web/broken.js"}
    skipped = {s.path: s.reason for s in result.skipped}
    assert skipped["big.py"] == "too_large" and skipped[".env"] == "secret_file"
    stored = {r[0] for r in conn.execute("SELECT path FROM code_files")}
    assert not stored & {".env", ".env.local", "deploy/id_rsa", "certs/server.pem", "big.py", "generated.py"}
    assert [name for name, _ in result.phases][:2] == ["walk", "diff"]
    data = result.to_json()
    for key in ("files", "symbols", "edges", "cards", "cards_embedded", "cards_reused", "skipped", "seconds",
                "parse_errors"):
        assert key in data


def test_loaded_index_has_symbols_cards_and_graph(repo, conn):
    build_index(repo, conn, small_config())
    index = load_index(repo, conn, small_config())
    assert index.symbols["pkg.core.Engine.tick"].kind == "method"
    card = index.cards["pkg.settings.client_headers"]
    assert card.redacted and "ghp_" not in card.render(with_excerpt=True)
    assert ("pkg.core.Engine", "pkg.core.Base") in edges_of(conn, repo, "inherits")
    assert index.by_path["pkg/util.py"][0] == "pkg.util"
    assert max(index.centrality, key=index.centrality.get) in index.symbols
    assert load_index(repo, conn, small_config()) is index  # cached until the index changes
    assert indexed_roots(conn) == [index.root]


def test_unchanged_repository_reuses_everything(repo, conn):
    first = build_index(repo, conn, small_config())
    bump_mtime(repo / "pkg" / "core.py")  # touched, same content
    second = build_index(repo, conn, small_config())
    assert second.files_parsed == 0
    assert second.files_reused == first.files
    assert second.cards_reused == first.cards
    assert not second.changed and second.generation == first.generation
    assert (second.symbols, second.edges) == (first.symbols, first.edges)
    assert {e.path for e in second.parse_errors} == {"broken.py", "web/broken.js"}


def test_changed_file_reparses_only_itself(repo, conn):
    first = build_index(repo, conn, small_config())
    before = load_index(repo, conn, small_config())
    util = repo / "pkg" / "util.py"
    util.write_text(util.read_text().replace("return x * 2", "return x + x"))
    bump_mtime(util)
    second = build_index(repo, conn, small_config())
    assert second.files_parsed == 1
    assert second.changed and second.generation == first.generation + 1
    changed_cards = {"pkg.util.double", "pkg.util"}  # the function's excerpt and the module's excerpt
    assert second.cards_reused == first.cards - len(changed_cards)
    after = load_index(repo, conn, small_config())
    assert after is not before and after.version != before.version
    assert "x + x" in after.cards["pkg.util.double"].excerpt
    assert after.cards["pkg.core.Engine"].card_hash == before.cards["pkg.core.Engine"].card_hash


def test_edges_from_unchanged_files_follow_their_targets(repo, conn):
    build_index(repo, conn, small_config())
    assert ("pkg.sub.deep.deep_call", "pkg.util.double") in edges_of(conn, repo, "calls")
    util = repo / "pkg" / "util.py"
    original = util.read_text()
    util.write_text(original.replace("def double(", "def double_renamed("))
    bump_mtime(util)
    result = build_index(repo, conn, small_config())
    assert result.files_parsed == 1  # deep.py is not parsed again ...
    calls = edges_of(conn, repo, "calls")
    assert ("pkg.sub.deep.deep_call", "pkg.util.double") not in calls  # ... but its edge no longer dangles
    util.write_text(original)
    bump_mtime(util)
    build_index(repo, conn, small_config())
    assert ("pkg.sub.deep.deep_call", "pkg.util.double") in edges_of(conn, repo, "calls")


def test_added_and_removed_files(repo, conn):
    first = build_index(repo, conn, small_config())
    (repo / "pkg" / "sub" / "leaf.py").unlink()
    (repo / "pkg" / "extra.py").write_text("def extra():\n    return 1\n")
    result = build_index(repo, conn, small_config())
    assert (result.files_parsed, result.files_removed) == (1, 1)
    assert result.files == first.files
    index = load_index(repo, conn, small_config())
    assert "pkg.sub.leaf.leaf_value" not in index.symbols and "pkg.extra.extra" in index.symbols
    assert not any(b.startswith("pkg.sub.leaf") for _, b in edges_of(conn, repo))


def test_config_change_parses_everything_again(repo, conn):
    first = build_index(repo, conn, small_config())
    result = build_index(repo, conn, dataclasses.replace(small_config(), snippet_lines=2))
    assert result.files_parsed == first.files
    index = load_index(repo, conn, small_config())
    assert all(len(c.snippet.splitlines()) <= 2 for c in index.cards.values())


def test_package_root_prefixes_module_ids(tmp_path, conn):
    root = tmp_path / "mypkg"
    root.mkdir()
    (root / "__init__.py").write_text('"""Top."""\nfrom .a import run\n')
    (root / "a.py").write_text("from mypkg.b import helper\n\ndef run():\n    return helper()\n")
    (root / "b.py").write_text("def helper():\n    return 1\n")
    build_index(root, conn)
    index = load_index(root, conn)
    assert {"mypkg", "mypkg.a.run", "mypkg.b.helper"} <= set(index.symbols)
    assert ("mypkg.a.run", "mypkg.b.helper") in {(a, b) for a, b in index.graph.edges}


def test_several_repositories_share_one_database(repo, tmp_path, conn):
    other = tmp_path / "other"
    other.mkdir()
    (other / "solo.py").write_text("def solo():\n    pass\n")
    build_index(repo, conn, small_config())
    build_index(other, conn, small_config())
    assert set(load_index(other, conn).symbols) == {"solo", "solo.solo"}
    assert "pkg.core.Engine" in load_index(repo, conn, small_config()).symbols
    with pytest.raises(IndexNotFound):
        load_index(tmp_path, conn)


def test_progress_and_embed_callbacks(repo, conn):
    seen: list[tuple[str, int, int]] = []
    embedded: list[int] = []

    def embed(cards, progress):
        progress(len(cards), len(cards))
        embedded.append(len(cards))
        return EmbedStats(embedded=len(cards), reused=0, model="fake")

    result = build_index(repo, conn, small_config(), progress=lambda *a: seen.append(a), embed=embed)
    phases = {p for p, _, _ in seen}
    assert {"walk", "parse", "resolve", "embed"} <= phases
    assert ("parse", result.files_parsed, result.files_parsed) in seen
    assert embedded == [result.cards] and result.cards_embedded == result.cards
    assert result.embedded and "embed" in dict(result.phases)


def test_cli_index_json(repo, tmp_path):
    from ctxbench.cli import main

    runner = CliRunner()
    db = tmp_path / "cli.db"
    args = ["index", str(repo), "--json", "--no-embed", "--db", str(db)]
    first = runner.invoke(main, args)
    assert first.exit_code == 0, first.output
    data = json.loads(first.output)
    assert data["files_parsed"] == data["files"] and data["cards_embedded"] == 0
    assert {"path": ".env", "reason": "secret_file"} in data["skipped"]
    assert {e["path"] for e in data["parse_errors"]} == {"broken.py", "web/broken.js"}
    assert "walk" in data["seconds"] and "parse" in data["seconds"]
    second = json.loads(runner.invoke(main, args).output)
    assert second["files_parsed"] == 0 and second["cards_reused"] == data["cards"]
    text = runner.invoke(main, ["index", str(repo), "--no-embed", "--db", str(db)])
    assert text.exit_code == 0 and "parse error: broken.py" in text.output


def test_a_cold_index_times_each_phase_once_secret_scan_and_cards_apart(repo, conn):
    import time

    from ctxbench.codegraph.index import TIMED_PHASES

    t0 = time.perf_counter()
    result = build_index(repo, conn, small_config())
    wall = time.perf_counter() - t0
    names = [name for name, _ in result.phases]
    assert names == list(TIMED_PHASES)
    assert names[2:5] == ["secrets", "parse", "cards"] and "capsules" in names
    assert all(sec >= 0 for _, sec in result.phases)
    assert dict(result.phases)["secrets"] > 0 and dict(result.phases)["cards"] > 0
    assert result.seconds <= wall  # no second counted in two phases
    assert set(result.to_json()["seconds"]) == set(TIMED_PHASES)


def test_an_index_run_writes_with_a_large_page_cache_and_gives_the_connection_its_own_back(repo, conn):
    from ctxbench.codegraph.index import WRITE_CACHE_KIB

    conn.execute("PRAGMA cache_size = -2000")
    seen = []
    build_index(repo, conn, small_config(),
                progress=lambda phase, done, total: seen.append(conn.execute("PRAGMA cache_size").fetchone()[0]))
    assert seen and set(seen) == {-WRITE_CACHE_KIB}
    assert conn.execute("PRAGMA cache_size").fetchone()[0] == -2000


def test_the_collector_is_paused_through_parse_resolve_and_store_and_back_after_the_run(repo, conn):
    import gc

    from ctxbench.codegraph import index as index_mod

    seen: dict[str, set[bool]] = {}
    build_index(repo, conn, small_config(),
                progress=lambda phase, done, total: seen.setdefault(phase, set()).add(gc.isenabled()))
    assert seen["parse"] == seen["resolve"] == {False}
    assert gc.isenabled()

    def fail(*args, **kwargs):
        raise RuntimeError("the store went away")

    (repo / "added.py").write_text("def added():\n    return 1\n", encoding="utf-8")
    original = index_mod.tables.write_files
    index_mod.tables.write_files = fail
    try:
        with pytest.raises(RuntimeError):
            build_index(repo, conn, small_config())
    finally:
        index_mod.tables.write_files = original
    assert gc.isenabled()
