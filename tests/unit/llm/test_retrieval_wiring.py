"""Code retrieval as the Workbench uses it (llm.wiring): pins, activation and mentions steer the plan's cards."""
from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.config import Config
from ctxbench.service.attach import attach_repository
from ctxbench.service.workbench import Workbench

from retrieval_fixture import write_repo
from plan_requests import inputs_of, plan_of

QUERY = "render table rows"


@pytest.fixture
def wb(tmp_path):
    repo = write_repo(tmp_path / "repo")
    with Workbench(tmp_path / "store.db", Config(), repo=repo) as wb:
        attach_repository(wb, repo, semantic=False)
        yield wb


@pytest.fixture
def wb_no_support(tmp_path):
    """The same, with graph support off: what personalization alone does to the order."""
    import dataclasses

    config = Config()
    config = dataclasses.replace(config, retrieval=dataclasses.replace(config.retrieval, graph_support_weight=0.0))
    repo = write_repo(tmp_path / "repo")
    with Workbench(tmp_path / "store.db", config, repo=repo) as wb:
        attach_repository(wb, repo, semantic=False)
        yield wb


def hit_order(wb: Workbench, sid: str, query: str = QUERY, mode: str = "light") -> list[str]:
    return [h.symbol for h in inputs_of(wb, sid, query, mode=mode).retrieval.hits]


def card_order(wb: Workbench, sid: str, query: str = QUERY, mode: str = "light") -> list[str]:
    plan = plan_of(wb, sid, query, mode=mode, store=False)
    return [i.id.removeprefix("card:") for i in plan.included if i.kind == "symbol_card"]


def test_a_pinned_card_symbol_joins_and_leads_the_retrieval_set(wb):
    sid = wb.new_session()
    assert "net.http.fetch_url" not in hit_order(wb, sid)
    before = hit_order(wb, sid)
    wb.pins.add(sid, "card:render.text.pad", "sticky")
    wb.pins.add(sid, "card:net.http.fetch_url", "leased")
    pinned = inputs_of(wb, sid, QUERY, mode="light").retrieval
    order = [h.symbol for h in pinned.hits]
    assert order != before and "net.http.fetch_url" in order
    assert order[0] == "render.text.pad" and order.index("render.text.pad") < before.index("render.text.pad")
    assert "pinned" in pinned.hits[0].why
    # the pinned symbol's card is the pin itself, not a second card
    plan = plan_of(wb, sid, QUERY, mode="light", store=False)
    assert "render.text.pad" not in card_order(wb, sid)
    assert any(i.kind == "pin" and i.included and "render.text.pad" in i.label for i in plan.items)


def test_activation_moves_a_card_up_in_the_plan(wb):
    sid = wb.new_session()
    before = hit_order(wb, sid)
    assert before.index("render.text._blank") < before.index("render.text.shout")
    assert "render.text.shout" not in card_order(wb, sid)  # pad, which _render_line calls, takes the last place
    wb.activation.set(sid, {"card:render.text.shout": 1.0, "group:1": 3.0})
    after = hit_order(wb, sid)
    assert after.index("render.text.shout") < after.index("render.text._blank")
    assert "render.text.shout" in card_order(wb, sid)
    shout = next(h for h in inputs_of(wb, sid, QUERY, mode="light").retrieval.hits if h.symbol == "render.text.shout")
    assert "recently active" in shout.why


def test_personalized_pagerank_lifts_the_neighbours_of_active_symbols(wb_no_support):
    """_render_line calls pad: activity on _render_line brings pad up, shout (no edge to it) stays. (Graph
    support, on by default, lifts pad already because the question's best hit calls it: off here.)"""
    wb = wb_no_support
    sid = wb.new_session()
    before = hit_order(wb, sid)
    assert before.index("render.text.shout") < before.index("render.text.pad")
    wb.activation.set(sid, {"card:render.table.TableRenderer._render_line": 1.0})
    after = hit_order(wb, sid)
    assert after.index("render.text.pad") < after.index("render.text.shout")
    assert "render.text.pad" in card_order(wb, sid)
    pad = next(h for h in inputs_of(wb, sid, QUERY, mode="light").retrieval.hits if h.symbol == "render.text.pad")
    assert "near active code" in pad.why and dict(pad.components)["personalized"] > 0


def test_a_path_mentioned_in_the_query_personalizes_retrieval(wb):
    sid = wb.new_session()
    plain = inputs_of(wb, sid, "table rows and text", mode="light").retrieval
    mentioned = inputs_of(wb, sid, "table rows and text in render/text.py", mode="light").retrieval
    by_symbol = {h.symbol: h for h in mentioned.hits}
    assert "mentioned" in by_symbol["render.text"].why
    assert [h.symbol for h in mentioned.hits] != [h.symbol for h in plain.hits]
    plain_rank = [h.symbol for h in plain.hits]
    mentioned_rank = [h.symbol for h in mentioned.hits]
    assert mentioned_rank.index("render.text") < plain_rank.index("render.text")


def test_the_retrieval_cache_passes_pins_and_activation_through(wb):
    sid = wb.new_session()  # attach_repository's ModeRetrieval remembers sets by everything they depend on
    assert "net.http.fetch_url" not in hit_order(wb, sid)
    wb.pins.add(sid, "card:net.http.fetch_url", "sticky")
    assert "net.http.fetch_url" in hit_order(wb, sid)  # a new pin is not answered from the cache
    before = hit_order(wb, sid)
    wb.activation.set(sid, {"card:render.text.shout": 1.0})
    after = hit_order(wb, sid)
    assert after.index("render.text.shout") < before.index("render.text.shout")


