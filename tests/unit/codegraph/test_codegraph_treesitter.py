"""JavaScript, TypeScript, Go, Rust and Java through tree-sitter: definitions, docs, attributes, references."""
from __future__ import annotations

import pytest

from codegraph_helpers import MULTI, small_config
from ctxbench.codegraph.resolve import resolve_edges
from ctxbench.codegraph.treesitter import module_id_for, parse_treesitter

FILES = {
    "web/app.js": "javascript",
    "web/format.js": "javascript",
    "web/view.tsx": "typescript",
    "web/types.ts": "typescript",
    "web/broken.js": "javascript",
    "go/server.go": "go",
    "rust/src/lib.rs": "rust",
    "java/src/main/java/com/example/App.java": "java",
    "java/src/main/java/com/example/Greeter.java": "java",
}


@pytest.fixture(scope="module")
def parsed():
    return {p: parse_treesitter((MULTI / p).read_text(), p, lang, small_config()) for p, lang in FILES.items()}


def kinds(parsed_file) -> dict[str, str]:
    return {s.id: s.kind for s in parsed_file.symbols}


def test_module_ids():
    assert module_id_for("web/src/app.js") == "web.src.app"
    assert module_id_for("rust/src/lib.rs") == "rust.src.lib"


def test_javascript_definitions(parsed):
    k = kinds(parsed["web/app.js"])
    assert k["web.app.App"] == "class"
    assert k["web.app.App.render"] == "method"
    assert k["web.app.main"] == "function"
    assert k["web.app.helper"] == "function"  # const helper = (x) => ...
    syms = {s.id: s for s in parsed["web/app.js"].symbols}
    assert syms["web.app.App"].doc == "The application shell."
    assert syms["web.app.App"].signature == "class App extends View"
    assert syms["web.app.main"].doc == "Start the app."


def test_typescript_and_tsx_definitions(parsed):
    k = kinds(parsed["web/types.ts"])
    assert k["web.types.Shape"] == "interface"
    assert k["web.types.Point"] == "type"
    assert k["web.types.Color"] == "enum"
    assert k["web.types.Square"] == "class"
    assert k["web.types.Square.area"] == "method"
    assert k["web.types.totalArea"] == "function"
    tsx = kinds(parsed["web/view.tsx"])
    assert tsx["web.view.View"] == "class"
    assert tsx["web.view.Badge"] == "function"
    assert parsed["web/view.tsx"].error == ""


def test_go_definitions(parsed):
    syms = {s.id: s for s in parsed["go/server.go"].symbols}
    assert syms["go.server.Server"].kind == "struct"
    assert syms["go.server.Handler"].kind == "interface"
    assert syms["go.server.Server.Start"].kind == "method"
    assert syms["go.server.Server.Start"].parent == "go.server.Server"
    assert syms["go.server.Server.Start"].doc == "Start starts the server."
    assert syms["go.server.NewServer"].signature == "func NewServer(addr string) *Server"
    assert syms["go.server"].doc == "Package server serves requests."


def test_rust_definitions_and_cfg_attributes(parsed):
    syms = {s.id: s for s in parsed["rust/src/lib.rs"].symbols}
    assert syms["rust.src.lib.Counter"].kind == "struct"
    assert syms["rust.src.lib.Counter"].decorators == ("#[derive(Debug, Clone)]",)
    assert syms["rust.src.lib.Counter"].doc == "A counter that only goes up."
    assert syms["rust.src.lib.Reset"].kind == "trait"
    assert syms["rust.src.lib.Mode"].kind == "enum"
    assert syms["rust.src.lib.Counter.new"].kind == "method"  # impl method
    assert syms["rust.src.lib.Counter.reset"].kind == "method"  # trait impl method
    assert syms["rust.src.lib.tests"].decorators == ("#[cfg(test)]",)
    assert syms["rust.src.lib.tests.bumps"].decorators == ("#[test]",)
    assert syms["rust.src.lib"].doc == "The fixture crate."


def test_java_definitions_and_annotations(parsed):
    syms = {s.id: s for s in parsed["java/src/main/java/com/example/App.java"].symbols}
    app = syms["java.src.main.java.com.example.App.App"]
    assert app.kind == "class"
    assert app.decorators == ("@Deprecated",)
    assert app.doc == "The Java application."
    run = syms["java.src.main.java.com.example.App.App.run"]
    assert run.kind == "method"
    assert run.decorators == ("@Override",)
    assert run.signature == "public void run()"


