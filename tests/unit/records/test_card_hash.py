"""A card's hash is the sha256 of its parts, each followed by a NUL: the stored hashes (and the vectors cached under
them) stay valid however the hash is computed."""
from __future__ import annotations

import hashlib

from ctxbench.records.code import SymbolCard


def _part_by_part(card: SymbolCard) -> str:
    h = hashlib.sha256()
    for part in (card.symbol_id, card.kind, card.path, str(card.line), str(card.end_line), card.signature, card.doc,
                 card.snippet, "|".join(card.decorators), card.excerpt):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:20]


def test_a_card_hash_is_its_parts_each_followed_by_a_nul():
    cards = [
        SymbolCard("pkg.mod.f", "function", "pkg.mod", "pkg/mod.py", 3, 9, "def f(x)", "Do it.", "return x", ("@cache",),
                   "def f(x):\n    return x"),
        SymbolCard("m", "module", "m", "m.py", 1, 1, "", "", ""),
        SymbolCard("ü.ß", "class", "ü", "ü.py", 1, 2, "class ß", "é\x00", "\ud800 lone surrogate", ("@a", "@b|c"), ""),
    ]
    for card in cards:
        assert card.card_hash == _part_by_part(card)
    assert SymbolCard("m", "module", "m", "m.py", 1, 1, "", "", "").card_hash == "79cb91fffceba01bb79a"
