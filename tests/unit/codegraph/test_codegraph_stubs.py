"""Type stubs (``.pyi``): the typed API of their module, indexed beside (or instead of) the runtime ``.py``."""
from __future__ import annotations

import os

import pytest

from codegraph_helpers import small_config
from ctxbench.codegraph.index import build_index, load_index, parse_file
from ctxbench.codegraph.python_ast import module_name_for
from ctxbench.codegraph.resolve import resolve_edges
from ctxbench.codegraph.walk import walk
from ctxbench.store.db import connect

RUNTIME = '''"""The runtime module."""


def f(*args, **kwargs):
    """Make a Foo from whatever it is given."""
    return _impl(*args, **kwargs)


def _impl(*args, **kwargs):
    return Foo()


class Foo:
    def run(self, *args):
        return args


g = _make_g()
'''

STUB = '''from typing import overload


class Foo:
    def run(self, steps: int) -> list[str]: ...
    def stop(self, *, force: bool = ...) -> None: ...


def f(x: int, *, name: str = ...) -> Foo: ...


def g(y: str) -> int: ...


@overload
def pick(x: int) -> int: ...
@overload
def pick(x: str) -> str: ...
'''


def write(root, files):
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "repo"
    write(root, {"pkg/__init__.py": "", "pkg/mod.py": RUNTIME, "pkg/mod.pyi": STUB})
    return root


@pytest.fixture()
def conn(tmp_path):
    c = connect(tmp_path / "index.db")
    yield c
    c.close()


def indexed(repo, conn):
    build_index(repo, conn, small_config())
    return load_index(repo, conn, small_config())


def test_stub_files_are_walked_as_python(repo):
    languages = {f.path: f.language for f in walk(repo, small_config()).files}
    assert languages["pkg/mod.pyi"] == "python"


def test_a_stub_names_the_module_of_its_runtime_file():
    assert module_name_for("pkg/mod.pyi") == ("pkg.mod", False)
    assert module_name_for("pkg/__init__.pyi") == ("pkg", True)


def test_the_card_shows_the_stub_signature_and_the_runtime_body(repo, conn):
    index = indexed(repo, conn)
    card = index.cards["pkg.mod.f"]
    assert card.signature == "def f(x: int, *, name: str = ...) -> Foo"
    assert card.path == "pkg/mod.py"
    assert card.line == 4
    assert "return _impl(*args, **kwargs)" in card.snippet
    assert card.doc == "Make a Foo from whatever it is given."
    assert index.symbols["pkg.mod.f"].signature == card.signature
    assert index.cards["pkg.mod.Foo.run"].signature == "def run(self, steps: int) -> list[str]"
    assert index.cards["pkg.mod.Foo.run"].path == "pkg/mod.py"


def test_a_symbol_only_in_the_stub_is_a_symbol_of_its_own_at_the_stub(repo, conn):
    index = indexed(repo, conn)
    g = index.symbols["pkg.mod.g"]
    assert (g.path, g.kind, g.signature, g.parent) == ("pkg/mod.pyi", "function", "def g(y: str) -> int", "pkg.mod")
    stop = index.cards["pkg.mod.Foo.stop"]
    assert (stop.path, stop.kind, stop.signature) == ("pkg/mod.pyi", "method",
                                                      "def stop(self, *, force: bool = ...) -> None")
    assert index.symbols["pkg.mod"].path == "pkg/mod.py"  # the module stays the runtime file's
    assert index.by_path["pkg/mod.pyi"] == ("pkg.mod.Foo.stop", "pkg.mod.g", "pkg.mod.pick")
    assert ("pkg.mod.Foo", "pkg.mod.Foo.stop") in index.graph.edges


def test_overloads_collapse_into_one_symbol_listing_their_signatures(repo, conn):
    index = indexed(repo, conn)
    pick = index.cards["pkg.mod.pick"]
    assert pick.signature.splitlines() == ["def pick(x: int) -> int", "def pick(x: str) -> str"]
    assert (pick.line, pick.end_line) == (16, 18)
    assert [sid for sid in index.symbols if sid.endswith(".pick")] == ["pkg.mod.pick"]


