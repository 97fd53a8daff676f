"""What parsing one file yields, before references are resolved across the repository.

Parsers (``python_ast``, ``treesitter``) return a ``ParsedFile``; the index stores it per file
(so an unchanged file is never parsed again) and ``resolve`` turns the references of all files
into edges each time something changed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ctxbench.codegraph.symbols import Symbol, SymbolCard

# edge kinds of the code graph
CONTAINS = "contains"
IMPORTS = "imports"
CALLS = "calls"
INHERITS = "inherits"
REFERENCES = "references"
EDGE_KINDS = (CONTAINS, IMPORTS, CALLS, INHERITS, REFERENCES)


@dataclass(frozen=True)
class RawRef:
    """A use of a name inside ``source``, as written (after local type substitution), not yet resolved.

    Python names are dotted (``self.render``, ``widgets.Button``, ``super.__init__``); other
    languages give the bare identifier plus an optional qualifier (``this``, ``self``, a type name).
    """

    source: str  # id of the innermost symbol the use is in
    kind: str  # calls | inherits | references
    name: str


@dataclass(frozen=True)
class ParsedFile:
    path: str
    module: str  # the file's module id
    language: str
    symbols: tuple[Symbol, ...] = ()
    cards: tuple[SymbolCard, ...] = ()
    refs: tuple[RawRef, ...] = ()
    imports: tuple[str, ...] = ()  # imported module names (absolute for Python; paths/specifiers otherwise)
    bindings: tuple[tuple[str, str], ...] = ()  # local name -> absolute dotted target (Python imports)
    star_imports: tuple[str, ...] = ()  # modules imported with ``from m import *``
    attr_types: tuple[tuple[str, str, str], ...] = ()  # (class id, attribute, type name as written)
    is_package: bool = False  # pkg/__init__.py
    error: str = ""  # why the file could not be parsed (then symbols are empty) or what was wrong (partial)
    partial: bool = False  # syntax errors, but the definitions outside them were kept


def dump_parse(parsed: ParsedFile) -> str:
    """The resolution inputs of a parsed file (everything but the cards) as compact JSON."""
    return json.dumps(
        [
            parsed.module,
            [_symbol_row(s) for s in parsed.symbols],
            [[r.source, r.kind, r.name] for r in parsed.refs],
            list(parsed.imports),
            [list(b) for b in parsed.bindings],
            list(parsed.star_imports),
            [list(a) for a in parsed.attr_types],
            parsed.is_package,
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def load_parse(path: str, language: str, blob: str, error: str = "", partial: bool = False) -> ParsedFile:
    module, symbols, refs, imports, bindings, stars, attrs, is_package = json.loads(blob)
    return ParsedFile(
        path=path,
        module=module,
        language=language,
        symbols=tuple(_symbol_from_row(r, path, language) for r in symbols),
        refs=tuple(RawRef(*r) for r in refs),
        imports=tuple(imports),
        bindings=tuple((a, b) for a, b in bindings),
        star_imports=tuple(stars),
        attr_types=tuple((a, b, c) for a, b, c in attrs),
        is_package=is_package,
        error=error,
        partial=partial,
    )


def _symbol_row(s: Symbol) -> list:
    return [s.id, s.kind, s.name, s.module, s.line, s.end_line, s.signature, s.doc, list(s.decorators), s.parent]


def _symbol_from_row(row: list, path: str, language: str) -> Symbol:
    sid, kind, name, module, line, end_line, signature, doc, decorators, parent = row
    return Symbol(sid, kind, name, module, path, line, end_line, language, signature, doc, tuple(decorators), parent)
