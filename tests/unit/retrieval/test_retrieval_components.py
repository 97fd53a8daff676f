"""Retrieval as components: the component table, the per-version frozen tables, the pure fusion stages and the
explainer. A tiny indexed repository, no model (keyword, name, scope, phrase and graph components)."""
from __future__ import annotations

import dataclasses

import pytest

from ctxbench.config import Config
from ctxbench.retrieval import stages
from ctxbench.retrieval.components import COMPONENTS, SOURCES
from ctxbench.retrieval.explain import STAGE_WORDS
from ctxbench.retrieval.fuse import Fused
from ctxbench.service.index_views import retriever_for
from ctxbench.retrieval.tables import VersionedTables
from ctxbench.store.db import connect

from retrieval_fixture import index_repo, view, with_retrieval, write_repo

QUESTION = "how is one row formatted as a padded line by the TableRenderer"


@pytest.fixture
def conn(tmp_path):
    c = connect(tmp_path / "store.db")
    yield c
    c.close()


def test_every_component_is_named_once_and_reads_a_real_weight_field():
    names = [c.name for c in COMPONENTS]
    assert len(names) == len(set(names))
    config = Config()
    for c in COMPONENTS:
        section, field = c.weight_field
        assert field in {f.name for f in dataclasses.fields(getattr(config, section))}, c.name
        assert isinstance(c.weight(config.retrieval, config.capsules), float)
        assert c.source in SOURCES, c.name
    stage_keys = {key for key, _, _ in STAGE_WORDS}
    assert not stage_keys & set(names)  # a stage's score never shadows a component's


def test_a_component_switched_off_by_its_weight_is_not_run(tmp_path, conn):
    """A phrase in quotes is searched only while the phrase component weighs something."""
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    question = 'where is "Fill with spaces" done'
    on = retriever_for(conn, None, with_retrieval(phrase_weight=1.0), None, index=index)
    off = retriever_for(conn, None, with_retrieval(phrase_weight=0.0), None, index=index)
    calls: list[str] = []
    real = off.phrase_ranking
    off.phrase_ranking = lambda *a, **kw: calls.append("phrase") or real(*a, **kw)  # type: ignore[method-assign]
    assert any("phrase" in dict(h.components) for h in on.retrieve(question, k=10).hits)
    assert all("phrase" not in dict(h.components) for h in off.retrieve(question, k=10).hits)
    assert calls == []


def test_the_tables_are_built_once_per_index_version_and_never_change(tmp_path, conn):
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    kept = VersionedTables()
    built: list[str] = []

    def build(v):
        built.append(v.version)
        return object()

    first = kept.get("probe", index, build)
    assert kept.get("probe", index, build) is first and built == [index.version]
    newer = dataclasses.replace(index, version=index.version + "-next")
    assert kept.get("probe", newer, build) is not first and built == [index.version, newer.version]
    tables = kept.tables(index)
    assert kept.tables(index) is tables
    with pytest.raises(dataclasses.FrozenInstanceError):
        tables.names = {}  # type: ignore[misc]
    assert tables.names["pad"] == ("render.text.pad",)
    assert tables.members["render.table.TableRenderer"] == ("render.table.TableRenderer.__init__",
                                                           "render.table.TableRenderer.render",
                                                           "render.table.TableRenderer._render_line")
    assert tables.path_symbols("render/text.py") == ["render.text"]


def test_a_fusion_stage_returns_new_entries_and_leaves_its_input_as_it_was(tmp_path, conn):
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    rc = with_retrieval(graph_support_weight=1.0, graph_support_seeds=3, prf_keyword_weight=1.0).retrieval
    tables = retriever_for(conn, None, Config(), None, index=index).tables(index)
    entries = {"render.table.TableRenderer.render": Fused("render.table.TableRenderer.render", 0.03, {"keyword": 2.0},
                                                          {"keyword": 1}),
               "render.table.TableRenderer._render_line": Fused("render.table.TableRenderer._render_line", 0.02,
                                                                {"keyword": 1.0}, {"keyword": 2})}
    before = {sid: dataclasses.replace(f, scores=dict(f.scores), ranks=dict(f.ranks)) for sid, f in entries.items()}
    weighed = stages.weigh_kinds(entries, tables, frozenset(), rc)
    supported, notes = stages.graph_support(weighed, index.graph, rc)
    expanded, graph_notes = stages.expand_graph(supported, index.graph, index.cards, tables, frozenset(), None, rc)
    boosted = stages.add_boosts(expanded, stages.Boosts(pins=frozenset({"render.text.pad"})), rc)
    assert entries == before  # no stage changed what it was given
    assert "support" in supported["render.table.TableRenderer._render_line"].scores and notes
    assert "support" not in weighed["render.table.TableRenderer._render_line"].scores
    assert set(expanded) - set(supported) == set(graph_notes) - set(supported)
    assert boosted["render.text.pad"].scores["pin"] == 1.0
    assert "render.text.pad" not in expanded or "pin" not in expanded["render.text.pad"].scores
    with pytest.raises(dataclasses.FrozenInstanceError):
        boosted["render.text.pad"].score = 0.0  # type: ignore[misc]


def test_a_hit_explains_itself_in_the_component_tables_order(tmp_path, conn):
    """The why lists each component that found the hit in table order, then the stages; the figures likewise."""
    index = view(index_repo(write_repo(tmp_path / "repo"), conn))
    r = retriever_for(conn, None, with_retrieval(phrase_weight=1.0), None, index=index)
    hits = r.retrieve(QUESTION + ' "padded line"', k=10, pins=["card:render.text.pad"]).hits
    order = [c.name for c in COMPONENTS] + ["keyword_rank"] + [key for key, _, _ in STAGE_WORDS]
    rank = {name: i for i, name in enumerate(order)}
    rank["keyword_rank"] = rank["keyword"]
    for hit in hits:
        figures = [name for name, _ in hit.components]
        assert figures == sorted(figures, key=rank.__getitem__), hit.symbol
        assert hit.why.startswith("score ")
    pinned = next(h for h in hits if h.symbol == "render.text.pad")
    assert pinned.why.endswith("pinned") and ("pin", 1.0) in pinned.components
