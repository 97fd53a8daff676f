"""Python files through the stdlib ``ast``: modules, classes, functions, methods, and the names they use.

Symbol ids are the dotted module path relative to the indexed root plus the qualname
(``pkg.mod.Class.method``; ``pkg/__init__.py`` is ``pkg``; a nested function is
``pkg.mod.outer.inner``). Uses of names are recorded as written, with two local rewrites that
make them resolvable later: the first parameter of a method becomes ``self``, and a local
variable whose type is visible (``x: Table`` or ``x = Table(...)``) is replaced by that type.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import re
from time import perf_counter
from typing import Iterable

from ctxbench.codegraph.cards import build_card, clip, first_paragraph, module_summary
from ctxbench.codegraph.phase_clock import PHASE_CARDS, PHASE_SECRETS, PhaseClock
from ctxbench.records.code import CALLS, INHERITS, REFERENCES, ParsedFile, RawRef
from ctxbench.redaction import mask_secrets
from ctxbench.records.code import Symbol, SymbolCard
from ctxbench.config import IndexConfig

_BUILTINS = frozenset(dir(builtins)) | {"self", "cls", "super"}
# the node types the walk looks at on every node, bound once (an ``ast.X`` lookup per check cost a tenth of a parse)
_AST, _Name, _Attribute, _Call, _Constant, _Load = ast.AST, ast.Name, ast.Attribute, ast.Call, ast.Constant, ast.Load
_DEF, _CLASS, _IMPORT, _ASSIGN, _ANN_ASSIGN = range(1, 6)
# the statements the walk handles itself (the rest: their child nodes in field order)
_SPECIAL: dict[type, int] = {ast.FunctionDef: _DEF, ast.AsyncFunctionDef: _DEF, ast.ClassDef: _CLASS,
                             ast.Import: _IMPORT, ast.ImportFrom: _IMPORT, ast.Assign: _ASSIGN,
                             ast.AnnAssign: _ANN_ASSIGN}
# fields that never hold names worth recording (contexts, operators, comments, identifiers as str)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "type_comment", "kind", "name", "names", "id", "attr", "arg",
                          "asname", "module", "level", "conversion", "is_async", "lineno", "tag"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_PROPERTY_DECORATORS = ("property", "cached_property")
_WS = re.compile(r"\s+")
_DOTTED_IN_STRING = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_ANNOTATION_WRAPPERS = frozenset({"Optional", "typing.Optional", "ClassVar", "typing.ClassVar", "Final", "typing.Final",
                                  "Annotated", "typing.Annotated", "type", "Type", "typing.Type"})


def module_name_for(path: str, prefix: str = "") -> tuple[str, bool]:
    """The module id of a Python file path relative to the root, and whether it is a package ``__init__``
    (a ``.pyi`` stub names the module of its ``.py``)."""
    stem = path[:-4] if path.endswith(".pyi") else path[:-3] if path.endswith(".py") else path
    parts = stem.split("/")
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    if prefix:
        parts = [prefix, *parts]
    return ".".join(p for p in parts if p), is_package


def _normalize(source: str) -> str:
    if "\r" in source:
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    return source


class _Frame:
    __slots__ = ("sid", "cls_id", "self_name", "types", "is_class")

    def __init__(self, sid: str, cls_id: str, self_name: str, types: dict[str, str], is_class: bool):
        self.sid = sid
        self.cls_id = cls_id  # the class whose ``self`` is in scope ('' outside methods)
        self.self_name = self_name
        self.types = types  # local variable -> type name as written
        self.is_class = is_class


class _Extractor:
    def __init__(self, module: str, is_package: bool, lines: list[str], config: IndexConfig, path: str):
        self.module = module
        self.is_package = is_package
        self.lines = lines
        self.config = config
        self.path = path
        self.symbols: dict[str, Symbol] = {}
        self.spans: dict[str, tuple[int, int]] = {}  # id -> (body_line, head_line)
        self.refs: dict[tuple[str, str, str], None] = {}
        self.imports: dict[str, None] = {}
        self.bindings: dict[str, str] = {}
        self.stars: dict[str, None] = {}
        self.attr_types: dict[tuple[str, str], str] = {}
        self.explicit_types: set[tuple[str, str]] = set()  # attribute types from annotations win over inferred ones
        self.overloads: dict[str, list[str]] = {}  # id -> the signatures of its ``@overload``s, in order

    # -- text helpers ---------------------------------------------------------------
    def _char_col(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        if line.isascii():
            return col
        return len(line.encode("utf-8")[:col].decode("utf-8", "replace"))

    def segment(self, node: ast.AST) -> str:
        l1, l2 = node.lineno, node.end_lineno or node.lineno
        c1 = self._char_col(l1, node.col_offset)
        c2 = self._char_col(l2, node.end_col_offset or 0)
        if l1 == l2:
            return self.lines[l1 - 1][c1:c2]
        parts = [self.lines[l1 - 1][c1:]] + self.lines[l1: l2 - 1] + [self.lines[l2 - 1][:c2]]
        return _WS.sub(" ", " ".join(p.strip() for p in parts))

    def header(self, node: ast.AST, anchors: Iterable[ast.AST]) -> str:
        """The definition's header text up to (not including) its colon, on one line."""
        line, col = node.lineno, self._char_col(node.lineno, node.col_offset)
        start_line, start_col = line, col
        best = (line, col)
        for a in anchors:
            if a is None or not hasattr(a, "end_lineno"):
                continue
            pos = (a.end_lineno, self._char_col(a.end_lineno, a.end_col_offset))
            if pos > best:
                best = pos
        line, col = best
        lines = self.lines
        while line <= len(lines):
            text = lines[line - 1]
            hit = text.find(":", col)  # the first ':' from col, unless a comment starts before it
            if hit >= 0:
                comment = text.find("#", col, hit)
                if comment >= 0:
                    hit = -1
            if hit >= 0:
                if line == start_line:
                    raw = text[start_col:hit]
                else:
                    raw = " ".join([lines[start_line - 1][start_col:].strip()] +
                                   [ln.strip() for ln in lines[start_line: line - 1]] + [text[:hit].strip()])
                sig = _WS.sub(" ", raw).strip()
                sig = sig.replace("( ", "(").replace(", )", ")").replace(",)", ")").replace(" )", ")")
                return clip(sig, self.config.signature_max_chars)
            line += 1
            col = 0
        return clip(_WS.sub(" ", lines[start_line - 1][start_col:]).strip(), self.config.signature_max_chars)

    # -- recording ------------------------------------------------------------------
    def ref(self, frame: _Frame, kind: str, name: str | None) -> None:
        if not name:
            return
        head, dot, rest = name.partition(".")
        if dot:
            if frame.self_name and head == frame.self_name:
                name = "self." + rest
            elif head in frame.types:
                name = frame.types[head] + "." + rest
        elif name in frame.types and kind != CALLS:
            return  # a local variable
        self.refs[(frame.sid, kind, name)] = None

    def annotation_refs(self, frame: _Frame, ann: ast.AST | None) -> None:
        if ann is None:
            return
        if type(ann) is ast.Constant and isinstance(ann.value, str):
            for name in _DOTTED_IN_STRING.findall(ann.value):
                self.ref(frame, REFERENCES, name)
            return
        self.visit(ann, frame)

    def bind(self, local: str, target: str) -> None:
        if local not in self.bindings:
            self.bindings[local] = target

    # -- definitions ----------------------------------------------------------------
    def add_symbol(self, sym: Symbol, body_line: int, head_line: int) -> bool:
        old = self.symbols.get(sym.id)
        if old is not None and any(d.endswith((".setter", ".deleter")) for d in sym.decorators):
            return False  # keep the property getter: it carries the doc
        self.symbols[sym.id] = sym
        self.spans[sym.id] = (body_line, head_line)
        return True

    def overload_signature(self, sid: str) -> str:
        sigs = self.overloads[sid]
        cap = max(1, self.config.overload_signatures_max)
        return "\n".join(sigs[:cap] + (["…"] if len(sigs) > cap else []))

    def note_overload(self, sym: Symbol) -> Symbol | None:
        """Record an ``@overload``; the symbol to add for the first one, None for later ones (they widen the first,
        which keeps its start, doc and card)."""
        sigs = self.overloads.setdefault(sym.id, [])
        sigs.append(sym.signature)
        first = self.symbols.get(sym.id) if len(sigs) > 1 else None
        if first is None:
            return dataclasses.replace(sym, signature=self.overload_signature(sym.id))
        self.symbols[sym.id] = dataclasses.replace(first, end_line=max(first.end_line, sym.end_line),
                                                   signature=self.overload_signature(sym.id))
        return None

    def body_start(self, node: ast.AST) -> tuple[str, int]:
        body = node.body  # type: ignore[attr-defined]
        first = body[0] if body else None
        doc = ""
        if (first is not None and type(first) is ast.Expr and type(first.value) is ast.Constant
                and isinstance(first.value.value, str)):
            doc = first_paragraph(first.value.value, self.config.doc_max_chars)
            start = (first.end_lineno or first.lineno) + 1
            if len(body) > 1:
                start = body[1].lineno
            return doc, start
        return doc, first.lineno if first is not None else node.lineno  # type: ignore[attr-defined]

    def visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef, frame: _Frame) -> None:
        qual = f"{frame.sid}.{node.name}"
        in_class = frame.is_class
        decorators = tuple("@" + self.segment(d) for d in node.decorator_list)
        args = node.args
        anchors = [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg, *args.defaults,
                   *[d for d in args.kw_defaults if d is not None], node.returns]
        doc, body_line = self.body_start(node)
        head_line = min((d.lineno for d in node.decorator_list), default=node.lineno)
        sym = Symbol(
            id=qual, kind="method" if in_class else "function", name=node.name, module=self.module, path=self.path,
            line=node.lineno, end_line=node.end_lineno or node.lineno, language="python",
            signature=self.header(node, anchors), doc=doc, decorators=decorators, parent=frame.sid,
        )
        if _is_overload(decorators):
            sym = self.note_overload(sym)
            if sym is not None:
                self.add_symbol(sym, body_line, head_line)
        else:
            if qual in self.overloads:  # the implementation after its overloads: typed by them
                sym = dataclasses.replace(sym, signature=self.overload_signature(qual))
            self.add_symbol(sym, body_line, head_line)
        if in_class and node.returns is not None and any(d.endswith(_PROPERTY_DECORATORS) for d in decorators):
            returned = _type_name(node.returns)
            if returned:  # a property's type types the attribute: self.app.exit() -> App.exit
                self.note_attr_type((frame.sid, node.name), returned, True)
        if in_class:
            static = any(d in ("@staticmethod",) for d in decorators)
            positional = args.posonlyargs + args.args
            self_name = positional[0].arg if positional and not static else ""
            cls_id = frame.sid
        else:
            self_name, cls_id = frame.self_name, frame.cls_id
        inner = _Frame(qual, cls_id, self_name, dict(frame.types) if not in_class else {}, False)
        for d in node.decorator_list:
            self.visit(d, inner)
        for a in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg):
            if a is None:
                continue
            if a.annotation is not None:
                self.annotation_refs(inner, a.annotation)
                t = _type_name(a.annotation)
                if t and a.arg != self_name:
                    inner.types[a.arg] = t
        for d in (*args.defaults, *args.kw_defaults):
            if d is not None:
                self.visit(d, frame)
        self.annotation_refs(inner, node.returns)
        self.visit_body(node.body, inner)

    def visit_class(self, node: ast.ClassDef, frame: _Frame) -> None:
        qual = f"{frame.sid}.{node.name}"
        decorators = tuple("@" + self.segment(d) for d in node.decorator_list)
        doc, body_line = self.body_start(node)
        head_line = min((d.lineno for d in node.decorator_list), default=node.lineno)
        sym = Symbol(
            id=qual, kind="class", name=node.name, module=self.module, path=self.path, line=node.lineno,
            end_line=node.end_lineno or node.lineno, language="python",
            signature=self.header(node, [*node.bases, *node.keywords]), doc=doc, decorators=decorators,
            parent=frame.sid,
        )
        self.add_symbol(sym, body_line, head_line)
        inner = _Frame(qual, frame.cls_id, frame.self_name, {}, True)
        for d in node.decorator_list:
            self.visit(d, inner)
        for base in node.bases:
            target = base.value if type(base) is ast.Subscript else base
            name = _dotted(target)
            if name:
                self.refs[(qual, INHERITS, name)] = None
            else:
                self.visit(base, inner)
        for kw in node.keywords:
            self.visit(kw.value, inner)
        self.visit_body(node.body, inner)

    def visit_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if type(node) is ast.Import:
            for alias in node.names:
                self.imports[alias.name] = None
                if alias.asname:
                    self.bind(alias.asname, alias.name)
                else:
                    head = alias.name.split(".")[0]
                    self.bind(head, head)
            return
        base = self.absolute_base(node.level, node.module)
        if base is None:
            return
        if base:
            self.imports[base] = None
        for alias in node.names:
            if alias.name == "*":
                if base:
                    self.stars[base] = None
                continue
            target = f"{base}.{alias.name}" if base else alias.name
            self.imports[target] = None
            self.bind(alias.asname or alias.name, target)

    def absolute_base(self, level: int, module: str | None) -> str | None:
        if not level:
            return module or ""
        parts = self.module.split(".") if self.module else []
        package = parts if self.is_package else parts[:-1]
        up = level - 1
        if up > len(package):
            return None
        base = package[: len(package) - up]
        if module:
            base = [*base, *module.split(".")]
        return ".".join(base)

    # -- bodies and expressions -------------------------------------------------------
    def visit_body(self, body: list[ast.stmt], frame: _Frame) -> None:
        for stmt in body:
            self.visit(stmt, frame)

    def visit(self, node: ast.AST, frame: _Frame) -> None:
        t = type(node)
        if t is _Name:
            if type(node.ctx) is _Load and node.id not in _BUILTINS:  # type: ignore[attr-defined]
                self.ref(frame, REFERENCES, node.id)  # type: ignore[attr-defined]
            return
        if t is _Attribute:
            if type(node.ctx) is _Load:  # type: ignore[attr-defined]
                name = _dotted(node)
                if name:
                    self.ref(frame, REFERENCES, name)
                    return
            self.visit(node.value, frame)  # type: ignore[attr-defined]
            return
        if t is _Call:
            name = _dotted(node.func)  # type: ignore[attr-defined]
            visit = self.visit
            if name:
                self.ref(frame, CALLS, name)
            else:
                visit(node.func, frame)  # type: ignore[attr-defined]
            for a in node.args:  # type: ignore[attr-defined]
                visit(a, frame)
            for kw in node.keywords:  # type: ignore[attr-defined]
                visit(kw.value, frame)
            return
        if t is _Constant:
            return
        special = _SPECIAL.get(t)
        if special is not None:
            if special == _DEF:
                self.visit_def(node, frame)  # type: ignore[arg-type]
                return
            if special == _CLASS:
                self.visit_class(node, frame)  # type: ignore[arg-type]
                return
            if special == _IMPORT:
                self.visit_import(node)  # type: ignore[arg-type]
                return
            if special == _ASSIGN:
                self.note_assign(node.targets, node.value, None, frame)  # type: ignore[attr-defined]
            else:
                self.annotation_refs(frame, node.annotation)  # type: ignore[attr-defined]
                self.note_assign([node.target], node.value, node.annotation, frame)  # type: ignore[attr-defined]
                if node.value is not None:  # type: ignore[attr-defined]
                    self.visit(node.value, frame)  # type: ignore[attr-defined]
                self.visit(node.target, frame)  # type: ignore[attr-defined]
                return
        fields = _CHILD_FIELDS.get(t)
        if fields is None:
            fields = _CHILD_FIELDS[t] = tuple(f for f in t._fields if f not in _LEAF_FIELDS)
        visit = self.visit
        for name in fields:
            value = getattr(node, name, None)
            if value is None:
                continue
            if type(value) is list:
                for item in value:
                    if isinstance(item, _AST):
                        visit(item, frame)
            elif isinstance(value, _AST):
                visit(value, frame)

    def value_type(self, value: ast.expr, frame: _Frame) -> str:
        """The type a value visibly has: ``T(...)``, ``x or T(...)``, ``a if c else T(...)``, a typed local."""
        t = type(value)
        if t is ast.Call:
            return _dotted(value.func) or ""  # type: ignore[attr-defined]
        if t is ast.Name:
            return frame.types.get(value.id, "")  # type: ignore[attr-defined]
        if t is ast.BoolOp:
            for v in reversed(value.values):  # type: ignore[attr-defined]
                found = self.value_type(v, frame)
                if found:
                    return found
        if t is ast.IfExp:
            return self.value_type(value.body, frame) or self.value_type(value.orelse, frame)  # type: ignore[attr-defined]
        return ""

    def note_attr_type(self, key: tuple[str, str], type_name: str, explicit: bool) -> None:
        if key not in self.attr_types or (explicit and key not in self.explicit_types):
            self.attr_types[key] = type_name
            if explicit:
                self.explicit_types.add(key)

    def note_assign(self, targets: list[ast.expr], value: ast.expr | None, annotation: ast.expr | None,
                    frame: _Frame) -> None:
        type_name = _type_name(annotation) if annotation is not None else ""
        explicit = bool(type_name)
        if not type_name and value is not None:
            type_name = self.value_type(value, frame)
        if not type_name:
            return
        for target in targets:
            tt = type(target)
            if tt is ast.Name:
                if frame.is_class:
                    self.note_attr_type((frame.sid, target.id), type_name, explicit)
                else:
                    frame.types[target.id] = type_name
            elif (tt is ast.Attribute and type(target.value) is ast.Name and frame.self_name
                  and target.value.id == frame.self_name and frame.cls_id):
                self.note_attr_type((frame.cls_id, target.attr), type_name, explicit)


