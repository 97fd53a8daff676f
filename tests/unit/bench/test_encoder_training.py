"""The encoder's training data: what is mined, from what, and what is refused (training/, never the product)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from training import mine
from training.train import batches

ROOT = Path(__file__).resolve().parents[3]


def test_every_benchmark_codebase_and_the_independent_ones_are_excluded():
    names = mine.excluded_names(ROOT)
    for name in ("textual", "click", "trio", "flask", "marshmallow", "commander", "httpx", "js-yaml", "dateutil",
                 "query-core", "sortedcontainers", "semver", "mistune", "immer", "transitions", "mobx",
                 "rich", "networkx", "attrs"):
        assert name in names, name


def test_a_manifest_naming_a_benchmark_codebase_is_refused(tmp_path):
    manifest = tmp_path / "packages.toml"
    manifest.write_text('[[package]]\nname = "query"\nregistry = "npm"\npackage = "@tanstack/query-core"\n'
                        'version = "5.59.0"\n', encoding="utf-8")
    with pytest.raises(SystemExit, match="benchmark codebase"):
        mine.load_manifest(manifest, ROOT)
    manifest.write_text('[[package]]\nname = "du"\nregistry = "pypi"\npackage = "python-dateutil"\n'
                        'version = "2.9.0"\n', encoding="utf-8")
    with pytest.raises(SystemExit, match="benchmark codebase"):
        mine.load_manifest(manifest, ROOT)


def test_the_shipped_manifest_is_pinned_permissive_and_clean():
    packages = mine.load_manifest(mine.MANIFEST, ROOT)
    assert len(packages) >= 30
    for p in packages:
        assert len(p.sha256) == 64 and mine.is_permissive(p.license), p


def test_only_permissive_licenses_are_accepted():
    for ok in ("MIT", "BSD-3-Clause", "Apache Software License; BSD License", "MIT OR Apache-2.0", "ISC",
               "Unlicense"):
        assert mine.is_permissive(ok), ok
    for bad in ("", "GPL-3.0", "LGPL-2.1 OR MIT", "MPL-2.0", "UNKNOWN", "Mozilla Public License 2.0 (MPL 2.0)"):
        assert not mine.is_permissive(bad), bad


def test_a_description_is_the_docs_first_sentences_without_markup():
    assert mine.description("Return the :class:`Header` object of the incoming ``request``. More text follows.") == \
        "Return the Header object of the incoming request."
    assert mine.description("Parse it. Then split the header into its parts and keep them.") == \
        "Parse it. Then split the header into its parts and keep them."
    assert mine.description("TODO: write this") == ""
    assert mine.description("Too short.") == ""


def test_a_question_is_written_from_the_docs_verb_and_object():
    rng = random.Random(1)
    asked = {mine.question("Returns the parsed header of a request.", rng) for _ in range(40)}
    assert "how do I return the parsed header of a request?" in asked
    assert "where is the code that returns the parsed header of a request?" in asked
    assert all("parsed header of a request" in q for q in asked)


def test_bm25_ranks_the_document_sharing_rare_words_first():
    bm = mine.BM25([["parse", "header"], ["render", "table", "row"], ["parse", "url"]])
    assert bm.top(["render", "row"], 2)[0] == 1


def _package(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    (root / "shapes").mkdir(parents=True)
    (root / "shapes" / "__init__.py").write_text("", encoding="utf-8")
    (root / "shapes" / "area.py").write_text(
        'def circle_area(radius):\n    """Compute the area of a circle from its radius."""\n'
        '    return 3.14 * radius ** 2\n\n'
        'def square_area(side):\n    """Compute the area of a square from the length of its side."""\n'
        '    return side * side\n\n'
        'def perimeter(side):\n    """Return the perimeter of a square given one side."""\n    return 4 * side\n\n'
        'def test_circle_area_of_unit_radius():\n    assert circle_area(1) > 3\n', encoding="utf-8")
    return root


def test_a_pair_matches_a_description_to_the_card_without_its_doc(tmp_path):
    pairs, cards = mine.package_pairs("shapes", _package(tmp_path), seed=1, card_share=0.0, template_share=0.0,
                                      max_pairs=100)
    docs = {p.symbol: p for p in pairs if p.source == "doc"}
    pair = docs["shapes.area.circle_area"]
    assert pair.query == "Compute the area of a circle from its radius."
    assert "circle area" in pair.positive and "radius" in pair.positive
    assert "Compute" not in pair.positive  # the doc is not on the code side
    assert pair.negative and pair.negative != pair.positive
    assert "test_circle_area_of_unit_radius" not in docs and cards == 4


def test_a_card_pair_keeps_the_doc_as_the_product_embeds_it(tmp_path):
    from ctxbench.retrieval.vectors import embed_text

    pairs, _ = mine.package_pairs("shapes", _package(tmp_path), seed=1, card_share=1.0, template_share=0.0,
                                  max_pairs=100)
    pair = next(p for p in pairs if p.symbol == "shapes.area.square_area" and p.source == "card")
    assert "Compute the area of a square" in pair.positive and pair.positive.startswith("shapes area square area")
    assert embed_text  # the code side is embed_text's own output (checked by the startswith above)


def test_a_test_name_points_at_the_function_it_calls(tmp_path):
    pairs, _ = mine.package_pairs("shapes", _package(tmp_path), seed=1, card_share=0.0, template_share=0.0,
                                  max_pairs=100)
    tests = [p for p in pairs if p.source == "test"]
    assert [(p.query, p.symbol) for p in tests] == [("circle area of unit radius", "shapes.area.circle_area")]


def test_no_batch_holds_two_pairs_of_one_symbol():
    pairs = [{"package": "p", "symbol": s, "positive": s + "!", "query": q}
             for s, q in [("a", "1"), ("a", "2"), ("b", "3"), ("c", "4"), ("b", "5"), ("d", "6")]]
    plan = batches(pairs, 2)
    for batch in plan:
        assert len({p["symbol"] for p in batch}) == len(batch) == 2
    assert sum(len(b) for b in plan) == 6
    json.dumps(plan)
