"""A RetrievalSet's id covers every field, so two different sets are never stored under one id."""
from __future__ import annotations

import dataclasses

import pytest

from ctxbench.config import Config
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet
from ctxbench.service.workbench import Workbench

HIT = RetrievalHit("pkg.f", "pkg.py", 3, 0.5, components=(("keyword", 0.5),), why="keyword rank 1",
                   provenance="keyword", card_text="def f(): ...", excerpt="def f():\n    return 1",
                   card_hash="h1", neighbour_of="", below_threshold="")
CHANGED = {"symbol": "pkg.g", "path": "other.py", "line": 4, "score": 0.5000001, "components": (("semantic", 0.5),),
           "why": "semantic 0.5", "provenance": "semantic", "card_text": "def f(x): ...", "excerpt": "",
           "card_hash": "h2", "neighbour_of": "pkg.h", "below_threshold": "no evidence", "excerpt_lines": (3, 9),
           "card_head": "# pkg.g (function)"}


def _id(**kw) -> str:
    base = {"query": "q", "hits": (HIT,), "index_version": "v1", "semantic_available": True, "notes": ("n",),
            "scaffold": "pkg/"}
    base.update(kw)
    return RetrievalSet.make_id(base.pop("query"), base.pop("hits"), base.pop("index_version"), **base)


def test_every_hit_field_is_in_the_id():
    assert set(CHANGED) == {f.name for f in dataclasses.fields(RetrievalHit)}  # a new field needs a case here
    for name, value in CHANGED.items():
        assert _id(hits=(dataclasses.replace(HIT, **{name: value}),)) != _id(), name


@pytest.mark.parametrize(("name", "value"), [("query", "q2"), ("index_version", "v2"), ("semantic_available", False),
                                             ("notes", ("embedding cards",)), ("scaffold", "pkg/ (changed)"),
                                             ("hits", ())])
def test_every_set_field_is_in_the_id(name, value):
    assert _id(**{name: value}) != _id()


def test_the_id_is_stable_and_create_uses_it():
    assert _id() == _id()
    made = RetrievalSet.create("q", (HIT,), "v1", semantic_available=True, notes=("n",), scaffold="pkg/")
    assert made.id == _id() and made.scaffold == "pkg/" and made.notes == ("n",) and made.semantic_available


def test_sets_that_differ_only_in_scaffold_or_notes_are_both_stored(tmp_path):
    first = RetrievalSet.create("q", (HIT,), scaffold="pkg/ a")
    second = RetrievalSet.create("q", (HIT,), scaffold="pkg/ b", notes=("semantic search not available",))
    with Workbench(tmp_path / "x.db", Config()) as wb:
        wb.plans.save_retrieval_set(first)
        wb.plans.save_retrieval_set(second)
        assert wb.plans.retrieval_set(first.id) == first
        assert wb.plans.retrieval_set(second.id) == second
