"""The orientation scaffold: a navigation note, a module map folded to fit its budget, central symbols.

The map lists one folder per line with its files. Over budget, the deepest folders fold first
into ``name/ (N files)``, then long file lists keep only their most central files
(``… +N more``), then the top-level folders fold, then folders are cut from the end. The
result always fits ``budget_tokens`` as counted by the given tokenizer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import networkx as nx

from ctxbench.codegraph.graph import pagerank, top_symbols
from ctxbench.records.code import Symbol
from ctxbench.config import IndexConfig

MAP_HEADER = "## Repository map"
CENTRAL_HEADER = "## Most central symbols"
ANCHORS_HEADER = "## Where to start"
ROOT_LABEL = "./"
INDENT = "  "
DOC_LINE_CHARS = 120  # doc text shown per central symbol
SIGNATURE_CHARS = 160


@dataclass
class _Dir:
    name: str
    depth: int
    files: list[tuple[str, float]] = field(default_factory=list)  # (file name, centrality)
    dirs: dict[str, "_Dir"] = field(default_factory=dict)
    folded: bool = False
    keep: int | None = None  # show only the ``keep`` most central files

    def count(self) -> int:
        return len(self.files) + sum(d.count() for d in self.dirs.values())

    def walk(self) -> list["_Dir"]:
        out = [self]
        for d in sorted(self.dirs.values(), key=lambda d: d.name):
            out.extend(d.walk())
        return out


def _tree(symbols: Mapping[str, Symbol], scores: Mapping[str, float]) -> _Dir:
    root = _Dir(ROOT_LABEL, 0)
    for sym in symbols.values():
        if sym.kind != "module" or sym.id != sym.module:
            continue
        parts = sym.path.split("/")
        node = root
        for depth, part in enumerate(parts[:-1], start=1):
            node = node.dirs.setdefault(part, _Dir(part + "/", depth))
        node.files.append((parts[-1], scores.get(sym.id, 0.0)))
    return root


def _render_dir(d: _Dir) -> list[str]:
    indent = INDENT * max(0, d.depth - 1) if d.name != ROOT_LABEL else ""
    if d.folded:
        return [f"{indent}{d.name} ({d.count()} files)"]
    lines: list[str] = []
    if d.files or d.name == ROOT_LABEL:
        names = sorted(d.files, key=lambda f: f[0])
        if d.keep is not None and d.keep < len(names):
            top = sorted(d.files, key=lambda f: (-f[1], f[0]))[: d.keep]
            shown = ", ".join(n for n, _ in top)
            more = len(names) - d.keep
            listing = f"{shown}{', ' if shown else ''}… +{more} more"
        else:
            listing = ", ".join(n for n, _ in names)
        if d.name == ROOT_LABEL:
            if names:
                lines.append(f"{ROOT_LABEL} {listing}")
        else:
            lines.append(f"{indent}{d.name} {listing}")
    elif d.name != ROOT_LABEL:
        lines.append(f"{indent}{d.name}")
    for sub in sorted(d.dirs.values(), key=lambda s: s.name):
        lines.extend(_render_dir(sub))
    return lines


def _fit_tree(root: _Dir, budget: int, count: Any) -> list[str]:
    """Fold the tree until its lines fit ``budget`` tokens; [] when even the header cannot fit."""

    def cost(lines: list[str]) -> int:
        return count("\n".join([MAP_HEADER, *lines]))

    lines = _render_dir(root)
    if cost(lines) <= budget:
        return lines
    # 1. fold the deepest folders first, biggest first
    candidates = [d for d in root.walk() if d.depth >= 2]
    candidates.sort(key=lambda d: (-d.depth, -d.count(), d.name))
    for d in candidates:
        if d.folded:
            continue
        d.folded = True
        lines = _render_dir(root)
        if cost(lines) <= budget:
            return lines
    # 2. shorten long file lists, keeping the most central files (the largest count that fits)
    listed = [d for d in root.walk() if not d.folded and d.files and not _inside_folded(root, d)]
    longest = max((len(d.files) for d in listed), default=0)

    def with_keep(keep: int) -> list[str]:
        for d in listed:
            d.keep = keep if len(d.files) > keep else None
        return _render_dir(root)

    lo, hi = 0, longest - 1
    best: int | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        if cost(with_keep(mid)) <= budget:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    lines = with_keep(best if best is not None else 0)
    if best is not None:
        return lines
    # 3. fold the top-level folders
    for d in sorted(root.dirs.values(), key=lambda d: (-d.count(), d.name)):
        d.folded = True
        lines = _render_dir(root)
        if cost(lines) <= budget:
            return lines
    # 4. cut folders from the end
    while lines:
        cut = len(lines) - 1
        trial = lines[:cut] + [f"… +{len(lines) - cut} more folders"]
        if cost(trial) <= budget:
            return trial
        lines = lines[:cut]
    return []


def _inside_folded(root: _Dir, target: _Dir) -> bool:
    def visit(d: _Dir, folded_above: bool) -> bool | None:
        if d is target:
            return folded_above
        for sub in d.dirs.values():
            found = visit(sub, folded_above or d.folded)
            if found is not None:
                return found
        return None

    return bool(visit(root, False))


def _central_lines(graph: nx.DiGraph, symbols: Mapping[str, Symbol], scores: Mapping[str, float],
                   n: int) -> list[str]:
    lines = []
    for sid in top_symbols(scores, graph, n):
        sym = symbols.get(sid)
        if sym is None:
            continue
        sig = " | ".join(sym.signature.splitlines())  # overloads list one signature a line: one line here
        sig = sig if len(sig) <= SIGNATURE_CHARS else sig[: SIGNATURE_CHARS - 1] + "…"
        line = f"- {sid} — {sig}" if sig else f"- {sid}"
        if sym.doc:
            doc = sym.doc if len(sym.doc) <= DOC_LINE_CHARS else sym.doc[: DOC_LINE_CHARS - 1] + "…"
            line += f" — {doc}"
        lines.append(line)
    return lines


def _truncate(text: str, budget: int, tokenizer: Any) -> str:
    if budget <= 0:
        return ""
    if tokenizer.count(text) <= budget:
        return text
    encode = getattr(tokenizer, "encode", None)
    decode = getattr(tokenizer, "decode", None)
    if encode is not None and decode is not None:
        cut = decode(encode(text)[: max(0, budget - 1)]).rstrip()
    else:
        cut = text[: max(0, budget * 3)]
    while cut and tokenizer.count(cut + "…") > budget:
        cut = cut[: int(len(cut) * 0.9)]
    return cut + "…" if cut else ""


def build_scaffold(graph: nx.DiGraph, symbols: Mapping[str, Symbol], budget_tokens: int, tokenizer: Any, *,
                   config: IndexConfig | None = None, scores: Mapping[str, float] | None = None,
                   anchors: Sequence[str] = ()) -> str:
    """The orientation scaffold text, at most ``budget_tokens`` tokens by ``tokenizer.count``.

    ``anchors``: lines naming where a reader starts (``codegraph.anchors``: entry points, public API); they
    come after the note and the central symbols, and give way (last first) before those do."""
    config = config or IndexConfig()
    if budget_tokens <= 0:
        return ""
    count = tokenizer.count
    if scores is None:
        scores = pagerank(graph, None, config)
    note = config.scaffold_note
    central = _central_lines(graph, symbols, scores, config.scaffold_central_symbols)
    starts = list(anchors)

    def head_of(central: list[str], starts: list[str]) -> str:
        parts = [note]
        if central:
            parts.append("\n".join([CENTRAL_HEADER, *central]))
        if starts:
            parts.append("\n".join([ANCHORS_HEADER, *starts]))
        return "\n\n".join(parts)

    head = head_of(central, starts)
    while starts and count(head) > budget_tokens:  # anchors give way first, the last first
        starts = starts[:-1]
        head = head_of(central, starts)
    while central and count(head) > budget_tokens:  # then the least central symbols
        central = central[:-1]
        head = head_of(central, starts)
    if count(head) > budget_tokens:
        return _truncate(note, budget_tokens, tokenizer)
    separator_cost = count("\n\n")
    tree_budget = budget_tokens - count(head) - separator_cost
    lines = _fit_tree(_tree(symbols, scores), tree_budget, count) if tree_budget > 0 else []

    def assemble(map_lines: list[str]) -> str:
        parts = [note]
        if starts:
            parts.append("\n".join([ANCHORS_HEADER, *starts]))
        if map_lines:
            parts.append("\n".join([MAP_HEADER, *map_lines]))
        if central:
            parts.append("\n".join([CENTRAL_HEADER, *central]))
        return "\n\n".join(parts)

    text = assemble(lines)
    while count(text) > budget_tokens and lines:  # token merges across lines: trim until it fits
        lines = lines[:-1]
        text = assemble(lines)
    return text
