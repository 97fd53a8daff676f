"""Code records: symbols, cards, and what parsing one file yields (before references are resolved).

Parsers (``codegraph.python_ast``, ``codegraph.treesitter``) return a ``ParsedFile``; the index stores it per
file (``store.index_tables``) so an unchanged file is never parsed again, and ``codegraph.resolve`` turns the
references of all files into edges of the code graph."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Symbol:
    """A definition found in a source file."""

    id: str  # Python: dotted module path relative to the indexed root + qualname (pkg.mod.Class.method)
    kind: str  # module | class | function | method | interface | struct | enum | trait | type | const
    name: str
    module: str  # module path (pkg.mod) or, for other languages, the file's module-ish path
    path: str  # file path relative to the indexed root, POSIX separators
    line: int  # 1-based first line
    end_line: int
    language: str  # python | javascript | typescript | go | rust | java
    signature: str = ""
    doc: str = ""
    decorators: tuple[str, ...] = ()  # decorators / cfg attributes / annotations
    parent: str = ""  # containing symbol id


@dataclass(frozen=True)
class SymbolCard:
    """What the model sees of a symbol: thin by default, with an excerpt in Heavy mode."""

    symbol_id: str
    kind: str
    module: str
    path: str
    line: int
    end_line: int
    signature: str
    doc: str  # first paragraph of the doc comment
    snippet: str  # <= 5 lines
    decorators: tuple[str, ...] = ()
    excerpt: str = ""  # <= 30 lines, used in Heavy mode
    redacted: bool = False  # a secret pattern matched and was masked
    language: str = "python"

    @cached_property
    def card_hash(self) -> str:  # computed once per card (frozen dataclass: cached in the instance dict)
        # each part then a NUL, hashed in one piece (the same bytes as a part and a NUL at a time)
        text = "\x00".join((self.symbol_id, self.kind, self.path, str(self.line), str(self.end_line), self.signature,
                            self.doc, self.snippet, "|".join(self.decorators), self.excerpt, ""))
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]

    def head(self) -> str:
        """The card without its body: the title line, decorators, signature and doc."""
        lines = [f"# {self.symbol_id} ({self.kind}) — {self.path}:{self.line}-{self.end_line}"]
        if self.decorators:
            lines.append("decorators: " + ", ".join(self.decorators))
        if self.signature:
            lines.append(self.signature)
        if self.doc:
            lines.append('"""' + self.doc + '"""')
        return "\n".join(lines)

    def render(self, with_excerpt: bool = False) -> str:
        """The card text given to the model."""
        lines = [self.head()]
        body = self.excerpt if (with_excerpt and self.excerpt) else self.snippet
        if body:
            lines.append(body)
        if self.redacted:
            lines.append("[secrets redacted]")
        return "\n".join(lines)


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
