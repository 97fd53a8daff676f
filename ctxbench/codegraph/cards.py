"""Symbol cards: what the model sees of a symbol.

A card holds the symbol's signature, the first paragraph of its doc comment, a snippet of at
most ``IndexConfig.snippet_lines`` lines of its body (after the doc comment) and an excerpt of
at most ``IndexConfig.excerpt_lines`` lines from its first line (Heavy mode). Cards are built
from the masked source (see ``secrets``), and a card whose lines held a secret says so.
"""
from __future__ import annotations

from typing import Sequence

from ctxbench.records.code import Symbol, SymbolCard
from ctxbench.config import IndexConfig


def first_paragraph(doc: str, max_chars: int) -> str:
    """The first paragraph of a doc comment, on one line, cut to ``max_chars``."""
    if not doc:
        return ""
    para: list[str] = []
    for line in doc.strip().splitlines():
        line = line.strip()
        if not line:
            if para:
                break
            continue
        para.append(line)
    text = " ".join(para)
    return clip(text, max_chars)


def clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max(0, max_chars - 1)].rstrip() + "…"


def dedent_lines(lines: Sequence[str], max_line_chars: int) -> str:
    """Join lines with their common indentation removed, blank ends dropped, long lines clipped."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    if start >= end:
        return ""
    kept = lines[start:end]
    # the first and last kept lines are not blank: there is a narrowest indentation
    indent = min([len(ln) - len(stripped) for ln in kept if (stripped := ln.lstrip())])
    out = [ln[indent:].rstrip() for ln in kept]
    if max(map(len, out)) > max_line_chars:
        out = [clip(ln, max_line_chars) if len(ln) > max_line_chars else ln for ln in out]
    return "\n".join(out)


def build_card(
    symbol: Symbol,
    lines: Sequence[str],
    body_line: int,
    masked_lines: frozenset[int],
    config: IndexConfig,
    *,
    head_line: int = 0,
    snippet: str | None = None,
    excerpt_from: int = 0,
) -> SymbolCard:
    """Build the card of ``symbol`` from the (masked) source ``lines``.

    ``body_line`` is the first line after the signature and doc comment (1-based); ``head_line``
    the first line of the definition including decorators / attributes; ``snippet`` overrides the
    body snippet (module cards list their definitions instead); ``excerpt_from`` the excerpt's
    first line (default: the symbol's line).
    """
    end = min(symbol.end_line, len(lines))
    max_chars = config.card_line_max_chars
    if snippet is None:
        start = body_line if body_line <= end else symbol.line
        snippet_end = min(end, start - 1 + config.snippet_lines)
        snippet = dedent_lines(lines[start - 1: snippet_end], max_chars)
    else:
        snippet_end = 0
    first = excerpt_from or symbol.line
    excerpt_end = min(end, first - 1 + config.excerpt_lines)
    excerpt = dedent_lines(lines[first - 1: excerpt_end], max_chars)
    redacted = False
    if masked_lines:
        lo = head_line or symbol.line
        hi = max(excerpt_end, snippet_end, body_line)
        redacted = any(lo <= n <= hi for n in masked_lines)
    return SymbolCard(
        symbol_id=symbol.id,
        kind=symbol.kind,
        module=symbol.module,
        path=symbol.path,
        line=symbol.line,
        end_line=symbol.end_line,
        signature=symbol.signature,
        doc=symbol.doc,
        snippet=snippet,
        decorators=symbol.decorators,
        excerpt=excerpt,
        redacted=redacted,
        language=symbol.language,
    )


def module_summary(children: Sequence[Symbol], max_lines: int, max_chars: int) -> str:
    """A module card's snippet: its top-level definitions, grouped by kind, at most ``max_lines`` lines."""
    by_kind: dict[str, list[str]] = {}
    for sym in children:
        by_kind.setdefault(sym.kind, []).append(sym.name)
    out = []
    for kind, names in by_kind.items():
        if len(out) >= max_lines:
            break
        label = kind + ("es" if kind.endswith("s") else "s")
        out.append(clip(f"{label}: " + ", ".join(names), max_chars))
    return "\n".join(out)