def _is_overload(decorators: tuple[str, ...]) -> bool:
    """``@overload`` / ``@typing.overload`` (as written)."""
    return any(d == "@overload" or d.endswith(".overload") for d in decorators)


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name (``super().x`` gives ``super.x``), else None."""
    t = type(node)
    if t is _Name:  # the common case: a plain name
        return node.id  # type: ignore[attr-defined]
    parts: list[str] = []
    while True:
        if t is _Attribute:
            parts.append(node.attr)  # type: ignore[attr-defined]
            node = node.value  # type: ignore[attr-defined]
            t = type(node)
        elif t is _Name:
            parts.append(node.id)  # type: ignore[attr-defined]
            break
        elif t is _Call and type(node.func) is _Name and node.func.id == "super":  # type: ignore[attr-defined]
            parts.append("super")
            break
        else:
            return None
    return ".".join(reversed(parts))


def _type_name(ann: ast.AST | None) -> str:
    """The class named by a simple annotation: ``X``, ``a.X``, ``Optional[X]``, ``X | None``, ``"X"``."""
    while ann is not None:
        t = type(ann)
        if t is ast.Name or t is ast.Attribute:
            return _dotted(ann) or ""
        if t is ast.Constant and isinstance(ann.value, str):  # type: ignore[attr-defined]
            text = ann.value.strip()  # type: ignore[attr-defined]
            if _DOTTED_IN_STRING.fullmatch(text):
                return text
            try:  # a forward reference like "App[object]" or "Widget | None"
                ann = ast.parse(text, mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                return ""
            continue
        if t is ast.Subscript and _dotted(ann.value) not in _ANNOTATION_WRAPPERS:  # type: ignore[attr-defined]
            return _dotted(ann.value) or ""  # Generic[T] -> Generic: the class being parameterized  # type: ignore[attr-defined]
        if t is ast.Subscript and _dotted(ann.value) in _ANNOTATION_WRAPPERS:  # type: ignore[attr-defined]
            ann = ann.slice  # type: ignore[attr-defined]
            if type(ann) is ast.Tuple:
                ann = ann.elts[0] if ann.elts else None  # type: ignore[attr-defined]
            continue
        if t is ast.BinOp and type(ann.op) is ast.BitOr:  # type: ignore[attr-defined]
            left, right = ann.left, ann.right  # type: ignore[attr-defined]
            if type(right) is ast.Constant and right.value is None:
                ann = left
            elif type(left) is ast.Constant and left.value is None:
                ann = right
            else:
                return ""
            continue
        return ""
    return ""


def parse_python(source: str, path: str, module: str, is_package: bool, config: IndexConfig,
                 clock: PhaseClock | None = None) -> ParsedFile:
    """Parse one Python file into symbols, cards and unresolved references (syntax errors are reported).
    ``clock`` gets the seconds of the secret scan and of the cards."""
    source = _normalize(source)
    t0 = perf_counter()
    masked, masked_lines = mask_secrets(source, path)
    if clock is not None:
        clock.add(PHASE_SECRETS, perf_counter() - t0)
    error, partial = "", False
    try:
        tree = ast.parse(masked, filename=path)
    except SyntaxError as exc:
        error = f"SyntaxError: {exc.msg} (line {exc.lineno})"
        from ctxbench.codegraph.python_repair import repair

        repaired = repair(masked)  # the broken statements blanked, so the rest keeps its symbols
        if repaired is None:
            return ParsedFile(path, module, "python", error=error, is_package=is_package)
        masked, partial = repaired, True
        tree = ast.parse(masked, filename=path)
    except (ValueError, RecursionError, MemoryError) as exc:
        return ParsedFile(path, module, "python", error=f"{type(exc).__name__}: {exc}", is_package=is_package)
    lines = masked.split("\n")
    ex = _Extractor(module, is_package, lines, config, path)
    doc = ""
    body_line = 1
    if tree.body:
        first = tree.body[0]
        if type(first) is ast.Expr and type(first.value) is ast.Constant and isinstance(first.value.value, str):
            doc = first_paragraph(first.value.value, config.doc_max_chars)
            body_line = (first.end_lineno or first.lineno) + 1
    mod_sym = Symbol(
        id=module, kind="module", name=module.rsplit(".", 1)[-1], module=module, path=path, line=1,
        end_line=max(1, len(lines) - (1 if lines and lines[-1] == "" else 0)), language="python",
        signature=f"module {module}", doc=doc,
    )
    ex.symbols[module] = mod_sym
    ex.spans[module] = (body_line, 1)
    frame = _Frame(module, "", "", {}, False)
    try:
        ex.visit_body(tree.body, frame)
    except RecursionError:
        return ParsedFile(path, module, "python", error="RecursionError: nesting too deep", is_package=is_package)
    symbols = tuple(ex.symbols.values())
    top_level = {s.name for s in symbols if s.parent == module} | set(ex.bindings)
    refs = tuple(
        RawRef(src, kind, name) for (src, kind, name) in ex.refs
        if src in ex.symbols and (("." in name) or name not in _BUILTINS or name in top_level)
    )
    t0 = perf_counter()
    cards: list[SymbolCard] = []
    children = [s for s in symbols if s.parent == module]
    for sym in symbols:
        b_line, h_line = ex.spans[sym.id]
        if sym.kind == "module":
            snippet = module_summary(children, config.snippet_lines, config.card_line_max_chars)
            cards.append(build_card(sym, lines, b_line, masked_lines, config, snippet=snippet))
        else:
            cards.append(build_card(sym, lines, b_line, masked_lines, config, head_line=h_line))
    if clock is not None:
        clock.add(PHASE_CARDS, perf_counter() - t0)
    return ParsedFile(
        path=path, module=module, language="python", symbols=symbols, cards=tuple(cards), refs=refs,
        imports=tuple(ex.imports), bindings=tuple(ex.bindings.items()), star_imports=tuple(ex.stars),
        attr_types=tuple((c, a, t) for (c, a), t in ex.attr_types.items()), is_package=is_package,
        error=error, partial=partial,
    )
