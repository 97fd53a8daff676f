"""The shape of the house, checked on the source: layers, no cycles, a thin UI, one owner of connections.

An ast walk over ``ctxbench/`` reads every import, function-local ones included (a lazy import is still
a dependency). ``from pkg import sub`` is an import of ``pkg.sub``; ``from pkg import name`` of ``pkg``.
"""
from __future__ import annotations

import ast
import collections
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[3] / "ctxbench"

# The layer order, bottom up, written once. A module may import from its own package and from packages of
# lower layers; packages that share a layer do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("records",),
    ("tokens", "heap", "redaction", "validation"),
    ("config",),
    ("store",),
    ("codegraph", "transcripts"),
    ("retrieval",),
    ("planner",),
    ("compaction",),
    ("llm",),
    ("service",),
    ("tui", "proxy", "mcp_server", "web"),  # front ends over service/ (they do not import each other)
    ("bench",),
    ("cli",),
    ("__main__",),
)
TUI_MAY_IMPORT = ("tui", "service", "records", "config")
# the planner is pure: plan inputs in, a ContextPlan out; it reads no store, index, model or retrieval
PLANNER_MAY_IMPORT = ("planner", "records", "tokens", "config")
MAX_TUI_FILE_LINES = 300
MAX_RETRIEVAL_FILE_LINES = 400  # small modules named after what they hold
# no module anywhere under ctxbench/ past this (the house aims at ~400; every module is under 600 today, so a
# module that grows past it is split by what it holds rather than let grow)
MAX_MODULE_LINES = 600
# the engine below the llm layer takes the config sections it reads (RetrievalConfig, PlannerConfig...), never the
# whole Config: the service layer hands each its own
ENGINE_PACKAGES = ("records", "tokens", "heap", "redaction", "validation", "store", "codegraph", "transcripts",
                   "retrieval", "planner", "compaction")
