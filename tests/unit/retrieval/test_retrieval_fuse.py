"""Fusion of component rankings: RRF and normalized-score sums."""
from __future__ import annotations

import pytest

from ctxbench.retrieval.fuse import fuse, rrf_unit


def order(fused):
    return [f.symbol for f in fused]


def test_rrf_rewards_agreement_over_a_single_first_place():
    rankings = {
        "semantic": [("a", 0.9), ("b", 0.8), ("c", 0.7)],
        "keyword": [("d", 12.0), ("b", 11.0), ("c", 3.0)],
    }
    fused = fuse(rankings, {}, method="rrf", rrf_k=60)
    assert order(fused)[0] == "b"  # second in both beats first in one
    assert fused[0].score == pytest.approx(2 / 62)
    assert fused[0].ranks == {"semantic": 2, "keyword": 2}
    assert fused[0].scores == {"semantic": 0.8, "keyword": 11.0}


def test_rrf_weights_tilt_the_order():
    rankings = {"semantic": [("a", 0.9), ("b", 0.1)], "keyword": [("b", 5.0), ("a", 1.0)]}
    assert order(fuse(rankings, {"semantic": 1.0, "keyword": 1.0}))[:2] == ["a", "b"]  # tie broken by id
    assert order(fuse(rankings, {"semantic": 1.0, "keyword": 1.5}))[0] == "b"
    assert order(fuse(rankings, {"semantic": 2.0, "keyword": 1.0}))[0] == "a"
    assert order(fuse(rankings, {"semantic": 0.0, "keyword": 1.0})) == ["b", "a"]


def test_score_fusion_normalizes_each_component_by_its_best():
    rankings = {"semantic": [("a", 0.5), ("b", 0.25)], "keyword": [("b", 20.0), ("c", 10.0)]}
    fused = {f.symbol: f.score for f in fuse(rankings, {}, method="score")}
    assert fused == pytest.approx({"a": 1.0, "b": 1.5, "c": 0.5})


def test_duplicates_in_one_ranking_count_once_and_ties_are_stable():
    fused = fuse({"keyword": [("x", 3.0), ("x", 2.0), ("y", 1.0)]}, {}, rrf_k=0)
    assert [(f.symbol, f.score) for f in fused] == [("x", 1.0), ("y", 0.5)]
    tie = fuse({"a": [("z", 1.0)], "b": [("m", 1.0)]}, {})
    assert order(tie) == ["m", "z"]


def test_unknown_method_and_empty_input():
    with pytest.raises(ValueError):
        fuse({}, {}, method="borda")
    assert fuse({"semantic": []}, {}) == []
    assert rrf_unit(60) == pytest.approx(1 / 61)
