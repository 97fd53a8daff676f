"""The code graph: PageRank (plain and personalized), neighbours, and the orientation scaffold."""
from __future__ import annotations

import pytest

from ctxbench.codegraph.graph import build_graph, callees, callers, neighbours, pagerank, personalization
from ctxbench.codegraph.resolve import Edge
from ctxbench.codegraph.scaffold import MAP_HEADER, build_scaffold
from ctxbench.records.code import Symbol
from ctxbench.config import IndexConfig
from ctxbench.tokens import get_tokenizer


def sym(sid: str, kind: str = "function", path: str = "") -> Symbol:
    module = sid.rsplit(".", 1)[0] if kind != "module" else sid
    return Symbol(sid, kind, sid.rsplit(".", 1)[-1], module, path or module.replace(".", "/") + ".py", 1, 2, "python",
                  f"def {sid.rsplit('.', 1)[-1]}()", f"Doc of {sid}.", (), module if kind != "module" else "")


@pytest.fixture()
def small_graph():
    symbols = [sym("a", "module"), sym("b", "module")] + [sym(f"a.f{i}") for i in range(6)] + [sym("b.hub"), sym("b.leaf")]
    edges = [Edge("a", f"a.f{i}", "contains") for i in range(6)] + [Edge("b", "b.hub", "contains"),
                                                                      Edge("b", "b.leaf", "contains")]
    edges += [Edge(f"a.f{i}", "b.hub", "calls") for i in range(6)]  # everybody calls the hub
    edges += [Edge("b.hub", "b.leaf", "references"), Edge("a", "b", "imports")]
    return {s.id: s for s in symbols}, build_graph(symbols, edges)


def test_pagerank_ranks_the_hub_first(small_graph):
    _, graph = small_graph
    scores = pagerank(graph)
    assert abs(sum(scores.values()) - 1.0) < 1e-6
    callers_ = [f"a.f{i}" for i in range(6)]
    assert scores["b.hub"] > 3 * max(scores[c] for c in callers_)  # six callers feed it
    assert scores["b.leaf"] > max(scores[c] for c in callers_)  # and it passes rank on to what it references


def test_personalization_shifts_the_ranking(small_graph):
    _, graph = small_graph
    plain = pagerank(graph)
    weights = personalization(graph, pins=["a.f3"], mentioned=["a.f4"], activation={"a.f5": 2.0})
    assert set(weights) == {"a.f3", "a.f4", "a.f5"}
    personal = pagerank(graph, weights)
    for sid in ("a.f3", "a.f4", "a.f5"):
        assert personal[sid] > plain[sid]
    assert personal["a.f3"] > personal["a.f0"]
    assert personal["a.f0"] < plain["a.f0"]
    # a pinned module spreads its weight over what it contains
    module_pin = personalization(graph, pins=["b"])
    assert {"b", "b.hub", "b.leaf"} == set(module_pin)
    assert personalization(graph, pins=["no.such.symbol"]) == {}


def test_pagerank_weights_come_from_config(small_graph):
    _, graph = small_graph
    no_calls = IndexConfig(pagerank_calls_weight=0.0)
    assert pagerank(graph, None, no_calls)["b.hub"] < pagerank(graph)["b.hub"]


def test_neighbours_callers_and_callees(small_graph):
    _, graph = small_graph
    assert callers(graph, "b.hub") == [f"a.f{i}" for i in range(6)]
    assert callees(graph, "a.f0") == ["b.hub"]
    rel = {(n.symbol, n.relation) for n in neighbours(graph, "b.hub")}
    assert ("b", "contained in") in rel
    assert ("b.leaf", "references") in rel
    assert ("a.f0", "called by") in rel
    assert neighbours(graph, "b.hub", kinds=("calls",), direction="out") == []
    assert len(neighbours(graph, "b.hub", limit=2)) == 2
    assert neighbours(graph, "missing") == []


def test_edges_of_several_kinds_merge(small_graph):
    symbols, _ = small_graph
    graph = build_graph(symbols.values(), [Edge("a.f0", "b.hub", "references"), Edge("a.f0", "b.hub", "calls")])
    assert graph.edges["a.f0", "b.hub"]["kinds"] == ("calls", "references")
    assert graph.edges["a.f0", "b.hub"]["kind"] == "calls"


def deep_symbols(n_dirs: int = 12, files_per_dir: int = 8) -> dict[str, Symbol]:
    out = {}
    for d in range(n_dirs):
        for f in range(files_per_dir):
            path = f"src/pkg{d}/sub{d % 3}/deeper/mod{f}.py"
            mid = path[:-3].replace("/", ".")
            out[mid] = Symbol(mid, "module", f"mod{f}", mid, path, 1, 10, "python", f"module {mid}")
            fid = f"{mid}.func{f}"
            out[fid] = Symbol(fid, "function", f"func{f}", mid, path, 2, 5, "python", f"def func{f}(x)",
                              "Does a thing.", (), mid)
    return out


@pytest.mark.parametrize("budget", [40, 80, 150, 400, 4000])
def test_scaffold_fits_its_budget(budget):
    tokenizer = get_tokenizer()
    symbols = deep_symbols()
    edges = [Edge(s.parent, s.id, "contains") for s in symbols.values() if s.parent]
    graph = build_graph(symbols.values(), edges)
    text = build_scaffold(graph, symbols, budget, tokenizer)
    assert tokenizer.count(text) <= budget
    assert text  # something always fits these budgets


def test_scaffold_folds_deep_folders_and_names_central_symbols():
    tokenizer = get_tokenizer()
    symbols = deep_symbols()
    edges = [Edge(s.parent, s.id, "contains") for s in symbols.values() if s.parent]
    edges += [Edge(f"src.pkg{d}.sub{d % 3}.deeper.mod1.func1", "src.pkg0.sub0.deeper.mod0.func0", "calls")
              for d in range(1, 12)]
    graph = build_graph(symbols.values(), edges)
    full = build_scaffold(graph, symbols, 100000, tokenizer)
    assert "mod7.py" in full and "(8 files)" not in full
    assert "request_code_context" in full
    assert "- src.pkg0.sub0.deeper.mod0.func0 — def func0(x) — Does a thing." in full
    folded = build_scaffold(graph, symbols, 300, tokenizer)
    assert tokenizer.count(folded) <= 300
    assert MAP_HEADER in folded
    assert "files)" in folded  # deep folders folded into "name/ (N files)"
    assert "src.pkg0.sub0.deeper.mod0.func0" in folded
    assert build_scaffold(graph, symbols, 0, tokenizer) == ""