WHOLE_CONFIG_STILL: dict[tuple[str, str], str] = {}  # (file, function) still accepting the whole Config, with why
# the workbench is the unit of work and the repositories; plans go through service.planning
WORKBENCH_MAY_NOT_IMPORT = ("planner", "retrieval")
MAX_WORKBENCH_LINES = 300
MAX_PORT_PARAMETERS = 3  # a port method that needs more takes a record (a PlanRequest)
# an item id or pin target taken apart by hand instead of with records.item_refs.ItemRef.parse
_ID_KINDS = "card|group|atom|capsule|summary|pin|path|tool|memo|text|file|system"
HAND_SLICED_ID = re.compile(r'\b(item_id|\w+\.id|\w+\.target)(\.(split|rsplit|partition)\(":"|\[\d+:\]'
                            r'|\.removeprefix\("(' + _ID_KINDS + r'):"\))|\[len\("(' + _ID_KINDS + r'):"\):\]')


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _imports(module: str, source: str, is_package: bool = False) -> set[str]:
    """The ctxbench modules ``module`` (whose text is ``source``) imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            submodules = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in MODULES]
            targets = submodules if len(submodules) == len(node.names) else [*submodules, source]
        for target in targets:
            if target.split(".")[0] != "ctxbench":
                continue
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != module:
                found.add(target)
    return found


EDGES = {module: _imports(module, path.read_text(encoding="utf-8"), path.name == "__init__.py")
         for module, path in MODULES.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(package: str) -> int:
    for n, names in enumerate(LAYERS):
        if package in names:
            return n
    raise AssertionError(f"package {package!r} is in no layer: add it to LAYERS")


def test_every_package_has_a_layer():
    packages = {_package(m) for m in MODULES} - {""}
    assert all(_layer(p) >= 0 for p in packages)


def test_no_module_imports_from_a_package_above_it_or_beside_it():
    wrong = []
    for module, targets in EDGES.items():
        mine = _package(module)
        if not mine:
            continue
        for target in targets:
            theirs = _package(target)
            if theirs and theirs != mine and _layer(theirs) >= _layer(mine):
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_no_import_cycles_between_modules():
    graph = nx.DiGraph([(a, b) for a, targets in EDGES.items() for b in targets])
    assert list(nx.simple_cycles(graph)) == []


def test_the_tui_imports_only_the_service_the_records_the_config_and_itself():
    wrong = [f"{m} -> {t}" for m, targets in EDGES.items() if _package(m) == "tui"
             for t in targets if _package(t) not in TUI_MAY_IMPORT]
    assert wrong == []


def test_the_planner_imports_only_the_records_the_tokenizer_and_the_config():
    wrong = [f"{m} -> {t}" for m, targets in EDGES.items() if _package(m) == "planner"
             for t in targets if _package(t) not in PLANNER_MAY_IMPORT]
    assert wrong == []


def test_the_workbench_imports_nothing_from_the_planner_or_retrieval():
    wrong = sorted(t for t in EDGES["ctxbench.service.workbench"] if _package(t) in WORKBENCH_MAY_NOT_IMPORT)
    assert wrong == []


def test_the_workbench_is_at_most_300_lines():
    assert len((ROOT / "service" / "workbench.py").read_text(encoding="utf-8").splitlines()) <= MAX_WORKBENCH_LINES


def test_no_port_method_takes_more_than_three_parameters():
    tree = ast.parse((ROOT / "llm" / "ports.py").read_text(encoding="utf-8"))
    wide = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        if not any(isinstance(b, ast.Name) and b.id == "Protocol" for b in cls.bases):
            continue
        for fn in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            a = fn.args
            named = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg != "self"]
            spread = [x.arg for x in (a.vararg, a.kwarg) if x is not None]
            if len(named) + len(spread) > MAX_PORT_PARAMETERS:
                wide[f"{cls.name}.{fn.name}"] = named + spread
    assert wide == {}


def test_item_ids_are_taken_apart_only_by_item_refs():
    found: dict[str, int] = {}
    for path in ROOT.rglob("*.py"):
        name = str(path.relative_to(ROOT))
        if name == "records/item_refs.py":
            continue
        hits = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if HAND_SLICED_ID.search(line))
        if hits:
            found[name] = hits
    assert found == {}


def test_no_file_under_tui_is_over_300_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "tui").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_TUI_FILE_LINES}
    assert long == {}


def test_no_file_under_retrieval_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "retrieval").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_RETRIEVAL_FILE_LINES}
    assert long == {}


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_retrieval_module_imports_another_module_s_private_names():
    """A name another module needs is public where it is defined, and imported from there (no re-exports of
    private names kept for old import paths)."""
    private = {}
    for path in (ROOT / "retrieval").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ctxbench"):
                names = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if names:
                    private[str(path.relative_to(ROOT))] = names
    assert private == {}


def _whole_config_takers(tree: ast.AST) -> set[str]:
    """Functions of ``tree`` with a parameter annotated ``Config`` (the whole config) or that make a ``Config()``."""
    found = set()
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        a = fn.args
        annotated = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.annotation is not None]
        if any(re.search(r"\bConfig\b", ast.unparse(t)) for t in annotated) or any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "Config"
                for c in ast.walk(fn)):
            found.add(fn.name)
    return found


def test_engine_functions_take_their_config_sections_not_the_whole_config():
    taking = set()
    for package in ENGINE_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = str(path.relative_to(ROOT))
            taking |= {(name, fn) for fn in _whole_config_takers(ast.parse(path.read_text(encoding="utf-8")))}
    assert taking - set(WHOLE_CONFIG_STILL) == set()


def test_the_whole_config_check_sees_an_annotation_and_a_default():
    tree = ast.parse("def a(x, config: Config | None = None): ...\n"
                     "def b(x, config: RetrievalConfig): ...\n"
                     "class C:\n    def __init__(self, config=None):\n        self.config = config or Config()\n")
    assert _whole_config_takers(tree) == {"a", "__init__"}


def _opens_a_connection(node: ast.AST, store_connect: set[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "connect" and isinstance(func.value, ast.Name):
        return func.value.id in ("sqlite3", "db")
    return isinstance(func, ast.Name) and func.id in store_connect


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _package(m) != "store"))
def test_only_the_store_opens_database_connections(module):
    """Schema, migrations and connections belong to store/; everyone else borrows from a store.Database."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    store_connect = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                     and node.module == "ctxbench.store.db" for alias in node.names if alias.name == "connect"}
    assert not [node.lineno for node in ast.walk(tree) if _opens_a_connection(node, store_connect)]


def test_tables_are_created_only_in_the_store():
    creators = collections.Counter()
    for module, path in MODULES.items():
        if "CREATE TABLE" in path.read_text(encoding="utf-8") or "CREATE VIRTUAL TABLE" in path.read_text(
                encoding="utf-8"):
            creators[_package(module)] += 1
    assert set(creators) == {"store"}


def test_the_walk_sees_lazy_and_submodule_imports():
    """A function-local import (the kind that hid the old cycles) counts; ``from pkg import sub`` is ``pkg.sub``."""
    source = ("from ctxbench.planner import render\n"
              "def f():\n    from ctxbench.tui.app import CtxbenchApp\n")
    assert _imports("ctxbench.llm.probe", source) == {"ctxbench.planner.render", "ctxbench.tui.app"}
