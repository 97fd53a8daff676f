"""Python through ast: symbol ids, signatures, docs, decorators, and edges of every kind."""
from __future__ import annotations

import pytest

from codegraph_helpers import MULTI, small_config
from ctxbench.codegraph.index import parse_file
from ctxbench.codegraph.python_ast import module_name_for, parse_python
from ctxbench.codegraph.resolve import Edge, resolve_edges
from ctxbench.codegraph.walk import walk


@pytest.fixture(scope="module")
def parsed():
    result = walk(MULTI, small_config())
    out = {}
    for f in result.files:
        text = (MULTI / f.path).read_text(encoding="utf-8")
        out[f.path] = parse_file(text, f.path, f.language, small_config())
    return out


@pytest.fixture(scope="module")
def symbols(parsed):
    return {s.id: s for p in parsed.values() for s in p.symbols}


@pytest.fixture(scope="module")
def edges(parsed):
    return set(resolve_edges(list(parsed.values())))


def test_module_names():
    assert module_name_for("pkg/__init__.py") == ("pkg", True)
    assert module_name_for("pkg/sub/deep.py") == ("pkg.sub.deep", False)
    assert module_name_for("__init__.py", "textual") == ("textual", True)
    assert module_name_for("app.py", "textual") == ("textual.app", False)


def test_symbol_ids_kinds_and_spans(symbols):
    assert symbols["pkg"].kind == "module"
    assert symbols["pkg"].path == "pkg/__init__.py"
    assert symbols["pkg.core"].kind == "module"
    assert symbols["pkg.core.Engine"].kind == "class"
    assert symbols["pkg.core.Engine.tick"].kind == "method"
    assert symbols["pkg.core.Engine.tick.inner"].kind == "function"  # nested function: qualname without <locals>
    assert symbols["pkg.util.double"].kind == "function"
    assert symbols["pkg.sub.deep.deep_call"].module == "pkg.sub.deep"
    tick = symbols["pkg.core.Engine.tick"]
    lines = (MULTI / "pkg/core.py").read_text().splitlines()
    assert lines[tick.line - 1].strip().startswith("def tick(")
    assert lines[tick.end_line - 1].strip() == "return inner(total) + count"
    assert tick.parent == "pkg.core.Engine"


def test_signature_doc_and_decorators(symbols):
    engine = symbols["pkg.core.Engine"]
    assert engine.signature == "class Engine(Base)"
    assert engine.doc == "Runs plugins."  # first paragraph only
    init = symbols["pkg.core.Engine.__init__"]
    assert init.signature == "def __init__(self, plugin: Optional[Plugin] = None) -> None"
    create = symbols["pkg.core.Engine.create"]
    assert create.decorators == ("@staticmethod",)
    assert create.signature == 'def create(speed: int = 1) -> "Engine"'
    # the property getter keeps its doc; the setter of the same name does not replace it
    name = symbols["pkg.core.Engine.name"]
    assert name.decorators == ("@property",)
    assert name.doc == "The engine's name."
    assert symbols["pkg"].doc == "The fixture package: an engine with plugins."


def test_multiline_signature_and_comment_colon():
    src = (
        "def f(\n"
        "    a: int,\n"
        "    b: 'dict[str, int]' = {},  # a: comment\n"
        ") -> int:  # trailing: comment\n"
        "    return a\n"
    )
    parsed = parse_python(src, "m.py", "m", False, small_config())
    assert parsed.symbols[1].signature == "def f(a: int, b: 'dict[str, int]' = {}, # a: comment) -> int"


def test_contains_edges(edges):
    assert Edge("pkg.core", "pkg.core.Engine", "contains") in edges
    assert Edge("pkg.core.Engine", "pkg.core.Engine.tick", "contains") in edges
    assert Edge("pkg.core.Engine.tick", "pkg.core.Engine.tick.inner", "contains") in edges


def test_imports_edges_resolve_relative_and_absolute(edges):
    assert Edge("pkg", "pkg.core", "imports") in edges  # from .core import Engine
    assert Edge("pkg.core", "pkg.util", "imports") in edges  # from pkg import util
    assert Edge("pkg.sub.deep", "pkg.util", "imports") in edges  # from ..util import double
    assert Edge("pkg.sub.deep", "pkg.sub.leaf", "imports") in edges  # from . import leaf


