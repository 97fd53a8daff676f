"""Keyword index text with each identifier's words remembered is the text computed word by word: the FTS rows of a
repository do not change (their digest is unchanged, so no store rewrites them)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from ctxbench.retrieval.keyword import _IDENT, identifier_tokens
from ctxbench.retrieval.vectors import split_identifier


def _word_by_word(text: str) -> str:
    out: list[str] = []
    for ident in _IDENT.findall(text):
        words = split_identifier(ident)
        out.extend(words)
        if len(words) > 1:
            out.append("".join(words))
    return " ".join(out)


def _texts() -> list[str]:
    texts = ["_render_line(self, TableRenderer.add_row) -> HTTPServer2 | None", "", "___", "x 42 3.14 a_b_C",
             "XMLHttpRequest getHTTPResponseCode __init__ iOS ÄÖÜ straße", "render render render_line render_line"]
    spec = importlib.util.find_spec("textual")
    if spec is not None and spec.submodule_search_locations:
        root = Path(list(spec.submodule_search_locations)[0])
        texts += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*.py"))[:40]]
    return texts


def test_identifier_tokens_are_the_words_of_each_identifier_as_computed_one_by_one():
    for _ in range(2):  # the second pass reads the remembered words
        for text in _texts():
            assert identifier_tokens(text) == _word_by_word(text)
