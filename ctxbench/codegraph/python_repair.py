"""A Python file with a syntax error keeps the symbols outside it: tree-sitter's error-tolerant parse finds
the broken statements, they are blanked out (their lines stay, empty, so every line number holds), and
the rest parses with ``ast`` as usual.

Statements are blanked at the finest level that makes the file parse: first only the broken members of
a class body (the class keeps its other methods; a body left empty gets a ``pass``), then whole broken
top-level statements. The tree-sitter-python grammar ships as a package; nothing is downloaded.
"""
from __future__ import annotations

import ast
import threading
from typing import Any

_PARSERS = threading.local()  # tree-sitter parsers are not thread-safe: one per thread
_BODY_HOLDERS = frozenset({"class_definition", "decorated_definition"})


def _parser() -> Any:
    parser = getattr(_PARSERS, "python", None)
    if parser is None:
        import tree_sitter
        import tree_sitter_python

        parser = _PARSERS.python = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    return parser


def _broken(node: Any) -> bool:
    return node.type == "ERROR" or node.has_error or node.is_missing


def _class_body(node: Any) -> Any:
    """The block of a class definition (or of a decorated one), or None."""
    if node.type == "decorated_definition":
        node = node.child_by_field_name("definition")
        if node is None:
            return None
    if node.type != "class_definition":
        return None
    return node.child_by_field_name("body")


def _blank(lines: list[str], start_row: int, end_row: int) -> None:
    for row in range(start_row, min(end_row, len(lines) - 1) + 1):
        lines[row] = ""


def _rows(node: Any) -> tuple[int, int]:
    (start, _), (end, col) = node.start_point, node.end_point
    return start, (end - 1 if col == 0 and end > start else end)


def _attempts(source: str, root: Any) -> list[str]:
    fine = source.split("\n")
    coarse = source.split("\n")
    for child in root.children:
        if not _broken(child):
            continue
        start, end = _rows(child)
        _blank(coarse, start, end)
        body = _class_body(child) if child.type in _BODY_HOLDERS else None
        header_ok = body is not None and not any(_broken(c) for c in child.children if c.id != body.id) \
            and not (child.type == "decorated_definition"
                     and any(_broken(c) for c in child.child_by_field_name("definition").children
                             if c.id != body.id))
        if not header_ok:
            _blank(fine, start, end)
            continue
        members = [m for m in body.children if m.type not in ("comment",)]
        kept = [m for m in members if not _broken(m)]
        for member in members:
            if _broken(member):
                m_start, m_end = _rows(member)
                _blank(fine, m_start, m_end)
        if not kept:  # the class keeps its name; its body is a pass at the first blanked line
            row, col = body.start_point
            fine[row] = " " * col + "pass"
    return ["\n".join(fine), "\n".join(coarse)]


def repair(source: str) -> str | None:
    """``source`` with its broken statements blanked so it parses, or None when it cannot be saved."""
    try:
        tree = _parser().parse(source.encode("utf-8", "surrogatepass"))
    except Exception:  # a grammar failure: nothing to save
        return None
    root = tree.root_node
    if not root.has_error:
        return None
    for candidate in _attempts(source, root):
        if candidate.strip() == "":
            continue
        try:
            ast.parse(candidate)
        except (SyntaxError, ValueError, RecursionError):
            continue
        return candidate
    return None
