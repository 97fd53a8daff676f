"""JavaScript, TypeScript (+TSX), Go, Rust and Java through tree-sitter and the per-language grammar packages.

Definitions (functions, classes, methods, interfaces, structs, enums, traits, impl methods, type
aliases) with their doc comments and attributes / annotations / decorators; calls, base types
and imports are recorded by name and resolved in ``resolve``. The symbol id is the file path
without its extension, dots for slashes, plus the qualname (``web.src.app.App.render``; a Go
method is ``pkg.file.Type.Method``, a Rust impl method ``crate.mod.Type.method``).

A file whose syntax errors swallow most of it (ERROR nodes at the top level covering more than
``UNUSABLE_ERROR_SHARE`` of the file) is reported and skipped; smaller errors are reported and the
definitions outside them kept.
"""
from __future__ import annotations

import re
import threading
from time import perf_counter
from typing import Any, Callable

from ctxbench.codegraph.cards import build_card, clip, first_paragraph, module_summary
from ctxbench.codegraph.phase_clock import PHASE_CARDS, PHASE_SECRETS, PhaseClock
from ctxbench.records.code import CALLS, INHERITS, ParsedFile, RawRef
from ctxbench.redaction import mask_secrets
from ctxbench.records.code import Symbol, SymbolCard
from ctxbench.config import IndexConfig

UNUSABLE_ERROR_SHARE = 0.5
_WS = re.compile(r"\s+")
_COMMENT_TYPES = frozenset({"comment", "line_comment", "block_comment"})

_PARSERS = threading.local()  # tree-sitter parsers are not thread-safe: one set per thread


def _grammar(grammar: str) -> Any:
    """The tree-sitter Language of a grammar name (javascript, typescript, tsx, go, rust, java)."""
    if grammar == "javascript":
        import tree_sitter_javascript as mod
        return mod.language()
    if grammar == "typescript":
        import tree_sitter_typescript as mod
        return mod.language_typescript()
    if grammar == "tsx":
        import tree_sitter_typescript as mod
        return mod.language_tsx()
    if grammar == "go":
        import tree_sitter_go as mod
        return mod.language()
    if grammar == "rust":
        import tree_sitter_rust as mod
        return mod.language()
    if grammar == "java":
        import tree_sitter_java as mod
        return mod.language()
    raise ValueError(f"no tree-sitter grammar for {grammar!r}")


def get_parser(grammar: str) -> Any:
    parsers = getattr(_PARSERS, "by_grammar", None)
    if parsers is None:
        parsers = _PARSERS.by_grammar = {}
    parser = parsers.get(grammar)
    if parser is None:
        import tree_sitter

        parser = tree_sitter.Parser(tree_sitter.Language(_grammar(grammar)))
        parsers[grammar] = parser
    return parser


def grammar_for(path: str, language: str) -> str:
    if language == "typescript" and path.endswith(".tsx"):
        return "tsx"
    return language


def module_id_for(path: str) -> str:
    """``web/src/app.js`` -> ``web.src.app``."""
    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    return stem.replace("/", ".")


# node type -> symbol kind, per grammar family
_JS_DEFS = {
    "function_declaration": "function", "generator_function_declaration": "function",
    "class_declaration": "class", "abstract_class_declaration": "class", "method_definition": "method",
    "interface_declaration": "interface", "type_alias_declaration": "type", "enum_declaration": "enum",
}
_GO_DEFS = {"function_declaration": "function", "method_declaration": "method", "type_spec": "type"}
_RUST_DEFS = {
    "function_item": "function", "function_signature_item": "function", "struct_item": "struct",
    "enum_item": "enum", "trait_item": "trait", "mod_item": "module", "type_item": "type", "union_item": "struct",
}
_JAVA_DEFS = {
    "class_declaration": "class", "interface_declaration": "interface", "enum_declaration": "enum",
    "record_declaration": "class", "annotation_type_declaration": "interface", "method_declaration": "method",
    "constructor_declaration": "method",
}
_DEFS = {"javascript": _JS_DEFS, "typescript": _JS_DEFS, "tsx": _JS_DEFS, "go": _GO_DEFS, "rust": _RUST_DEFS,
         "java": _JAVA_DEFS}
