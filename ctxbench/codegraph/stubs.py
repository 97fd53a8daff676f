"""Type stubs (``.pyi``): the typed API of their module, merged with the runtime ``.py`` beside them.

Libraries whose runtime code takes ``**kwargs`` or is generated (attrs, for one) write their public,
typed signatures only in stubs. A stub and its runtime file are parsed apart (both name the same
module) and then merged, pair by pair:

- a symbol in both keeps the runtime file's path, lines, body and doc (the card's snippet) and takes
  the stub's signature (its doc when the runtime one has none);
- a symbol only in the stub (a re-export, a generated API) stays a symbol of its own at the stub's path;
- the stub's module symbol gives way to the runtime one. A stub without a runtime file is the module.

The merged results are what the index stores, so a change to either file parses both again.
"""
from __future__ import annotations

import dataclasses

from ctxbench.records.code import ParsedFile

STUB_SUFFIX = ".pyi"
RUNTIME_SUFFIX = ".py"


def stub_partner(path: str) -> str:
    """The other half of a stub pair: ``m.pyi`` -> ``m.py`` and back; '' for any other file."""
    if path.endswith(STUB_SUFFIX):
        return path[: -len(STUB_SUFFIX)] + RUNTIME_SUFFIX
    if path.endswith(RUNTIME_SUFFIX):
        return path[: -len(RUNTIME_SUFFIX)] + STUB_SUFFIX
    return ""


def is_stub(path: str) -> bool:
    return path.endswith(STUB_SUFFIX)


def merge_stub(runtime: ParsedFile, stub: ParsedFile) -> tuple[ParsedFile, ParsedFile]:
    """The runtime file typed by its stub, and the stub left with the symbols only it has."""
    if not runtime.symbols or not stub.symbols:
        return runtime, stub  # one side failed to parse (or is blank): nothing to merge
    typed = {s.id: s for s in stub.symbols if s.kind != "module"}
    runtime_ids = {s.id for s in runtime.symbols}
    symbols = []
    merged: set[str] = set()
    for sym in runtime.symbols:
        hint = typed.get(sym.id)
        if hint is None or not hint.signature:
            symbols.append(sym)
            continue
        symbols.append(dataclasses.replace(sym, signature=hint.signature, doc=sym.doc or hint.doc))
        merged.add(sym.id)
    by_id = {s.id: s for s in symbols}
    cards = tuple(
        dataclasses.replace(c, signature=by_id[c.symbol_id].signature, doc=by_id[c.symbol_id].doc)
        if c.symbol_id in merged else c
        for c in runtime.cards
    )
    # the stub's annotations reference types: they count as the runtime symbol's references
    own_refs = set(runtime.refs)
    moved = tuple(r for r in stub.refs if r.source in runtime_ids and r not in own_refs)
    kept = tuple(s for s in stub.symbols if s.id not in runtime_ids)
    kept_ids = {s.id for s in kept}
    return (
        dataclasses.replace(runtime, symbols=tuple(symbols), cards=cards, refs=runtime.refs + moved),
        dataclasses.replace(stub, symbols=kept, cards=tuple(c for c in stub.cards if c.symbol_id in kept_ids),
                            refs=tuple(r for r in stub.refs if r.source in kept_ids)),
    )


def merge_stub_pairs(parsed: dict[str, ParsedFile]) -> dict[str, ParsedFile]:
    """``merge_stub`` over every ``.py``/``.pyi`` pair among ``parsed`` (path -> parse); other files as they are."""
    out = dict(parsed)
    for path, stub in parsed.items():
        if not is_stub(path):
            continue
        runtime = parsed.get(stub_partner(path))
        if runtime is not None and runtime.language == stub.language == "python":
            out[runtime.path], out[path] = merge_stub(runtime, stub)
    return out