def test_calls_edges(edges):
    calls = {(e.src, e.dst) for e in edges if e.kind == "calls"}
    assert ("pkg.core.Base.start", "pkg.core.Base.prepare") in calls  # self.method
    assert ("pkg.core.Engine.tick", "pkg.core.Base.start") in calls  # inherited method through self
    assert ("pkg.core.Engine.tick", "pkg.core.Plugin.run") in calls  # self.plugin typed by assignment
    assert ("pkg.core.Engine.tick", "pkg.util.Helper.assist") in calls  # self.helper = util.Helper()
    assert ("pkg.core.Engine.tick", "pkg.core.Engine.tick.inner") in calls  # nested function
    assert ("pkg.core.Engine.tick.inner", "pkg.util.double") in calls  # module attribute
    assert ("pkg.core.Engine.create", "pkg.core.Engine") in calls  # constructor
    assert ("pkg.core.Engine.create", "pkg.core.Base.start") in calls  # local variable typed by its constructor
    assert ("pkg.sub.deep.deep_call", "pkg.core.Engine.create") in calls  # Class.method through an import
    assert ("pkg.sub.deep.deep_call", "pkg.util.double") in calls  # aliased relative import
    assert ("pkg.sub.deep.deep_call", "pkg.sub.leaf.leaf_value") in calls  # submodule attribute
    assert ("pkg.util.Helper.assist", "pkg.util.double") in calls


def test_inherits_and_references_edges(edges):
    assert Edge("pkg.core.Engine", "pkg.core.Base", "inherits") in edges
    refs = {(e.src, e.dst) for e in edges if e.kind == "references"}
    assert ("pkg.core.Plugin.run", "pkg.core.Engine") in refs  # annotation
    assert ("pkg.core.Engine.__init__", "pkg.core.Plugin") in refs  # Optional[Plugin]
    assert ("pkg.core.Plugin.run", "pkg.core.Engine.speed") not in refs  # a class attribute is not a symbol
    assert all(e.dst != e.src for e in edges)


def test_re_export_through_package_init(tmp_path):
    files = {
        "lib/__init__.py": "from .impl import Thing\n",
        "lib/impl.py": "class Thing:\n    def go(self):\n        pass\n",
        "app.py": "from lib import Thing\n\ndef main():\n    Thing().go()\n    t = Thing()\n    t.go()\n",
    }
    parsed = [parse_file(src, path, "python", small_config()) for path, src in files.items()]
    calls = {(e.src, e.dst) for e in resolve_edges(parsed) if e.kind == "calls"}
    assert ("app.main", "lib.impl.Thing") in calls
    assert ("app.main", "lib.impl.Thing.go") in calls


def test_broken_file_is_reported_not_indexed(parsed):
    broken = parsed["broken.py"]
    assert broken.error.startswith("SyntaxError")
    assert broken.symbols == ()
    assert parsed["pkg/core.py"].error == ""


def test_unicode_columns_do_not_shift_signatures():
    src = 'NAME = "héllo wörld"\n\ndef f(x="ü", y=1):  # ça: va\n    return x\n'
    parsed = parse_python(src, "m.py", "m", False, small_config())
    assert parsed.symbols[1].signature == 'def f(x="ü", y=1)'


def test_typed_properties_and_attributes_chain_calls():
    files = {
        "ui/app.py": "class App:\n    def exit(self):\n        pass\n",
        "ui/pump.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ui.app import App\n\n"
            "def make():\n    return None\n\n"
            "class Pump:\n"
            "    if TYPE_CHECKING:\n"
            "        @property\n"
            "        def app(self) -> 'App[object]':\n            ...\n"
            "    else:\n"
            "        app = make()\n"  # inferred from a call: must not override the annotated property type
        ),
        "ui/widget.py": (
            "from ui.pump import Pump\n\n"
            "class Widget(Pump):\n"
            "    def close(self):\n        self.app.exit()\n"
        ),
    }
    parsed = [parse_file(src, path, "python", small_config()) for path, src in files.items()]
    calls = {(e.src, e.dst) for e in resolve_edges(parsed) if e.kind == "calls"}
    assert ("ui.widget.Widget.close", "ui.app.App.exit") in calls
