"""A very long message (30 MB pasted into chat) is read in pieces where the whole was never needed: its label, its
word counts for keyword search. The pieces give exactly what the whole gave."""
from __future__ import annotations

import random

from ctxbench.planner import render
from ctxbench.retrieval import stemming

ALPHABET = list("abcXYZ 019 .,;\n\t  éü漢字ß-_")


def _texts():
    rng = random.Random(5)
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 3000))) for _ in range(200)]
    return texts + ["word " * 500, " " * 1000 + "x", "x" * 1000, "a" + " " * 900 + "b c d",
                    "\n\n".join(["alpha beta"] * 200)]


def test_a_label_of_a_long_text_is_the_label_of_the_whole_text():
    for text in _texts():
        for limit in (5, 20, 80):
            line = " ".join(text.split())
            whole = line if len(line) <= limit else line[: limit - 1] + "…"
            assert render.short(text, limit) == whole


def test_word_counts_read_in_pieces_are_the_counts_of_the_whole_text(monkeypatch):
    wanted = [stemming.word_counts(text) for text in _texts()]
    monkeypatch.setattr(stemming, "COUNT_CHUNK_CHARS", 13)  # cut wherever it can
    assert [stemming.word_counts(text) for text in _texts()] == wanted
