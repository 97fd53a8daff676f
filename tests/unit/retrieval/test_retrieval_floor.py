"""The relevance floor: hits nothing ties to the query stay listed but their cards are not auto-included."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ctxbench.config import Config
from ctxbench.records.messages import Message
from ctxbench.planner.plan import build_plan
from ctxbench.records.plans import PlanInputs
from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.service.index_views import retriever_for
from ctxbench.store.db import connect
from ctxbench.store.plans import get_retrieval_set, save_retrieval_set
from ctxbench.store.schema import open_core
from ctxbench.tokens import get_tokenizer

from retrieval_fixture import index_repo, view

CHAT = "thanks, that's all for today"


DEMO_REPO = Path(__file__).resolve().parents[3] / "fixtures" / "demo_repo"
QUESTION = "where is a transaction checked to be balanced?"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The bundled demo repository, indexed once for this module (no embedding)."""
    conn = connect(tmp_path_factory.mktemp("floor") / "store.db")
    yield conn, index_repo(DEMO_REPO, conn)
    conn.close()


@pytest.fixture
def conn(demo):
    return demo[0]


@pytest.fixture
def index(demo):
    return demo[1]


def retriever(conn, index, config=None, embedder="hashing"):
    return retriever_for(conn, None, config or Config(), HashingEmbedder() if embedder == "hashing" else embedder,
                     index=view(index))


def cards(rs, mode="light"):
    tok = get_tokenizer()
    turn = (Message(id=1, session_id="s", branch_id="b", group_id=1, role="user", content=rs.query),)
    plan = build_plan(PlanInputs(session_id="s", query=rs.query, history=(), current_turn=turn, budget=8000,
                                 mode=mode, retrieval=rs, tokenizer=tok.name), Config().planner, tok)
    return plan, [i for i in plan.items if i.kind == "symbol_card"]


def test_chit_chat_is_listed_but_below_the_floor(conn, index):
    # keyword and graph only (the model's verdict is tested in test_plan_repo.py); the hashing embedder
    # would match "for" in ``exponent_for``: it is lexical, not semantic
    rs = retriever(conn, index, embedder=None).retrieve(CHAT)
    assert rs.hits  # "all" still matches code (BalanceView.total, Money.allocate...), so something is listed
    assert all(h.below_threshold.startswith("below the relevance floor") for h in rs.hits)
    plan, items = cards(rs)
    assert items and not any(i.included for i in items)
    assert {i.reason for i in items} == {"below_threshold"}
    assert all("relevance floor" in i.detail for i in items)
    assert any(i.kind == "scaffold" and i.included for i in plan.items)  # Light keeps its scaffold


@pytest.mark.parametrize("embedder", ["hashing", None])
def test_a_code_question_keeps_its_cards(conn, index, embedder):
    rs = retriever(conn, index, embedder=embedder).retrieve(QUESTION)
    symbols = [h.symbol for h in rs.hits[:6]]
    assert "ledgerlite.journal.Transaction.is_balanced" in symbols
    assert not any(h.below_threshold for h in rs.hits[:6])
    _, items = cards(rs)
    included = {i.id for i in items if i.included}
    assert len(included) == 6 and "card:ledgerlite.journal.Transaction.is_balanced" in included


def test_chat_words_do_not_count_but_the_other_words_do(conn, index):
    rs = retriever(conn, index, embedder=None).retrieve("thanks, all good now: exchange rates please")
    by_symbol = {h.symbol: h for h in rs.hits}
    assert by_symbol["ledgerlite.fx.ExchangeRates"].below_threshold == ""  # "exchange", "rates": not chat words
    assert "keyword hits only on chat words" in by_symbol["web.balance_view.BalanceView.total"].below_threshold


def test_a_symbol_named_in_the_query_is_never_below_the_floor(conn, index):
    rs = retriever(conn, index, embedder=None).retrieve("thanks, that's all for `allocate` today")
    by_symbol = {h.symbol: h for h in rs.hits}
    assert by_symbol["ledgerlite.money.Money.allocate"].below_threshold == ""
    # the tests of allocate match a word of the query that is not a chat word; the rest only "all"
    assert all(h.below_threshold == "" for s, h in by_symbol.items() if "allocate" in s)
    assert by_symbol["web.balance_view.BalanceView.total"].below_threshold


def test_graph_neighbours_share_the_verdict_of_their_seed(conn, index):
    named = retriever(conn, index, embedder=None).retrieve("thanks, that's all for `allocate` today")
    neighbours = [h for h in named.hits if h.neighbour_of == "ledgerlite.money.Money.allocate"]
    assert neighbours and all(h.below_threshold == "" for h in neighbours)
    chat = retriever(conn, index, embedder=None).retrieve(CHAT)
    floored = [h for h in chat.hits if h.neighbour_of]
    assert floored and all(h.below_threshold.endswith("itself below it") for h in floored)


def test_the_floor_is_configured(conn, index):
    loose = Config(retrieval=dataclasses.replace(Config().retrieval, chat_words=(), min_semantic_similarity=-1.0))
    rs = retriever(conn, index, loose).retrieve(CHAT)
    assert rs.hits and not any(h.below_threshold for h in rs.hits)
    strict = Config(retrieval=dataclasses.replace(Config().retrieval, min_semantic_similarity=1.01))
    rs = retriever(conn, index, strict).retrieve(QUESTION)
    assert rs.hits[0].below_threshold == ""  # keyword evidence on content words still counts


def test_the_verdict_is_part_of_the_stored_set_and_its_id(conn, index, tmp_path):
    floored = retriever(conn, index).retrieve(CHAT)
    loose = Config(retrieval=dataclasses.replace(Config().retrieval, chat_words=(), min_semantic_similarity=-1.0))
    unfloored = retriever(conn, index, loose).retrieve(CHAT)
    assert [h.symbol for h in floored.hits] == [h.symbol for h in unfloored.hits]
    assert floored.id != unfloored.id
    core = open_core(tmp_path / "core.db")
    save_retrieval_set(core, floored)
    assert get_retrieval_set(core, floored.id) == floored
    core.close()
