"""``llm.wiring.attach_repository``: errors that surface, notes in the set."""
from __future__ import annotations

import sys

import pytest

from ctxbench.config import Config
from ctxbench.llm.wiring import attach_repository
from ctxbench.retrieval.retriever import NOTE_NO_EMBEDDER
from ctxbench.session import Workbench

from retrieval_fixture import write_repo

QUERY = "download a web page over http"


@pytest.fixture
def repo(tmp_path):
    return write_repo(tmp_path / "repo")


@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "store.db", Config()) as wb:
        yield wb


def retrieval(wb, query=QUERY):
    sid = wb.create_session()
    return wb.plan_inputs(sid, query, mode="light").retrieval


def test_without_semantic_the_set_says_so(wb, repo):
    attach_repository(wb, repo)
    rs = retrieval(wb)
    assert not rs.semantic_available and NOTE_NO_EMBEDDER in rs.notes and rs.hits


def test_an_import_error_is_not_hidden(wb, repo, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctxbench.retrieval.retriever", None)
    with pytest.raises(ImportError):
        attach_repository(wb, repo)