def test_runtime_overloads_give_their_signatures_to_the_implementation():
    source = ('from typing import overload\n\n'
              '@overload\ndef h(x: int) -> int: ...\n'
              '@typing.overload\ndef h(x: str) -> str: ...\n'
              'def h(x):\n    """Echo."""\n    return x\n')
    parsed = parse_file(source, "m.py", "python", small_config())
    (h,) = [s for s in parsed.symbols if s.id == "m.h"]
    assert h.signature.splitlines() == ["def h(x: int) -> int", "def h(x: str) -> str"]
    assert (h.line, h.end_line, h.doc) == (7, 9, "Echo.")
    (card,) = [c for c in parsed.cards if c.symbol_id == "m.h"]
    assert card.snippet == "return x"


def test_editing_or_removing_the_stub_updates_the_runtime_cards(repo, conn):
    indexed(repo, conn)
    (repo / "pkg/mod.pyi").write_text("def f(x: float) -> None: ...\n", encoding="utf-8")
    st = os.stat(repo / "pkg/mod.pyi")
    os.utime(repo / "pkg/mod.pyi", ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    index = indexed(repo, conn)
    assert index.cards["pkg.mod.f"].signature == "def f(x: float) -> None"
    assert "pkg.mod.g" not in index.symbols
    (repo / "pkg/mod.pyi").unlink()
    index = indexed(repo, conn)
    assert index.cards["pkg.mod.f"].signature == "def f(*args, **kwargs)"


def test_adding_a_stub_later_types_the_runtime_module(tmp_path, conn):
    root = tmp_path / "repo"
    write(root, {"pkg/__init__.py": "", "pkg/mod.py": RUNTIME})
    assert indexed(root, conn).cards["pkg.mod.f"].signature == "def f(*args, **kwargs)"
    write(root, {"pkg/mod.pyi": STUB})
    index = indexed(root, conn)
    assert index.cards["pkg.mod.f"].signature == "def f(x: int, *, name: str = ...) -> Foo"
    assert index.symbols["pkg.mod.g"].path == "pkg/mod.pyi"


def test_a_stub_without_a_runtime_file_is_the_module(tmp_path, conn):
    root = tmp_path / "repo"
    write(root, {"pkg/__init__.py": "", "pkg/native.pyi": '"""A compiled module."""\ndef fast(n: int) -> int: ...\n'})
    index = indexed(root, conn)
    assert index.symbols["pkg.native"].path == "pkg/native.pyi"
    assert index.symbols["pkg.native"].doc == "A compiled module."
    assert index.cards["pkg.native.fast"].signature == "def fast(n: int) -> int"


def test_a_package_stub_does_not_hide_the_runtime_re_exports():
    files = {
        "lib/__init__.py": "from .impl import Thing\n",
        "lib/__init__.pyi": "def helper() -> int: ...\n",
        "lib/impl.py": "class Thing:\n    def go(self):\n        pass\n",
        "app.py": "from lib import Thing, helper\n\ndef main():\n    Thing().go()\n    helper()\n",
    }
    parsed = [parse_file(src, path, "python", small_config()) for path, src in sorted(files.items())]
    calls = {(e.src, e.dst) for e in resolve_edges(parsed) if e.kind == "calls"}
    assert ("app.main", "lib.impl.Thing") in calls
    assert ("app.main", "lib.helper") in calls


def test_the_scaffold_names_an_overloaded_symbol_on_one_line():
    from ctxbench.codegraph.graph import build_graph
    from ctxbench.codegraph.resolve import Edge
    from ctxbench.codegraph.scaffold import build_scaffold
    from ctxbench.records.code import Symbol
    from ctxbench.tokens import get_tokenizer

    symbols = {
        "m": Symbol("m", "module", "m", "m", "m.pyi", 1, 4, "python", "module m"),
        "m.pick": Symbol("m.pick", "function", "pick", "m", "m.pyi", 1, 4, "python",
                         "def pick(x: int) -> int\ndef pick(x: str) -> str", "", ("@overload",), "m"),
    }
    graph = build_graph(symbols.values(), [Edge("m", "m.pick", "contains")])
    text = build_scaffold(graph, symbols, 100000, get_tokenizer())
    assert "- m.pick — def pick(x: int) -> int | def pick(x: str) -> str" in text.splitlines()
