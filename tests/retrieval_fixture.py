"""A tiny repository for retrieval tests, written into a temp folder and indexed with the real code graph."""
from __future__ import annotations

import textwrap
from pathlib import Path

FILES = {
    "render/__init__.py": '"""Rendering of tables and text."""\n',
    "render/table.py": '''
        """Tables rendered as text lines."""
        from render.text import pad


        class TableRenderer:
            """Render rows of a table as text lines."""

            def __init__(self, widths):
                self.widths = widths

            def render(self, rows):
                """Render every row."""
                return [self._render_line(row) for row in rows]

            def _render_line(self, row):
                """Format one row as a padded line."""
                return " | ".join(pad(cell, width) for cell, width in zip(row, self.widths))
        ''',
    "render/text.py": '''
        """Small text helpers."""


        def pad(text, width):
            """Fill with spaces on the right up to the given width."""
            return text + _blank(width - len(text))


        def _blank(n):
            """Return n blank characters."""
            return " " * n


        def shout(text):
            """Upper-case a string and add an exclamation mark."""
            return text.upper() + "!"
        ''',
    "store/__init__.py": "",
    "store/cache.py": '''
        """In-memory caches."""


        class LRUCache:
            """A least recently used cache with a maximum size."""

            def __init__(self, maxsize):
                self.maxsize = maxsize
                self.data = {}

            def get(self, key, default=None):
                """Look up a key, marking it as recently used."""
                return self.data.get(key, default)

            def set(self, key, value):
                """Store a value, evicting the oldest entry when the cache is full."""
                if len(self.data) >= self.maxsize:
                    self.data.pop(next(iter(self.data)))
                self.data[key] = value
        ''',
    "net/__init__.py": "",
    "net/http.py": '''
        """HTTP helpers."""


        def fetch_url(url, timeout=10):
            """Download a web page over HTTP and return its body."""
            raise NotImplementedError


        def parse_headers(raw):
            """Split raw response headers into a dictionary."""
            return dict(line.split(": ", 1) for line in raw.splitlines() if ": " in line)
        ''',
}


def write_repo(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def index_repo(root: Path, conn, config=None):
    """Index ``root`` (no embedding) and return the loaded CodeIndex."""
    from ctxbench.codegraph.index import build_index, load_index
    from ctxbench.config import Config

    config = config or Config()
    build_index(root, conn, config.index)
    return load_index(root, conn, config.index, config.capsules)


def with_retrieval(**changes):
    """The default Config with these ``[retrieval]`` values changed."""
    import dataclasses

    from ctxbench.config import Config

    config = Config()
    return dataclasses.replace(config, retrieval=dataclasses.replace(config.retrieval, **changes))


def view(index):
    from ctxbench.retrieval.retriever import IndexView

    return IndexView(repo_key=str(index.root), cards=index.cards, graph=index.graph, scaffold="SCAFFOLD",
                     version=str(index.version))