def test_the_retriever_is_given_what_the_turn_knows(wb):
    """The seam is one typed call: the plan's budget, the live pins, activation and what the query mentions."""
    seen = []

    class Recording:
        def retrieve(self, query, *, mode, budget, pins, activation, mentioned):
            seen.append((query, mode, budget, tuple(p.target for p in pins), dict(activation), tuple(mentioned)))
            return inner.retrieve(query, mode=mode, budget=budget, pins=pins, activation=activation,
                                  mentioned=mentioned)

    inner = wb.retriever
    wb.retriever = Recording()
    sid = wb.new_session()
    wb.pins.add(sid, "card:net.http.fetch_url", "sticky")
    wb.pins.add(sid, "card:render.text.shout", "leased", ttl=0)  # an expired lease steers nothing
    wb.activation.set(sid, {"card:render.text.shout": 0.5})
    assert hit_order(wb, sid)
    assert seen == [(QUERY, "light", wb.settings(sid).budget, ("card:net.http.fetch_url",),
                     {"card:render.text.shout": 0.5}, ())]


def write_wide_repo(root: Path) -> Path:
    """A repository whose module map is far bigger than any scaffold share: 12 packages of 10 modules."""
    for p in range(12):
        for m in range(10):
            path = root / f"package_number_{p:02d}" / f"module_with_a_long_name_{m:02d}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f'"""Module {m} of package {p}."""\n\n\ndef helper_{p}_{m}(value):\n'
                            f'    """Return the value for table {p} row {m}."""\n    return value\n')
        (root / f"package_number_{p:02d}" / "__init__.py").write_text("")
    return root


@pytest.fixture
def wide(tmp_path):
    repo = write_wide_repo(tmp_path / "wide")
    with Workbench(tmp_path / "wide.db", Config(), repo=repo) as wb:
        attach_repository(wb, repo, semantic=False)
        yield wb


def scaffold_item(plan):
    (item,) = [i for i in plan.items if i.kind == "scaffold"]
    return item


def test_the_scaffold_is_folded_to_the_plans_own_share_of_the_budget(wide):
    sid = wide.new_session()
    light = wide.config.planner.mode("light")
    small = plan_of(wide, sid, "which helper returns the value of a table row?", mode="light", budget=2000, store=False)
    item = scaffold_item(small)
    assert item.included and item.reason == "scaffold"
    assert 0 < item.tokens <= int(2000 * light.scaffold_share)
    large = plan_of(wide, sid, "which helper returns the value of a table row?", mode="light", budget=32000, store=False)
    big = scaffold_item(large)
    default_cap = int(wide.config.planner.default_budget * max(m.scaffold_share for m in wide.config.planner.modes))
    assert big.included and default_cap < big.tokens <= int(32000 * light.scaffold_share)
    texts = [p.messages()[[i.id for i in p.included].index("scaffold")]["content"] for p in (small, large)]
    assert "Navigation" in texts[0] and len(texts[0]) < len(texts[1]) and "## Repository map" in texts[1]
    assert small.retrieval_set_id != large.retrieval_set_id  # the scaffold is part of the set
    # same inputs, same scaffold, same PlanId
    again = plan_of(wide, sid, "which helper returns the value of a table row?", mode="light", budget=2000, store=False)
    assert again.plan_id == small.plan_id


def test_mode_off_lists_the_scaffold_it_leaves_out(wide):
    sid = wide.new_session()
    plan = plan_of(wide, sid, "which helper returns the value of a table row?", mode="off", budget=2000, store=False)
    item = scaffold_item(plan)
    assert not item.included and item.reason == "mode_off" and item.tokens > 0


def test_the_workbench_session_plugs_in_the_same_folding_retriever(tmp_path):
    from ctxbench.service.options import LaunchOptions
    from ctxbench.service.session import WorkbenchSession

    repo = write_wide_repo(tmp_path / "wide")
    session = WorkbenchSession(LaunchOptions(db_path=tmp_path / "tui.db", repo=repo, warm_embedder=False), Config())
    session.open()
    try:
        statuses = []
        session.attach_repository(statuses.append)
        assert session.retrieval_ready and session.attached is not None and session.attached.code is not None
        assert [s.state for s in statuses] == ["busy"] * (len(statuses) - 1) + ["ready"]
        wb = session.wb
        sid = wb.new_session()
        wb.pins.add(sid, "card:package_number_03.module_with_a_long_name_04.helper_3_4", "sticky")
        plan = plan_of(wb, sid, "which helper returns the value of a table row?", mode="light", budget=2000,
                       store=False)
        assert scaffold_item(plan).included
        first = inputs_of(wb, sid, plan.query, mode="light", budget=2000).retrieval.hits[0]
        assert first.symbol == "package_number_03.module_with_a_long_name_04.helper_3_4" and "pinned" in first.why
    finally:
        session.close()


def test_names_in_the_query_alone_do_not_personalize(wb):
    sid = wb.new_session()
    named = inputs_of(wb, sid, "how does `TableRenderer._render_line` pad cells?", mode="light").retrieval
    assert named.hits and not any("personalized" in dict(h.components) for h in named.hits)
    wb.activation.set(sid, {"card:render.text.shout": 1.0})
    active = inputs_of(wb, sid, "how does `TableRenderer._render_line` pad cells?", mode="light").retrieval
    assert any("personalized" in dict(h.components) for h in active.hits)