def test_references_resolve_by_name(parsed):
    edges = {(e.src, e.dst, e.kind) for e in resolve_edges(list(parsed.values()))}
    assert ("web.app.App.render", "web.app.App.title", "calls") in edges  # this.title()
    assert ("web.app.App.render", "web.format.formatName", "calls") in edges
    assert ("web.app.main", "web.app.App", "calls") in edges  # new App()
    assert ("web.app.App", "web.view.View", "inherits") in edges
    assert ("web.app", "web.format", "imports") in edges
    assert ("web.types.Square", "web.types.Shape", "inherits") in edges  # implements
    assert ("go.server.Server.Start", "go.server.Server.log", "calls") in edges
    assert ("rust.src.lib.Counter.bump", "rust.src.lib.helper", "calls") in edges
    assert ("rust.src.lib.tests.bumps", "rust.src.lib.Counter.new", "calls") in edges  # super::Counter::new()
    assert ("rust.src.lib.Counter", "rust.src.lib.Reset", "inherits") in edges  # impl Reset for Counter
    app = "java.src.main.java.com.example.App"
    assert (f"{app}.App.run", f"{app}.App.stop", "calls") in edges
    assert (f"{app}.App.run", "java.src.main.java.com.example.Greeter.Greeter.greet", "calls") in edges
    assert (f"{app}.App", "java.src.main.java.com.example.Greeter.Base", "inherits") in edges
    assert (app, "java.src.main.java.com.example.Greeter", "imports") in edges


def test_broken_javascript_is_reported(parsed):
    broken = parsed["web/broken.js"]
    assert "syntax error" in broken.error
    assert not broken.partial
    assert broken.symbols == ()


def test_small_syntax_error_keeps_the_rest_as_partial():
    src = "function good() { return 1 }\n\nfunction alsoGood() { return 2 }\n\nlet x = ;\n"
    parsed = parse_treesitter(src, "p.js", "javascript", small_config())
    assert parsed.partial and "syntax error" in parsed.error
    ids = {s.id for s in parsed.symbols}
    assert {"p.good", "p.alsoGood"} <= ids


CLASS_FIELDS_TS = """\
export class Immer {
  autoFreeze_ = true
  /** Apply a recipe to a base state. */
  produce: IProduce = (base: any, recipe?: any) => {
    return finish(recipe(base))
  }
  static make = () => new Immer()
  method() { return 1 }
}
"""

CLASS_FIELDS_JS = """\
class Store {
  dispatch = (action) => {
    return this.reduce(action)
  }
  #notify = function () { return listeners() };
  [computed] = () => 1;
  count = 0;
}
"""


def test_class_fields_holding_functions_are_methods():
    ts = parse_treesitter(CLASS_FIELDS_TS, "src/immer.ts", "typescript", small_config())
    syms = {s.id: s for s in ts.symbols}
    assert syms["src.immer.Immer.produce"].kind == "method"  # an arrow function in a class field
    assert syms["src.immer.Immer.produce"].doc == "Apply a recipe to a base state."
    assert syms["src.immer.Immer.produce"].signature == "produce: IProduce = (base: any, recipe?: any) =>"
    assert (syms["src.immer.Immer.produce"].line, syms["src.immer.Immer.produce"].end_line) == (4, 6)
    assert syms["src.immer.Immer.make"].kind == "method"
    assert "src.immer.Immer.autoFreeze_" not in syms  # a field holding a value is not a symbol
    assert syms["src.immer.Immer.method"].kind == "method"
    js = parse_treesitter(CLASS_FIELDS_JS, "web/store.js", "javascript", small_config())
    k = kinds(js)
    assert k["web.store.Store.dispatch"] == "method" and k["web.store.Store.#notify"] == "method"
    assert "web.store.Store.count" not in k and not any("computed" in sid for sid in k)
    # what the field's function calls is its own reference, not the class's
    refs = {(ref.source, ref.name) for ref in js.refs}
    assert {("web.store.Store.dispatch", "this.reduce"), ("web.store.Store.#notify", "listeners")} <= refs
