"""Symbol records shared by the code graph, the cards and retrieval."""
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
        h = hashlib.sha256()
        for part in (self.symbol_id, self.kind, self.path, str(self.line), str(self.end_line), self.signature,
                     self.doc, self.snippet, "|".join(self.decorators), self.excerpt):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        return h.hexdigest()[:20]

    def render(self, with_excerpt: bool = False) -> str:
        """The card text given to the model."""
        lines = [f"# {self.symbol_id} ({self.kind}) — {self.path}:{self.line}-{self.end_line}"]
        if self.decorators:
            lines.append("decorators: " + ", ".join(self.decorators))
        if self.signature:
            lines.append(self.signature)
        if self.doc:
            lines.append('"""' + self.doc + '"""')
        body = self.excerpt if (with_excerpt and self.excerpt) else self.snippet
        if body:
            lines.append(body)
        if self.redacted:
            lines.append("[secrets redacted]")
        return "\n".join(lines)
