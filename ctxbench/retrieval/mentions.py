"""Names and paths a turn's text mentions: what retrieval personalizes the code graph with.

``mentions(text)`` returns the file paths written in the text (``widgets/_button.py``) and the code
identifiers (``snake_case``, ``dotted.names``, ``CamelCase``, anything in backticks), each once. They are only strings: the retriever resolves them to the symbol ids
of its index (``Retriever.resolve_mentions``), so the same extraction serves any repository.
"""
from __future__ import annotations

import re

# a code identifier written in a question: snake_case, dotted, CamelCase, or in backticks
CODE_IDENT = re.compile(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)")
PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+|[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java))\b")
SOURCE_SUFFIXES = (".py", ".pyi", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java")


def looks_like_code(token: str) -> bool:
    """snake_case, dotted.path, CamelCase or Capitalized (a class name); not ALLCAPS words like CSS or HTTP."""
    if "_" in token or "." in token:
        return True
    return token[:1].isupper() and any(c.islower() for c in token[1:])


def code_identifiers(text: str) -> list[str]:
    """Identifiers written in ``text`` that look like code (backticked ones always), in order, no repeats."""
    out: dict[str, None] = {}
    for m in CODE_IDENT.finditer(text):
        token = (m.group(1) or m.group(2) or "").strip().strip("()").rstrip(".")
        if not token or not (m.group(1) or looks_like_code(token)):
            continue
        if token.endswith(SOURCE_SUFFIXES) and "/" not in token:
            continue  # a bare file name: a path, not an identifier
        out.setdefault(token, None)
    return list(out)


def paths(text: str) -> list[str]:
    """File paths written in ``text`` (with a folder, or a source file name), in order, no repeats."""
    out: dict[str, None] = {}
    for m in PATH.finditer(text):
        path = m.group(1).removeprefix("./").rstrip(".")
        if path:
            out.setdefault(path, None)
    return list(out)


def mentions(text: str) -> tuple[str, ...]:
    """File paths, then code identifiers, mentioned in ``text`` (each once)."""
    return tuple(dict.fromkeys([*paths(text), *code_identifiers(text)]))
