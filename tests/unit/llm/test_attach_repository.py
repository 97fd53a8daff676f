"""``llm.wiring.attach_repository``: semantic search for headless callers, errors that surface, notes in the set."""
from __future__ import annotations

import json
import os
import sys

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.service.attach import attach_repository
from ctxbench.retrieval.embedder import EmbedderError, HashingEmbedder
from ctxbench.retrieval.retriever import NOTE_NO_EMBEDDER
from ctxbench.service.workbench import Workbench

from retrieval_fixture import write_repo
from plan_requests import inputs_of

QUERY = "download a web page over http"


@pytest.fixture
def repo(tmp_path):
    return write_repo(tmp_path / "repo")


@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "store.db", Config()) as wb:
        yield wb


def retrieval(wb, query=QUERY):
    sid = wb.new_session()
    return inputs_of(wb, sid, query, mode="light").retrieval


def test_a_given_embedder_gives_semantic_search_and_ranks_history(wb, repo):
    embedder = HashingEmbedder()
    code = attach_repository(wb, repo, embedder=embedder)
    assert code is not None
    rs = retrieval(wb)
    assert rs.semantic_available and rs.hits[0].symbol == "net.http.fetch_url"
    assert any("semantic" in h.why for h in rs.hits)
    assert wb.history.embedder() is embedder


def test_without_semantic_the_set_says_so(wb, repo):
    attach_repository(wb, repo, semantic=False)
    rs = retrieval(wb)
    assert not rs.semantic_available and NOTE_NO_EMBEDDER in rs.notes and rs.hits


class BrokenEmbedder(HashingEmbedder):
    """An embedding model that failed to load."""

    error = EmbedderError("embedding model failed to load: weights missing")

    @property
    def ready(self) -> bool:
        return False

    def wait(self, timeout=None):
        raise self.error

    def encode(self, texts, progress=None, **kwargs):
        raise self.error


def test_a_model_that_cannot_load_is_an_error_or_a_note(wb, repo):
    with pytest.raises(EmbedderError):
        attach_repository(wb, repo, embedder=BrokenEmbedder())
    attach_repository(wb, repo, embedder=BrokenEmbedder(), wait_for_model=False)
    rs = retrieval(wb)
    assert rs.hits and not rs.semantic_available
    assert "semantic search not available: embedding model failed to load: weights missing" in rs.notes


def test_an_import_error_is_not_hidden(wb, repo, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctxbench.retrieval.retriever", None)
    with pytest.raises(ImportError):
        attach_repository(wb, repo, semantic=False)


def _chat(db, *args):
    return CliRunner().invoke(main, ["chat", *args, "--db", str(db), "--json"], env={"CTXBENCH_CONFIG": os.devnull})


def _first_set(db, out):
    with Workbench(db, Config()) as wb:
        return wb.plans.retrieval_set(wb.plans.get(out["plan_ids"][0]).retrieval_set_id)


def test_chat_no_semantic_retrieves_without_the_model(tmp_path, repo):
    result = _chat(tmp_path / "ctx.db", QUERY, "--repo", str(repo), "--no-semantic")
    assert result.exit_code == 0, result.output
    rs = _first_set(tmp_path / "ctx.db", json.loads(result.stdout))
    assert not rs.semantic_available and "semantic search off (--no-semantic)" in rs.notes


@pytest.mark.slow
@pytest.mark.model
def test_chat_with_a_repository_uses_semantic_search_by_default(tmp_path, repo, real_embedder, monkeypatch):
    import ctxbench.retrieval.embedder as embedder_module

    monkeypatch.setattr(embedder_module, "Embedder", lambda config=None, **kw: real_embedder)  # loaded once
    result = _chat(tmp_path / "ctx.db", QUERY, "--repo", str(repo))
    assert result.exit_code == 0, result.output
    rs = _first_set(tmp_path / "ctx.db", json.loads(result.stdout))
    assert rs.semantic_available and rs.notes == ()
    assert rs.hits[0].symbol == "net.http.fetch_url" and "semantic" in rs.hits[0].why