_CONTAINERS = frozenset({"class", "interface", "struct", "enum", "trait", "module"})
# nodes that define a function through their value (``const f = () => ...``, a class field ``f = () => ...``)
_VALUE_DEFINITIONS = frozenset({"variable_declarator", "field_definition", "public_field_definition"})
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_HERITAGE = frozenset({"class_heritage", "extends_clause", "implements_clause", "superclass", "super_interfaces",
                       "extends_interfaces", "type_list", "extends_type_clause"})


def _end_row(node: Any) -> int:
    """The last row a node covers (line comments end at column 0 of the next row)."""
    row, col = node.end_point
    return row - 1 if col == 0 and row > node.start_point[0] else row


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace") if node is not None else ""


def _one_line(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _strip_comment(text: str) -> str:
    out = []
    for line in text.splitlines():
        s = line.strip()
        for prefix in ("/**", "/*!", "/*", "///", "//!", "//"):
            if s.startswith(prefix):
                s = s[len(prefix):]
                break
        if s.endswith("*/"):
            s = s[:-2]
        s = s.strip()
        if s.startswith("*"):
            s = s[1:].strip()
        out.append(s)
    return "\n".join(out)


class _TSExtractor:
    def __init__(self, grammar: str, language: str, module: str, path: str, lines: list[str], config: IndexConfig):
        self.grammar = grammar
        self.language = language
        self.family = "js" if grammar in ("javascript", "typescript", "tsx") else grammar
        self.defs = _DEFS[grammar]
        self.module = module
        self.path = path
        self.lines = lines
        self.config = config
        self.symbols: dict[str, Symbol] = {}
        self.spans: dict[str, tuple[int, int]] = {}
        self.refs: dict[tuple[str, str, str], None] = {}
        self.imports: dict[str, None] = {}

    # -- helpers ----------------------------------------------------------------------
    def leading(self, node: Any) -> tuple[str, list[str], int]:
        """Doc comment, attributes/decorators and the first line of the comments/attributes before ``node``."""
        anchor = node
        parent = node.parent
        if parent is not None and parent.type in ("export_statement", "type_declaration"):
            anchor = parent
        comments: list[str] = []
        attrs: list[str] = []
        head_row = anchor.start_point[0]
        prev = anchor.prev_sibling
        expected_row = anchor.start_point[0]
        while prev is not None:
            if _end_row(prev) < expected_row - 1:
                break
            if prev.type in _COMMENT_TYPES:
                text = _text(prev)
                if text.startswith(("//!", "/*!")):  # inner doc: belongs to the enclosing module
                    break
                comments.append(text)
            elif prev.type in ("attribute_item", "decorator"):
                attrs.append(_one_line(_text(prev)))
            else:
                break
            head_row = prev.start_point[0]
            expected_row = prev.start_point[0]
            prev = prev.prev_sibling
        doc = first_paragraph(_strip_comment("\n".join(reversed(comments))), self.config.doc_max_chars)
        attrs.reverse()
        for child in node.children:
            if child.type == "decorator":
                attrs.append(_one_line(_text(child)))
            elif child.type == "modifiers":
                attrs.extend(_one_line(_text(m)) for m in child.children if "annotation" in m.type)
        return doc, attrs, head_row + 1

    def signature(self, node: Any, kind: str) -> str:
        body = node.child_by_field_name("body")
        if self.grammar == "go" and node.type == "type_spec":
            type_node = node.child_by_field_name("type")
            body = None
            if type_node is not None and type_node.type in ("struct_type", "interface_type"):
                end = type_node.start_byte + len(type_node.type.split("_")[0])
                raw = "type " + node.text[: end - node.start_byte].decode("utf-8", "replace")
                return clip(_one_line(raw), self.config.signature_max_chars)
            return clip("type " + _one_line(_text(node)), self.config.signature_max_chars)
        if node.type in _VALUE_DEFINITIONS:
            value = node.child_by_field_name("value")
            body = value.child_by_field_name("body") if value is not None else None
            prefix = node.parent.type if node.parent is not None else ""
            keyword = _text(node.parent.children[0]) if prefix == "lexical_declaration" else ""
            raw = node.text[: body.start_byte - node.start_byte] if body is not None else node.text
            return clip(_one_line(f"{keyword} {raw.decode('utf-8', 'replace')}").strip(),
                        self.config.signature_max_chars)
        start = node.start_byte
        for child in node.children:  # skip decorators / annotations in the header
            if child.type in ("decorator",) or (child.type == "modifiers" and self.grammar == "java"):
                if child.type == "modifiers":
                    words = [_text(c) for c in child.children if "annotation" not in c.type]
                    rest = node.text[child.end_byte - node.start_byte:]
                    body_cut = (body.start_byte - child.end_byte) if body is not None else len(rest)
                    raw = " ".join(words) + " " + rest[:body_cut].decode("utf-8", "replace")
                    return clip(_one_line(raw).rstrip("{ ").strip(), self.config.signature_max_chars)
                start = child.end_byte
        end = body.start_byte if body is not None else node.end_byte
        raw = node.text[start - node.start_byte: end - node.start_byte].decode("utf-8", "replace")
        if body is None:
            raw = raw.split("\n", 1)[0] if kind in _CONTAINERS or "\n" in raw else raw
        return clip(_one_line(raw).rstrip("{;: ").strip(), self.config.signature_max_chars)

    def add(self, node: Any, kind: str, name: str, parent: str, qual_parent: str) -> str:
        sid = f"{qual_parent}.{name}"
        doc, attrs, head_line = self.leading(node)
        body = node.child_by_field_name("body")
        if node.type in _VALUE_DEFINITIONS:
            value = node.child_by_field_name("value")
            body = value.child_by_field_name("body") if value is not None else None
        elif node.type == "type_spec":
            body = node.child_by_field_name("type")
        line = node.start_point[0] + 1
        end_line = node.end_point[0] + 1
        if body is not None and body.end_point[0] > body.start_point[0]:
            body_line = body.start_point[0] + 2
        else:
            body_line = line
        sym = Symbol(
            id=sid, kind=kind, name=name, module=self.module, path=self.path, line=line, end_line=end_line,
            language=self.language, signature=self.signature(node, kind), doc=doc, decorators=tuple(attrs),
            parent=parent,
        )
        if sid not in self.symbols:
            self.symbols[sid] = sym
            self.spans[sid] = (body_line, head_line)
        return sid

    def ref(self, source: str, kind: str, name: str) -> None:
        if name:
            self.refs[(source, kind, name)] = None

    # -- walking ----------------------------------------------------------------------
    def run(self, root: Any) -> None:
        self.visit_children(root, self.module, self.module, "")

    def visit_children(self, node: Any, container: str, qual: str, owner: str) -> None:
        for child in node.children:
            self.visit(child, container, qual, owner)

    def visit(self, node: Any, container: str, qual: str, owner: str) -> None:
        t = node.type
        if t == "ERROR":
            return
        kind = self.defs.get(t)
        handler = _SPECIAL.get((self.family, t))
        if handler is not None and handler(self, node, container, qual, owner):
            return
        if kind is not None:
            name_node = node.child_by_field_name("name")
            name = _text(name_node)
            if not name:
                self.visit_children(node, container, qual, owner)
                return
            if kind == "function" and container != self.module and self.symbols.get(container) is not None \
                    and self.symbols[container].kind in _CONTAINERS - {"module"}:
                kind = "method"
            if self.grammar == "go" and t == "type_spec":
                tn = node.child_by_field_name("type")
                kind = {"struct_type": "struct", "interface_type": "interface"}.get(tn.type if tn else "", "type")
            sid = self.add(node, kind, name, container, qual)
            self.heritage(node, sid)
            self.visit_children(node, sid, sid, owner)
            return
        self.calls(node, container)
        self.visit_children(node, container, qual, owner)

    def heritage(self, node: Any, sid: str) -> None:
        for child in node.children:
            if child.type in _HERITAGE:
                self._bases(child, sid)

    def _bases(self, node: Any, sid: str) -> None:
        for child in node.named_children:
            if child.type in _HERITAGE:
                self._bases(child, sid)
            else:
                name = _base_name(child)
                if name:
                    self.ref(sid, INHERITS, name)

    def calls(self, node: Any, container: str) -> None:
        t = node.type
        if t == "call_expression":
            fn = node.child_by_field_name("function")
            if fn is None:
                return
            ft = fn.type
            if ft == "identifier":
                self.ref(container, CALLS, _text(fn))
            elif ft == "member_expression":  # js
                obj = fn.child_by_field_name("object")
                prop = _text(fn.child_by_field_name("property"))
                self.ref(container, CALLS, _qualified(obj, prop))
            elif ft == "selector_expression":  # go
                obj = fn.child_by_field_name("operand")
                self.ref(container, CALLS, _qualified(obj, _text(fn.child_by_field_name("field"))))
            elif ft == "field_expression":  # rust
                obj = fn.child_by_field_name("value")
                self.ref(container, CALLS, _qualified(obj, _text(fn.child_by_field_name("field"))))
            elif ft == "scoped_identifier":  # rust Type::new
                path = fn.child_by_field_name("path")
                self.ref(container, CALLS, _qualified(path, _text(fn.child_by_field_name("name"))))
        elif t == "method_invocation":  # java
            obj = node.child_by_field_name("object")
            self.ref(container, CALLS, _qualified(obj, _text(node.child_by_field_name("name"))))
        elif t in ("new_expression", "object_creation_expression"):
            ctor = node.child_by_field_name("constructor") or node.child_by_field_name("type")
            name = _base_name(ctor) if ctor is not None else ""
            if name:
                self.ref(container, CALLS, name)


def _qualified(obj: Any, name: str) -> str:
    if not name:
        return ""
    if obj is None:
        return name
    ot = obj.type
    if ot in ("this", "self", "super"):
        return f"{ot}.{name}"
    if ot in ("identifier", "type_identifier", "package_identifier"):
        return f"{_text(obj)}.{name}"
    if ot in ("scoped_identifier", "scoped_type_identifier", "member_expression", "field_access"):
        last = obj.child_by_field_name("name") or obj.child_by_field_name("property") or obj.child_by_field_name("field")
        if last is not None and last.type in ("identifier", "type_identifier", "property_identifier"):
            return f"{_text(last)}.{name}"
    return name


def _base_name(node: Any) -> str:
    """The simple name of a base type expression (``Foo``, ``a.Foo``, ``Foo<T>``)."""
    if node is None:
        return ""
    t = node.type
    if t in ("identifier", "type_identifier"):
        return _text(node)
    if t in ("generic_type", "member_expression", "nested_type_identifier", "scoped_type_identifier"):
        for field in ("type", "name", "property"):
            sub = node.child_by_field_name(field)
            if sub is not None:
                return _base_name(sub)
        named = node.named_children
        return _base_name(named[-1]) if named else ""
    if t in ("property_identifier",):
        return _text(node)
    return ""


# -- language-specific nodes --------------------------------------------------------------

def _js_variable(ex: _TSExtractor, node: Any, container: str, qual: str, owner: str) -> bool:
    """``const f = () => ...`` / ``const f = function () {...}`` define a function."""
    name_node = node.child_by_field_name("name")
    if name_node is None or name_node.type != "identifier":
        return False
    return _js_function_value(ex, node, "function", _text(name_node), container, qual, owner)


def _js_field(ex: _TSExtractor, node: Any, container: str, qual: str, owner: str) -> bool:
    """A class field whose value is a function (``produce = (base, recipe) => ...``, ``#run = function () {...}``)
    is a method of its class; a field holding anything else is left to the generic walk."""
    name_node = node.child_by_field_name("name") or node.child_by_field_name("property")
    if name_node is None or name_node.type not in ("property_identifier", "private_property_identifier"):
        return False  # a computed or string key names no symbol
    parent = ex.symbols.get(container)
    kind = "method" if parent is not None and parent.kind in _CONTAINERS - {"module"} else "function"
    return _js_function_value(ex, node, kind, _text(name_node), container, qual, owner)


def _js_function_value(ex: _TSExtractor, node: Any, kind: str, name: str, container: str, qual: str, owner: str
                       ) -> bool:
    """``node`` (a declarator or a field) defines ``name`` when its value is a function: the symbol, then the
    function's own definitions and calls under it. False (nothing added) for any other value."""
    value = node.child_by_field_name("value")
    if value is None or value.type not in _FUNCTION_VALUES:
        return False
    sid = ex.add(node, kind, name, container, qual)
    ex.visit_children(value, sid, sid, owner)
    return True


def _js_import(ex: _TSExtractor, node: Any, container: str, qual: str, owner: str) -> bool:
    source = node.child_by_field_name("source")
    if source is not None:
        ex.imports[_text(source).strip("'\"`")] = None
    return node.type == "import_statement"


def _go_method(ex: _TSExtractor, node: Any, container: str, qual: str, owner: str) -> bool:
    receiver = node.child_by_field_name("receiver")
    type_name = ""
    if receiver is not None:
        for param in receiver.named_children:
            tnode = param.child_by_field_name("type")
            while tnode is not None and tnode.type in ("pointer_type", "generic_type"):
                tnode = tnode.named_children[0] if tnode.named_children else None
            type_name = _text(tnode)
    name = _text(node.child_by_field_name("name"))
    if not name:
        return False
    qual_parent = f"{ex.module}.{type_name}" if type_name else ex.module
    parent = qual_parent if qual_parent in ex.symbols else ex.module
    sid = ex.add(node, "method", name, parent, qual_parent)
    ex.visit_children(node, sid, sid, type_name)
    return True


def _rust_impl(ex: _TSExtractor, node: Any, container: str, qual: str, owner: str) -> bool:
    type_node = node.child_by_field_name("type")
    type_name = _base_name(type_node) or _text(type_node)
    trait = node.child_by_field_name("trait")
    qual_parent = f"{qual}.{type_name}" if type_name else qual
    type_sid = qual_parent if qual_parent in ex.symbols else container
    if trait is not None and qual_parent in ex.symbols:
        ex.ref(qual_parent, INHERITS, _base_name(trait))
    body = node.child_by_field_name("body")
    if body is None:
        return True
    for child in body.children:
        if child.type in ("function_item", "function_signature_item"):
            name = _text(child.child_by_field_name("name"))
            if not name:
                continue
            sid = ex.add(child, "method", name, type_sid, qual_parent)
            ex.visit_children(child, sid, sid, type_name)
        else:
            ex.visit(child, type_sid, qual_parent, type_name)
    return True


def _java_import(ex: _TSExtractor, node: Any, container: str, qual: str, owner: str) -> bool:
    for child in node.named_children:
        if child.type in ("scoped_identifier", "identifier"):
            ex.imports[_text(child)] = None
    return True


_Handler = Callable[[_TSExtractor, Any, str, str, str], bool]
_SPECIAL: dict[tuple[str, str], _Handler] = {
    ("js", "variable_declarator"): _js_variable,
    ("js", "field_definition"): _js_field,  # JavaScript's grammar
    ("js", "public_field_definition"): _js_field,  # TypeScript's
    ("js", "import_statement"): _js_import,
    ("js", "export_statement"): _js_import,
    ("go", "method_declaration"): _go_method,
    ("rust", "impl_item"): _rust_impl,
    ("java", "import_declaration"): _java_import,
}


def _first_error(node: Any) -> Any:
    if node.is_error or node.is_missing:
        return node
    for child in node.children:
        if child.has_error or child.is_missing:
            found = _first_error(child)
            if found is not None:
                return found
    return None


def parse_treesitter(source: str, path: str, language: str, config: IndexConfig,
                     clock: PhaseClock | None = None) -> ParsedFile:
    """Parse one non-Python file into symbols, cards and unresolved references. ``clock`` gets the seconds of
    the secret scan and of the cards."""
    module = module_id_for(path)
    grammar = grammar_for(path, language)
    if "\r" in source:
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    t0 = perf_counter()
    masked, masked_lines = mask_secrets(source, path)
    if clock is not None:
        clock.add(PHASE_SECRETS, perf_counter() - t0)
    data = masked.encode("utf-8", "surrogatepass")
    try:
        tree = get_parser(grammar).parse(data)
    except Exception as exc:  # a grammar failure is a parse error of this file, not of the index
        return ParsedFile(path, module, language, error=f"{type(exc).__name__}: {exc}")
    root = tree.root_node
    error = ""
    partial = False
    if root.has_error:
        first = _first_error(root)
        row = (first.start_point[0] + 1) if first is not None else 1
        error = f"syntax error near line {row}"
        top_error_bytes = sum(c.end_byte - c.start_byte for c in root.children if c.type == "ERROR")
        if root.type == "ERROR" or top_error_bytes > UNUSABLE_ERROR_SHARE * max(1, len(data)):
            return ParsedFile(path, module, language, error=error)
        partial = True
    lines = masked.split("\n")
    ex = _TSExtractor(grammar, language, module, path, lines, config)
    n_lines = max(1, len(lines) - (1 if lines and lines[-1] == "" else 0))
    ex.symbols[module] = Symbol(module, "module", module.rsplit(".", 1)[-1], module, path, 1, n_lines, language,
                                f"module {path}", _module_doc(root, config))
    ex.spans[module] = (1, 1)
    try:
        ex.run(root)
    except RecursionError:
        return ParsedFile(path, module, language, error="RecursionError: nesting too deep")
    symbols = tuple(ex.symbols.values())
    t0 = perf_counter()
    children = [s for s in symbols if s.parent == module]
    cards: list[SymbolCard] = []
    for sym in symbols:
        b_line, h_line = ex.spans[sym.id]
        if sym.id == module:
            snippet = module_summary(children, config.snippet_lines, config.card_line_max_chars)
            cards.append(build_card(sym, lines, 1, masked_lines, config, snippet=snippet))
        else:
            cards.append(build_card(sym, lines, b_line, masked_lines, config, head_line=h_line))
    if clock is not None:
        clock.add(PHASE_CARDS, perf_counter() - t0)
    refs = tuple(RawRef(s, k, n) for (s, k, n) in ex.refs if s in ex.symbols)
    return ParsedFile(path, module, language, symbols, tuple(cards), refs, tuple(ex.imports), error=error,
                      partial=partial)


def _module_doc(root: Any, config: IndexConfig) -> str:
    """The file's leading comment block (``//!`` lines in Rust) when it stands apart from the first definition."""
    block: list[str] = []
    last_row = -1
    nxt = None
    for child in root.children:
        if child.type in _COMMENT_TYPES and (last_row < 0 or child.start_point[0] <= last_row + 1):
            block.append(_text(child))
            last_row = _end_row(child)
            continue
        nxt = child
        break
    if not block:
        return ""
    inner = all(b.startswith(("//!", "/*!")) for b in block)
    detached = nxt is None or nxt.start_point[0] > last_row + 1 or nxt.type in ("package_clause", "package_declaration")
    if inner or detached:
        return first_paragraph(_strip_comment("\n".join(block)), config.doc_max_chars)
    return ""
