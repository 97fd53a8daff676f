"""Query clusters (seed 002 "phases"): assignment by cosine to the current centroid, the threshold, reproducible
ids, the cluster recorded in plans and kept across reopening, activation and leases scoped to the cluster."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ctxbench.config import Config, config_from
from ctxbench.config import ConfigError
from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.retrieval.query_clusters import QueryCluster, assign, assign_all
from ctxbench.service.attach import attach_repository
from ctxbench.service.workbench import Workbench

from retrieval_fixture import write_repo
from plan_requests import inputs_of, plan_of

TABLES = ["render table rows", "render the table rows as padded text", "table rows render width"]
CACHE = "lru cache eviction of the oldest key"


def retrieval_config(**changes) -> Config:
    config = Config()
    return dataclasses.replace(config, retrieval=dataclasses.replace(config.retrieval, **changes))


def open_wb(path, repo, config: Config | None = None, embedder=None) -> Workbench:
    wb = Workbench(path / "store.db", config or Config(), repo=repo)
    attach_repository(wb, repo, embedder=embedder or HashingEmbedder())
    return wb


def send(wb: Workbench, sid: str, text: str):
    """One turn as the turn runner makes it: the user's message stored, its plan stored, a reply."""
    group = wb.messages.append(sid, "user", text).group_id
    plan = plan_of(wb, sid, None, current_group=group)
    wb.messages.append(sid, "assistant", "ok", group_id=group)
    return plan


@pytest.fixture
def repo(tmp_path):
    return write_repo(tmp_path / "repo")


# -- the rule ---------------------------------------------------------------------------------------------------

def test_a_query_joins_the_current_cluster_at_the_threshold_and_starts_one_below_it():
    x, y = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    first = assign(None, x * 3, 0.5, 1)
    assert first.started and first.similarity is None and first.cluster == QueryCluster(1, (1.0, 0.0), 1)
    # cos 60 degrees = 0.5: at the threshold it joins, and the centroid is the running mean of the unit vectors
    at = np.array([0.5, np.sqrt(3) / 2])
    joined = assign(first.cluster, at, 0.5, 2)
    assert not joined.started and joined.cluster.id == 1 and joined.cluster.count == 2
    assert joined.similarity == pytest.approx(0.5, abs=1e-6)
    assert np.allclose(joined.cluster.centroid, (x + at) / 2, atol=1e-6)
    # just below it starts cluster 2 with the query as its centroid
    below = assign(first.cluster, np.array([0.49, np.sqrt(1 - 0.49 ** 2)]), 0.5, 2)
    assert below.started and below.cluster == QueryCluster(2, below.cluster.centroid, 1)
    assert below.similarity == pytest.approx(0.49, abs=1e-6)
    # orthogonal: a new cluster; another embedding size (another model): a new cluster too
    assert assign(first.cluster, y, 0.1, 7).cluster.id == 7
    assert assign(joined.cluster, np.ones(3), -1.0, 3).started


def test_only_the_current_cluster_counts_coming_back_to_a_topic_starts_a_new_one():
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    ids = [x.cluster.id for x in assign_all([a, a, b, a], 0.5)]
    assert ids == [1, 1, 2, 3]


