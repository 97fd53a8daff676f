"""Resolve the references of all parsed files into the edges of the code graph.

Cheap enough to run over the whole repository after every change, which keeps edges from
unchanged files consistent with targets that moved. Python names resolve through the scopes a
reader would follow (enclosing functions, the module, its imports and re-exports, ``self`` and
base classes, attribute types seen in assignments); other languages resolve by name within the
repository, preferring the same module, and give up when a name is ambiguous.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Iterable, Sequence

from ctxbench.records.code import CALLS, CONTAINS, IMPORTS, INHERITS, REFERENCES, ParsedFile
from ctxbench.records.code import Symbol

MAX_ALIAS_DEPTH = 6  # re-export chains followed when resolving an import
_CALLABLE = frozenset({"class", "function", "method", "struct", "enum", "interface", "trait", "type"})
_TYPES = frozenset({"class", "struct", "enum", "interface", "trait", "type"})
_FUNCS = frozenset({"function", "method"})
_JS_FAMILY = {"javascript": "js", "typescript": "js"}
_JS_EXTS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")


@dataclass(frozen=True, order=True)
class Edge:
    src: str
    dst: str
    kind: str  # contains | imports | calls | inherits | references


class _Resolver:
    def __init__(self, files: Sequence[ParsedFile]):
        self.symbols: dict[str, Symbol] = {}
        for f in files:
            for s in f.symbols:
                self.symbols.setdefault(s.id, s)
        py = [f for f in files if f.language == "python" and not f.error]
        # a module's runtime file and its .pyi stub share the module id: their imports add up (runtime first wins)
        self.bindings: dict[str, dict[str, str]] = {}
        self.stars: dict[str, tuple[str, ...]] = {}
        for f in py:
            names = self.bindings.setdefault(f.module, {})
            for local, target in f.bindings:
                names.setdefault(local, target)
            self.stars[f.module] = tuple(dict.fromkeys(self.stars.get(f.module, ()) + f.star_imports))
        self.attr_types: dict[tuple[str, str], str] = {}
        for f in py:
            for cls, attr, type_name in f.attr_types:
                self.attr_types.setdefault((cls, attr), type_name)
        self.importable = _importable_names(py)
        self.bases: dict[str, list[str]] = {}
        self._cache: dict[tuple[str, str], str | None] = {}

    # -- Python ------------------------------------------------------------------------
    def absolute(self, dotted: str, depth: int = 0) -> str | None:
        """The symbol an absolute dotted name (``pkg.mod.Class.attr``) denotes inside the repository."""
        key = ("", dotted)
        if key in self._cache:
            return self._cache[key]
        self._cache[key] = None  # cuts import cycles
        parts = dotted.split(".")
        result = None
        for i in range(len(parts), 0, -1):
            module = self.importable.get(".".join(parts[:i]))
            if module is not None:
                result = self.member(module, parts[i:], depth) if i < len(parts) else module
                break
        self._cache[key] = result
        return result

    def member(self, container: str, rest: Sequence[str], depth: int = 0) -> str | None:
        """Follow ``rest`` attribute by attribute from the symbol ``container``."""
        cur = container
        for part in rest:
            child = f"{cur}.{part}"
            if child in self.symbols:
                cur = child
                continue
            sym = self.symbols[cur]
            kind = sym.kind
            nxt: str | None = None
            if kind == "method" and depth < MAX_ALIAS_DEPTH:  # a typed property: continue from its type
                type_name = self.attr_types.get((sym.parent, sym.name))
                if type_name and sym.parent in self.symbols:
                    typed = self.scoped(self.symbols[sym.parent], type_name.split("."), depth + 1)
                    if typed is not None and self.symbols[typed].kind in _TYPES:
                        nxt = self.member(typed, [part], depth + 1)
            elif kind == "module" and depth < MAX_ALIAS_DEPTH:
                target = self.bindings.get(cur, {}).get(part)
                if target:
                    nxt = self.absolute(target, depth + 1)
                if nxt is None:
                    for star in self.stars.get(cur, ()):
                        nxt = self.absolute(f"{star}.{part}", depth + 1)
                        if nxt:
                            break
            elif kind == "class":
                nxt = self.in_bases(cur, part)
                if nxt is None:
                    type_name = self.attr_type(cur, part)
                    if type_name:
                        nxt = self.scoped(self.symbols[cur], type_name.split("."), depth + 1)
                        if nxt is not None and self.symbols[nxt].kind not in _TYPES:
                            nxt = None
            if nxt is None:
                return None
            cur = nxt
        return cur

    def attr_type(self, cls: str, attr: str) -> str:
        seen = {cls}
        queue = [cls]
        while queue:
            c = queue.pop(0)
            t = self.attr_types.get((c, attr))
            if t:
                return t
            for b in self.bases.get(c, ()):
                if b not in seen:
                    seen.add(b)
                    queue.append(b)
        return ""

    def in_bases(self, cls: str, name: str) -> str | None:
        """``name`` defined in a base class of ``cls`` (breadth-first, in-repo bases only)."""
        seen = {cls}
        queue = list(self.bases.get(cls, ()))
        while queue:
            b = queue.pop(0)
            if b in seen:
                continue
            seen.add(b)
            cand = f"{b}.{name}"
            if cand in self.symbols:
                return cand
            queue.extend(self.bases.get(b, ()))
        return None

    def enclosing_class(self, sym: Symbol) -> str:
        cur: Symbol | None = sym
        while cur is not None:
            if cur.kind == "class":
                return cur.id
            cur = self.symbols.get(cur.parent) if cur.parent else None
        return ""

    def scoped(self, sym: Symbol, parts: Sequence[str], depth: int = 0) -> str | None:
        """Resolve a dotted name used inside ``sym`` through the Python scopes."""
        head, rest = parts[0], parts[1:]
        if head in ("self", "super"):
            cls = self.enclosing_class(sym) if sym.kind != "class" else ""
            if not cls or not rest:
                return None
            if head == "super":
                first = self.in_bases(cls, rest[0])
                return self.member(first, rest[1:], depth) if first else None
            return self.member(cls, rest, depth)
        cur: Symbol | None = sym
        while cur is not None and cur.kind != "module":
            if cur.kind in _FUNCS or cur is sym:
                cand = f"{cur.id}.{head}"
                if cand in self.symbols:
                    return self.member(cand, rest, depth)
            cur = self.symbols.get(cur.parent) if cur.parent else None
        module = sym.module
        cand = f"{module}.{head}"
        if cand in self.symbols:
            return self.member(cand, rest, depth)
        target = self.bindings.get(module, {}).get(head)
        if target:
            found = self.absolute(target, depth + 1)
            return self.member(found, rest, depth) if found else None
        for star in self.stars.get(module, ()):
            found = self.absolute(f"{star}.{head}", depth + 1)
            if found:
                return self.member(found, rest, depth)
        return None

    def python_ref(self, sym: Symbol, kind: str, name: str) -> str | None:
        parts = name.split(".")
        target = self.scoped(sym, parts)
        if target is None and kind == REFERENCES and len(parts) > 1:
            for cut in range(len(parts) - 1, 0, -1):  # the longest part of the chain that resolves
                if parts[0] in ("self", "super") and cut == 1:
                    break
                target = self.scoped(sym, parts[:cut])
                if target is not None:
                    break
        if target is None:
            return None
        tkind = self.symbols[target].kind
        if kind == CALLS and tkind not in _CALLABLE:
            return None
        if kind == INHERITS and tkind not in _TYPES:
            return None
        if kind == REFERENCES and tkind == "module":
            return None
        return target


def _importable_names(files: Iterable[ParsedFile]) -> dict[str, str]:
    """Import name -> module id: the id itself, and the name relative to its source root (``src/`` layouts)."""
    package_dirs = {posixpath.dirname(f.path) for f in files if f.is_package}
    names: dict[str, str] = {}
    extra: dict[str, str] = {}
    for f in files:
        names[f.module] = f.module
        directory = posixpath.dirname(f.path)
        top = directory
        while top and top in package_dirs:
            top = posixpath.dirname(top)
        rel = f.path[len(top) + 1:] if top else f.path
        rel = rel[:-4] if rel.endswith(".pyi") else rel[:-3] if rel.endswith(".py") else rel
        parts = rel.split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            extra.setdefault(".".join(parts), f.module)
    for name, module in extra.items():
        names.setdefault(name, module)
    return names


def _js_module_index(files: Sequence[ParsedFile]) -> dict[str, str]:
    return {f.path: f.module for f in files if f.language in _JS_FAMILY}


def _resolve_js_import(spec: str, path: str, by_path: dict[str, str]) -> str | None:
    if not spec.startswith("."):
        return None
    base = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
    candidates = [base] + [base + ext for ext in _JS_EXTS] + [f"{base}/index{ext}" for ext in _JS_EXTS]
    stem, ext = posixpath.splitext(base)
    if ext in (".js", ".jsx", ".mjs", ".cjs"):  # TypeScript imports written with .js
        candidates += [stem + e for e in _JS_EXTS]
    for cand in candidates:
        if cand in by_path:
            return by_path[cand]
    return None


def _family(language: str) -> str:
    return _JS_FAMILY.get(language, language)


def resolve_edges(files: Sequence[ParsedFile]) -> list[Edge]:
    """All edges of the code graph, sorted, without duplicates or self-loops."""
    return [Edge(*e) for e in resolve_edge_rows(files)]


def resolve_edge_rows(files: Sequence[ParsedFile]) -> list[tuple[str, str, str]]:
    """``resolve_edges`` as (src, dst, kind) rows, as the store keeps them (no record made per edge)."""
    r = _Resolver(files)
    symbols = r.symbols
    edges: set[tuple[str, str, str]] = set()
    for sym in symbols.values():
        if sym.parent and sym.parent in symbols:
            edges.add((sym.parent, sym.id, CONTAINS))
    parsed = [f for f in files if not f.error or f.partial]

    # inheritance first: base classes feed member lookup
    for f in parsed:
        if f.language != "python":
            continue
        for ref in f.refs:
            if ref.kind == INHERITS and ref.source in symbols:
                target = r.python_ref(symbols[ref.source], INHERITS, ref.name)
                if target and target != ref.source:
                    r.bases.setdefault(ref.source, []).append(target)
    by_name, by_type_member = _name_indexes(symbols.values())
    for f in parsed:
        if f.language == "python" or not f.refs:
            continue
        for ref in f.refs:
            if ref.kind == INHERITS and ref.source in symbols:
                target = _named_ref(symbols[ref.source], ref.name, INHERITS, by_name, by_type_member, symbols)
                if target and target != ref.source:
                    r.bases.setdefault(ref.source, []).append(target)

    for f in parsed:
        python = f.language == "python"
        for ref in f.refs:
            sym = symbols.get(ref.source)
            if sym is None or sym.path != f.path:
                continue
            try:
                if python:
                    target = r.python_ref(sym, ref.kind, ref.name)
                else:
                    target = _named_ref(sym, ref.name, ref.kind, by_name, by_type_member, symbols)
            except RecursionError:  # a pathological alias chain: leave this one reference unresolved
                continue
            if target and target != ref.source:
                edges.add((ref.source, target, ref.kind))

    js_paths = _js_module_index(files)
    java_classes = {s.name: s for s in symbols.values() if s.language == "java" and s.kind in _TYPES and
                    symbols.get(s.parent) is not None and symbols[s.parent].kind == "module"}
    for f in parsed:
        if f.module not in symbols:
            continue
        for name in f.imports:
            target = None
            if f.language == "python":
                target = r.importable.get(name)
            elif f.language in _JS_FAMILY:
                target = _resolve_js_import(name, f.path, js_paths)
            elif f.language == "java":
                cls = java_classes.get(name.rsplit(".", 1)[-1])
                if cls is not None and name.replace(".", "/") in cls.path.rsplit(".", 1)[0]:
                    target = cls.module
            if target and target != f.module and target in symbols:
                edges.add((f.module, target, IMPORTS))
    return sorted(edges)


def _name_indexes(symbols: Iterable[Symbol]) -> tuple[dict[tuple[str, str], list[Symbol]], dict[tuple[str, str, str], Symbol]]:
    by_name: dict[tuple[str, str], list[Symbol]] = {}
    by_type_member: dict[tuple[str, str, str], Symbol] = {}
    types: dict[str, Symbol] = {}
    for s in symbols:
        if s.language == "python" or s.kind == "module":
            continue
        fam = _family(s.language)
        by_name.setdefault((fam, s.name), []).append(s)
        if s.kind in _TYPES:
            types[s.id] = s
    for s in symbols:
        if s.language == "python" or s.kind == "module":
            continue
        owner = s.id.rsplit(".", 1)[0]
        owner_name = owner.rsplit(".", 1)[-1]
        by_type_member.setdefault((_family(s.language), owner_name, s.name), s)
    return by_name, by_type_member


def _named_ref(sym: Symbol, name: str, kind: str, by_name: dict, by_type_member: dict,
               symbols: dict[str, Symbol]) -> str | None:
    """Resolve a name used in another language: qualifier.name or a bare name, within the repository."""
    fam = _family(sym.language)
    qualifier, _, bare = name.rpartition(".")
    if qualifier in ("this", "self", "Self", "super"):
        owner = sym.id.rsplit(".", 1)[0] if sym.kind in _FUNCS else sym.id
        cand = f"{owner}.{bare}"
        if cand in symbols:
            return cand
        owner_name = owner.rsplit(".", 1)[-1]
        hit = by_type_member.get((fam, owner_name, bare))
        return hit.id if hit is not None else None
    if qualifier and qualifier[:1].isupper():
        hit = by_type_member.get((fam, qualifier.rsplit(".", 1)[-1], bare))
        if hit is not None:
            return hit.id
    candidates = by_name.get((fam, bare), ())
    if kind == INHERITS:
        candidates = [c for c in candidates if c.kind in _TYPES]
    elif kind == CALLS:
        candidates = [c for c in candidates if c.kind in _CALLABLE]
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0].id
    same_module = [c for c in candidates if c.module == sym.module]
    if len(same_module) == 1:
        return same_module[0].id
    if not qualifier:  # a bare call: prefer free functions over methods of unknown receivers
        free = [c for c in candidates if c.kind != "method"]
        if len(free) == 1:
            return free[0].id
    return None
