"""Anchors of the orientation scaffold (seed 002, KG-aware scaffold): where a reader starts.

Entry points first — console scripts declared in ``pyproject.toml`` (``[project.scripts]``) or
``setup.cfg`` (``console_scripts``), ``__main__`` modules (``python -m pkg``), a ``package.json``'s
``bin`` and ``main`` — then the public API of the top package (the classes and functions its
``__init__`` imports, most central first). Each anchor names a symbol of the index; anchors whose
target the index does not have are left out. The scaffold adds them, after the navigation note and
before the module map, within its share (``IndexConfig.scaffold_anchors`` at most).
"""
from __future__ import annotations

import configparser
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import networkx as nx

from ctxbench.records.code import IMPORTS, REFERENCES, Symbol

API_KINDS = ("class", "function", "interface", "struct", "trait", "type", "enum")


@dataclass(frozen=True)
class Anchor:
    kind: str  # script | main | bin | api
    label: str  # what a reader types or imports: "flask", "python -m textual", "package main"
    symbol: str  # the symbol id it leads to


def declared_entry_points(root: Path) -> list[tuple[str, str, str]]:
    """(kind, label, target) of the entry points a repository declares: console scripts (target
    ``pkg.mod:func``) and package.json ``bin``/``main`` (target a file path)."""
    out: list[tuple[str, str, str]] = []
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            data = {}
        scripts = data.get("project", {}).get("scripts", {})
        poetry = data.get("tool", {}).get("poetry", {}).get("scripts", {})
        for name, target in sorted({**poetry, **scripts}.items()):
            if isinstance(target, str):
                out.append(("script", name, target))
    setup_cfg = root / "setup.cfg"
    if setup_cfg.is_file():
        parser = configparser.ConfigParser()
        try:
            parser.read(setup_cfg, encoding="utf-8")
            raw = parser.get("options.entry_points", "console_scripts", fallback="")
        except (configparser.Error, UnicodeDecodeError):
            raw = ""
        for line in raw.splitlines():
            name, sep, target = line.partition("=")
            if sep:
                out.append(("script", name.strip(), target.strip()))
    package = root / "package.json"
    if package.is_file():
        try:
            data = json.loads(package.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            data = {}
        if isinstance(data, dict):
            bins = data.get("bin")
            if isinstance(bins, str):
                bins = {str(data.get("name", "bin")): bins}
            for name, target in sorted((bins or {}).items()) if isinstance(bins, dict) else ():
                if isinstance(target, str):
                    out.append(("bin", str(name), target))
            if isinstance(data.get("main"), str):
                out.append(("main", f"package main ({data['main']})", data["main"]))
    return out


def find_anchors(root: Path, symbols: Mapping[str, Symbol], graph: nx.DiGraph, scores: Mapping[str, float],
                 limit: int) -> list[Anchor]:
    """At most ``limit`` anchors of the indexed repository at ``root`` (see the module doc)."""
    if limit <= 0:
        return []
    modules_by_path = {s.path: sid for sid, s in symbols.items() if s.kind == "module" and s.id == s.module}
    out: list[Anchor] = []
    seen: set[str] = set()

    def add(kind: str, label: str, symbol: str | None) -> None:
        if symbol and symbol in symbols and symbol not in seen and len(out) < limit:
            seen.add(symbol)
            out.append(Anchor(kind, label, symbol))

    for kind, label, target in declared_entry_points(root):
        if kind == "script":
            module, _, attr = target.partition(":")
            add(kind, label, _resolve(symbols, module.strip(), attr.split("[")[0].strip()))
        else:
            path = target.removeprefix("./")
            add(kind, label, modules_by_path.get(path) or modules_by_path.get(path + ".js"))
    for sid, sym in sorted(symbols.items()):
        if sym.kind == "module" and sym.path.endswith("__main__.py"):
            package = sid.rsplit(".", 1)[0] if "." in sid else sid
            add("main", f"python -m {package}", sid)
    for sid in _public_api(symbols, graph, scores):
        add("api", "public API", sid)
    return out


def _resolve(symbols: Mapping[str, Symbol], module: str, attr: str) -> str | None:
    """The symbol id of ``module:attr`` (also when the index names modules without the package prefix)."""
    wanted = f"{module}.{attr}" if attr else module
    if wanted in symbols:
        return wanted
    tails = [sid for sid in symbols if sid.endswith("." + wanted)]
    return tails[0] if len(tails) == 1 else None


def _public_api(symbols: Mapping[str, Symbol], graph: nx.DiGraph, scores: Mapping[str, float]) -> list[str]:
    """The classes and functions the top package's ``__init__`` (or a JS package's index) brings in, most
    central first."""
    tops = [sid for sid, s in symbols.items() if s.kind == "module" and s.id == s.module
            and s.path in ("__init__.py", "index.js", "index.ts", "src/index.ts", "src/index.js")]
    if not tops:
        roots = [sid for sid, s in symbols.items() if s.kind == "module" and s.path.count("/") == 1
                 and s.path.endswith("/__init__.py")]
        tops = roots if len(roots) == 1 else []
    found: dict[str, float] = {}
    for top in tops:
        if top not in graph:
            continue
        for _, target, data in graph.out_edges(top, data=True):
            kinds = set(data.get("kinds", ()))
            sym = symbols.get(target)
            if sym is None or not kinds & {IMPORTS, REFERENCES}:
                continue
            if sym.kind in API_KINDS:
                found[target] = scores.get(target, 0.0)
            elif sym.kind == "module":  # ``from .core import Command``: the module's public top-level names
                for _, member in graph.out_edges(target):
                    msym = symbols.get(member)
                    if (msym is not None and msym.kind in API_KINDS and msym.parent == target
                            and not msym.name.startswith("_")):
                        found[member] = scores.get(member, 0.0)
    return [sid for sid, _ in sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))]


def anchor_lines(anchors: list[Anchor], symbols: Mapping[str, Symbol], notes: Mapping[str, str] | None = None,
                 capsule_modules: Sequence[str] = ()) -> list[str]:
    """One line per anchor: what it is, then the symbol it leads to.

    ``notes``: subject -> the headline of its fresh capsule (``codegraph.capsules.anchor_notes``): an entry
    point's line ends with its process's (or its module's) headline. ``capsule_modules``: modules with a
    fresh capsule to list after the entry points and the public API, each with its headline (the seed's
    scaffold anchors populated from capsules); they come last, so they give way first."""
    notes = notes or {}
    lines = []
    api = [a for a in anchors if a.kind == "api"]

    def noted(line: str, symbol: str) -> str:
        sym = symbols.get(symbol)
        note = notes.get(symbol) or (notes.get(sym.module, "") if sym is not None else "")
        return f"{line} — {note}" if note else line

    for a in anchors:
        if a.kind == "script":
            lines.append(noted(f"- console script `{a.label}` → {a.symbol}", a.symbol))
        elif a.kind == "bin":
            lines.append(noted(f"- command `{a.label}` → {a.symbol}", a.symbol))
        elif a.kind == "main":
            lines.append(noted(f"- {a.label} → {a.symbol}", a.symbol))
    if api:
        lines.append("- public API: " + ", ".join(a.symbol for a in api))
    for module in capsule_modules:
        if notes.get(module):
            lines.append(f"- {module} — {notes[module]}")
    return lines