def test_assignment_is_reproducible():
    rng = np.random.default_rng(7)
    base = rng.normal(size=(3, 32))
    vectors = [base[i // 4] + 0.3 * rng.normal(size=32) for i in range(12)]
    once, again = assign_all(vectors, 0.6), assign_all(list(vectors), 0.6)
    assert once == again
    assert [x.cluster.id for x in once] == [1] * 4 + [2] * 4 + [3] * 4
    assert [x.cluster.count for x in once][:4] == [1, 2, 3, 4]


def test_the_threshold_and_the_scopes_are_checked_config():

    assert config_from({"retrieval": {"cluster_threshold": 0.4}}).retrieval.cluster_threshold == 0.4
    with pytest.raises(ConfigError, match="cluster_threshold"):
        config_from({"retrieval": {"cluster_threshold": 1.5}})
    with pytest.raises(ConfigError, match="activation_scope"):
        config_from({"retrieval": {"activation_scope": "task"}})


# -- in the workbench -----------------------------------------------------------------------------------------------

def test_plans_record_the_cluster_and_say_so(tmp_path, repo):
    with open_wb(tmp_path, repo) as wb:
        sid = wb.new_session()
        plans = [send(wb, sid, q) for q in (*TABLES, CACHE)]
        tags = [p.query_cluster for p in plans]
        assert [(t.id, t.queries, t.started) for t in tags] == [(1, 1, True), (1, 2, False), (1, 3, False),
                                                                (2, 1, True)]
        assert tags[1].similarity >= tags[1].threshold > tags[3].similarity
        assert "query cluster q1: started with this query (the session's first)" in plans[0].notes
        assert any(n.startswith("query cluster q1: 3 queries (this one joined it") for n in plans[2].notes)
        assert any(n.startswith("query cluster q2: started with this query (similarity") for n in plans[3].notes)
        assert plans[3].to_json()["query_cluster"]["id"] == 2
        # the stored plan and its stored inputs keep it
        assert wb.plans.get(plans[3].plan_id).query_cluster == tags[3]
        stored = wb.query_clusters.list(sid)
        assert [(r.cluster_id, r.count) for r in stored] == [(1, 1), (1, 2), (1, 3), (2, 1)]


def test_a_draft_previews_its_cluster_without_storing_it(tmp_path, repo):
    with open_wb(tmp_path, repo) as wb:
        sid = wb.new_session()
        send(wb, sid, TABLES[0])
        draft = plan_of(wb, sid, CACHE, store=True)  # a draft's plan may be stored: its message is not, nor its cluster
        assert draft.query_cluster.id == 2 and draft.query_cluster.started
        assert len(wb.query_clusters.list(sid)) == 1
        assert send(wb, sid, TABLES[1]).query_cluster.id == 1  # the draft never happened


def test_clusters_survive_reopening_and_replay_shows_them(tmp_path, repo):
    with open_wb(tmp_path, repo) as wb:
        sid = wb.new_session()
        first = [send(wb, sid, q).query_cluster for q in (TABLES[0], TABLES[1], CACHE)]
    with open_wb(tmp_path, repo) as wb:  # a fresh process: a new workbench, retriever and embedder
        group = wb.visible_messages(sid)[-1].group_id
        assert plan_of(wb, sid, None, current_group=group, store=False).query_cluster == first[-1]
        from ctxbench.llm.replay import replay

        replayed = [step.plan.query_cluster for step in replay(wb, sid)]
        assert replayed == first
        nxt = send(wb, sid, "cache eviction of the oldest lru key")
        assert (nxt.query_cluster.id, nxt.query_cluster.queries, nxt.query_cluster.started) == (2, 2, False)


def test_the_same_queries_in_the_same_order_get_the_same_ids_in_another_session(tmp_path, repo):
    with open_wb(tmp_path, repo) as wb:
        one, two = wb.new_session(), wb.new_session()
        queries = (TABLES[0], CACHE, TABLES[1], CACHE)
        a = [send(wb, one, q).query_cluster for q in queries]
        b = [send(wb, two, q).query_cluster for q in queries]
        assert a == b and [t.id for t in a] == [1, 2, 3, 4]


def test_the_query_is_encoded_once_for_retrieval_and_its_cluster(tmp_path, repo):
    class Counting(HashingEmbedder):
        queries: list[str] = []

        def encode(self, texts, progress=None, *, max_seq_length=None):
            if len(texts) == 1:
                self.queries.append(texts[0])
            return super().encode(texts, progress, max_seq_length=max_seq_length)

    embedder = Counting()
    with open_wb(tmp_path, repo, embedder=embedder) as wb:
        sid = wb.new_session()
        embedder.queries.clear()
        plan = send(wb, sid, "padding of text cells")
        assert plan.query_cluster is not None
        assert embedder.queries.count("padding of text cells") == 1


def test_a_repeated_search_reuses_its_query_vector_until_the_bench_forgets_it(tmp_path, repo):
    """The kept vectors save the cluster a second encoding; the warm-latency bench forgets them before each timed
    query, so its figure includes the encoding a new question pays."""
    class Counting(HashingEmbedder):
        calls = 0

        def encode(self, texts, progress=None, *, max_seq_length=None):
            if len(texts) == 1:
                Counting.calls += 1
            return super().encode(texts, progress, max_seq_length=max_seq_length)

    embedder = Counting()
    with open_wb(tmp_path, repo, embedder=embedder) as wb:
        retriever = wb.retriever.retriever
        retriever.retrieve("padding of text cells")
        first = Counting.calls
        retriever.retrieve("padding of text cells")
        assert Counting.calls == first
        retriever.forget_query_vectors()
        retriever.retrieve("padding of text cells")
        assert Counting.calls == first + 1


def test_no_cluster_without_semantic_search_or_in_off_mode(tmp_path, repo):
    with Workbench(tmp_path / "store.db", Config(), repo=repo) as wb:
        attach_repository(wb, repo, semantic=False)
        sid = wb.new_session()
        assert send(wb, sid, TABLES[0]).query_cluster is None
    with open_wb(tmp_path, repo) as wb:
        sid = wb.new_session()
        group = wb.messages.append(sid, "user", TABLES[0]).group_id
        assert plan_of(wb, sid, None, current_group=group, mode="off").query_cluster is None
        assert wb.query_clusters.list(sid) == ()
    with open_wb(tmp_path, repo, retrieval_config(query_clusters=False)) as wb:
        assert send(wb, wb.new_session(), TABLES[0]).query_cluster is None


# -- scoping --------------------------------------------------------------------------------------------------------

def active_hit(plan_inputs, symbol: str) -> bool:
    hit = next((h for h in plan_inputs.retrieval.hits if h.symbol == symbol), None)
    return hit is not None and "activation" in dict(hit.components)


@pytest.mark.parametrize("scope", ["session", "cluster"])
def test_activation_scoped_to_the_cluster_counts_only_uses_within_it(tmp_path, repo, scope):
    with open_wb(tmp_path, repo, retrieval_config(activation_scope=scope)) as wb:
        sid = wb.new_session()
        send(wb, sid, TABLES[0])
        wb.activation.set(sid, {"card:render.text.shout": 1.0})
        # same cluster: the activation boosts retrieval whatever the scope
        assert active_hit(inputs_of(wb, sid, TABLES[1]), "render.text.shout")
        # a query that starts a new cluster: scoped, the earlier use does not count (the draft shows it too)
        draft = inputs_of(wb, sid, CACHE)
        assert draft.query_cluster.started
        assert active_hit(draft, "render.text.shout") == (scope == "session")
        plan = send(wb, sid, CACHE)
        scoped = scope == "cluster"
        assert any("activation left out" in n for n in plan.notes) == scoped
        assert wb.activation.scores(sid) == ({} if scoped else {"card:render.text.shout": 1.0})
        # uses within the new cluster count again
        wb.activation.set(sid, {"card:render.text.shout": 1.0})
        assert active_hit(inputs_of(wb, sid, "lru cache eviction of the oldest item"), "render.text.shout")


@pytest.mark.parametrize("ends", [False, True])
def test_leases_can_end_when_a_new_cluster_starts(tmp_path, repo, ends):
    with open_wb(tmp_path, repo, retrieval_config(leases_end_with_cluster=ends)) as wb:
        sid = wb.new_session()
        send(wb, sid, TABLES[0])
        lease = wb.pins.add(sid, "card:render.text.pad", "leased")
        task_lease = wb.pins.add(sid, "card:render.text.shout", "leased", scope="task")
        sticky = wb.pins.add(sid, "card:store.cache.LRUCache", "sticky")
        same = send(wb, sid, TABLES[1])  # same cluster: nothing ends
        assert f"pin:{lease.id}" in {i.id for i in same.items}
        assert lease.id in {p.id for p in wb.pins.list(sid)}
        plan = send(wb, sid, CACHE)  # a new cluster
        live = {p.id for p in wb.pins.list(sid)}
        assert (lease.id not in live) == ends and {task_lease.id, sticky.id} <= live
        assert (f"pin:{lease.id}" not in {i.id for i in plan.items}) == ends
        assert any(n.startswith(f"leases {lease.id} ended: a new query cluster started") for n in plan.notes) == ends


# -- the real model -------------------------------------------------------------------------------------------------

@pytest.mark.model
def test_the_real_model_keeps_follow_ups_together_and_splits_topic_changes(tmp_path, repo, real_embedder):
    """With MiniLM and the default threshold: follow-up questions join their cluster, a change of topic starts one."""
    with open_wb(tmp_path, repo, embedder=real_embedder) as wb:
        sid = wb.new_session()
        asked = ["how are the rows of a table rendered as text?",
                 "why is every cell padded to its column width?",
                 "how does the cache throw away the oldest entry when it is full?",
                 "what happens to the least recently used key on a cache hit?"]
        tags = [send(wb, sid, q).query_cluster for q in asked]
        assert [t.id for t in tags] == [1, 1, 2, 2]
        assert [t.started for t in tags] == [True, False, True, False]
        assert wb.config.retrieval.cluster_threshold <= tags[1].similarity
        assert tags[2].similarity < wb.config.retrieval.cluster_threshold
