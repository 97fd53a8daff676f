"""Extractive capsules (seed 002): a module's or a process's summary put together from the code's own words.

Offline and deterministic: the same index gives the same capsules, character for character.

- A **module capsule** opens with the module's docstring (its first sentence is the capsule's headline;
  without one, a sentence counting what it defines), then names its most central classes and functions
  with their signature and the first sentence of their docstring, then the modules it uses and the
  modules that use it (by the code graph's edges).
- A **process capsule** starts at an entry point the repository declares (a console script, a
  ``__main__`` module, a package.json ``bin``; ``codegraph.anchors``) and follows its calls breadth first
  (``[capsules] process_depth``, ``process_steps``), naming each step.

Each capsule covers the files it names with their content hash, so the index can mark it stale when one
of them changes. Confidence: ``extractive_base_confidence`` + ``module_doc_confidence`` when the module (or
the entry point) has a docstring + ``documented_confidence`` × the share of the named symbols that have one,
at most ``extractive_max_confidence``: a capsule of undocumented code is mostly names.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

from ctxbench.codegraph.anchors import Anchor, find_anchors
from ctxbench.config import CapsuleConfig
from ctxbench.codegraph.cards import clip
from ctxbench.records.capsules import MODULE, PROCESS, SOURCE_EXTRACTIVE, Capsule, first_sentence
from ctxbench.records.code import CALLS, CONTAINS, Symbol

NO_DOC = "No docstring."  # how the text of a capsule of undocumented code opens (its headline says nothing)
MEMBER_KINDS = ("class", "function", "interface", "struct", "trait", "type", "enum", "const")
ANCHOR_WORDS = {"script": "console script", "main": "module run with python -m", "bin": "command"}
def _plural(n: int, kind: str) -> str:
    if n == 1:
        return f"1 {kind}"
    return f"{n} {kind}es" if kind.endswith("s") else f"{n} {kind}s"


def _module_of(symbols: Mapping[str, Symbol], sid: str) -> str:
    sym = symbols.get(sid)
    return sym.module if sym is not None else ""


def _step_line(sym: Symbol, config: CapsuleConfig) -> str:
    head = " ".join((sym.signature or sym.name).split())
    head = clip(head, config.doc_chars)
    doc = first_sentence(sym.doc, config.doc_chars)
    return f"{head} — {doc}" if doc else head


def _confidence(has_doc: bool, named: Sequence[Symbol], config: CapsuleConfig) -> float:
    documented = sum(1 for s in named if s.doc.strip()) / len(named) if named else 0.0
    value = (config.extractive_base_confidence + (config.module_doc_confidence if has_doc else 0.0)
             + config.documented_confidence * documented)
    return round(min(config.extractive_max_confidence, value), 3)


def module_capsule(repo: str, module: Symbol, symbols: Mapping[str, Symbol], graph, scores: Mapping[str, float],
                   shas: Mapping[str, str], config: CapsuleConfig, generated_at: str) -> Capsule | None:
    """The extractive capsule of ``module``; None when there is nothing to say (no docstring, no members)."""
    members = [s for s in symbols.values() if s.module == module.id and s.id != module.id and s.kind in MEMBER_KINDS
               and s.parent == module.id]
    if not members and not module.doc.strip():
        return None
    public = [s for s in members if not s.name.startswith("_")] or members
    named = sorted(public, key=lambda s: (-scores.get(s.id, 0.0), s.line, s.id))[: max(0, config.max_symbols)]
    named.sort(key=lambda s: (s.line, s.id))
    doc = " ".join(module.doc.split())
    counts = Counter(s.kind for s in members)
    defines = ", ".join(_plural(n, kind) for kind, n in sorted(counts.items()))
    if doc:  # the capsule's title names the module: the text opens with what it is for
        opening = first_sentence(doc, config.text_max_chars)
        rest = doc[len(opening):].strip() if doc.startswith(opening) else ""
        parts = [opening + (f" {clip(rest, config.doc_chars * 2)}" if rest else "")]
    else:
        parts = [f"{NO_DOC} {module.path} defines {defines or 'no symbols'}."]
    if named:
        lines = [f"- {_step_line(s, config)}" for s in named]
        if len(public) > len(named):
            lines.append(f"- … and {len(public) - len(named)} more")
        parts.append("Defines:\n" + "\n".join(lines))
    uses, used_by = _neighbour_modules(module.id, symbols, graph)
    if uses[: config.neighbour_modules]:
        parts.append("Uses: " + ", ".join(uses[: config.neighbour_modules]) + ".")
    if used_by[: config.neighbour_modules]:
        parts.append("Used by: " + ", ".join(used_by[: config.neighbour_modules]) + ".")
    text = clip("\n".join(parts), config.text_max_chars)
    sha = shas.get(module.path, "")
    return Capsule(id=0, repo=repo, kind=MODULE, subject=module.id, title=f"module {module.id}", text=text,
                   source=SOURCE_EXTRACTIVE, confidence=_confidence(bool(doc), named, config),
                   generated_at=generated_at, files=((module.path, sha),))


def _neighbour_modules(module_id: str, symbols: Mapping[str, Symbol], graph) -> tuple[list[str], list[str]]:
    """(modules this one uses, modules that use it), most edges first, by the code graph."""
    uses: Counter[str] = Counter()
    used_by: Counter[str] = Counter()
    inside = [sid for sid, s in symbols.items() if s.module == module_id]
    for sid in inside:
        if sid not in graph:
            continue
        for _, dst, data in graph.out_edges(sid, data=True):
            other = _module_of(symbols, dst)
            if other and other != module_id and set(data.get("kinds", ())) - {CONTAINS}:
                uses[other] += 1
        for src, _, data in graph.in_edges(sid, data=True):
            other = _module_of(symbols, src)
            if other and other != module_id and set(data.get("kinds", ())) - {CONTAINS}:
                used_by[other] += 1
    order = lambda c: [m for m, _ in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))]  # noqa: E731
    return order(uses), order(used_by)


def process_capsule(repo: str, anchor: Anchor, symbols: Mapping[str, Symbol], graph, shas: Mapping[str, str],
                    config: CapsuleConfig, generated_at: str) -> Capsule | None:
    """The extractive capsule of the process an entry point starts: its calls, breadth first."""
    start = symbols.get(anchor.symbol)
    if start is None:
        return None
    steps: list[Symbol] = [start]
    seen = {start.id}
    frontier = [start.id]
    for _ in range(max(0, config.process_depth)):
        following: list[str] = []
        for sid in frontier:
            sources = [sid]
            if symbols[sid].kind == "module":  # module-level code: what its functions call too
                sources += [m for m in sorted(symbols) if symbols[m].parent == sid]
            for src in sources:
                if src not in graph:
                    continue
                for dst in sorted(graph.successors(src)):
                    if CALLS not in graph.edges[src, dst].get("kinds", ()) or dst in seen or dst not in symbols:
                        continue
                    seen.add(dst)
                    following.append(dst)
        for sid in following:
            if len(steps) < max(1, config.process_steps):
                steps.append(symbols[sid])
        frontier = following
        if len(steps) >= config.process_steps or not frontier:
            break
    kind_words = ANCHOR_WORDS.get(anchor.kind, anchor.kind)
    label = anchor.label
    doc = first_sentence(start.doc, config.doc_chars)
    where = f"Starts at {start.id} ({kind_words} `{label}`)"
    parts = [doc, f"{where}."] if doc else [f"{NO_DOC} {where}."]
    if len(steps) > 1:
        parts.append("Calls, breadth first:\n" + "\n".join(
            f"- {s.id} — {first_sentence(s.doc, config.doc_chars)}" if s.doc.strip() else f"- {s.id}"
            for s in steps[1:]))
    else:
        parts.append("The index finds no calls from it.")
    text = clip("\n".join(parts), config.text_max_chars)
    paths = sorted({s.path for s in steps})
    return Capsule(id=0, repo=repo, kind=PROCESS, subject=start.id, title=f"process `{label}` ({kind_words})",
                   text=text, source=SOURCE_EXTRACTIVE,
                   confidence=_confidence(bool(start.doc.strip()), steps[1:], config), generated_at=generated_at,
                   files=tuple((p, shas.get(p, "")) for p in paths))


def extractive_capsules(index, shas: Mapping[str, str], config: CapsuleConfig, generated_at: str,
                        subjects: set[str] | None = None) -> list[Capsule]:
    """The extractive capsules of a loaded ``CodeIndex``: every module with something to say, every process an
    entry point starts (``subjects``: only those subjects). ``shas``: path -> content hash as indexed."""
    repo = index.root
    symbols = index.symbols
    out: list[Capsule] = []
    for sid in sorted(symbols):
        sym = symbols[sid]
        if sym.kind != "module" or sym.id != sym.module or (subjects is not None and sid not in subjects):
            continue
        capsule = module_capsule(repo, sym, symbols, index.graph, index.centrality, shas, config, generated_at)
        if capsule is not None:
            out.append(capsule)
    anchors = find_anchors(Path(repo), symbols, index.graph, index.centrality, index.config.scaffold_anchors)
    for anchor in anchors:
        if anchor.kind == "api" or (subjects is not None and anchor.symbol not in subjects):
            continue
        capsule = process_capsule(repo, anchor, symbols, index.graph, shas, config, generated_at)
        if capsule is not None:
            out.append(capsule)
    return out


def anchor_notes(capsules: Sequence[Capsule], headline_chars: int) -> dict[str, str]:
    """Subject (a module id, an entry point's symbol id) -> the headline of its fresh capsule, for the scaffold's
    anchors. Process capsules win over module capsules of the same subject; capsules of undocumented code (their
    headline says nothing) and stale capsules (the scaffold is orientation the model takes on trust) are left out."""
    notes: dict[str, str] = {}
    for capsule in sorted(capsules, key=lambda c: (c.kind != PROCESS, c.subject)):
        if capsule.stale or capsule.text.startswith(NO_DOC):
            continue
        notes.setdefault(capsule.subject, capsule.headline(headline_chars))
    return notes
