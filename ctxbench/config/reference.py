"""The configuration reference (``docs/config-reference.md``), generated from the config dataclasses themselves.

Every section of ``Config`` and every key of it: its type as declared, its default and its description, which is
the attribute docstring written under the field (read from the module's source with ``ast``: Python keeps no
attribute docstrings at run time). ``tests/unit/project/test_config_docs.py`` compares the file with what this module renders
and checks that every field has a docstring; regenerate it after changing a field::

    python -m ctxbench.config.reference --write
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import sys
import typing
from pathlib import Path

from ctxbench.config.root import Config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"
DEFAULT_MAX_CHARS = 70  # a longer default (a prompt, a list of patterns) is shown shortened; the source has it whole

HEADER = """# Configuration reference

Generated from the dataclasses in `ctxbench/config/` by `python -m ctxbench.config.reference --write`; a test
fails when this page and the code disagree. How the file is read and what the sections are for:
[Configuration](configuration.md).

Types: `PositiveInt` / `PositiveFloat` are above 0; `Share` is 0 to 1; `Tokens` is 1 to 100,000,000; `Port` is
1 to 65535; `Penalty` is -100 to 0; a number without a constraint must be finite and not negative.
`Annotated[T, Range(...)]` names its bounds (`ge` at least, `gt` above, `le` at most). A long default is shortened
here (`…`); the source holds it whole.
"""


@dataclasses.dataclass(frozen=True)
class Key:
    """One key of a section, as the page lists it."""

    name: str
    type: str
    default: str
    doc: str


@dataclasses.dataclass(frozen=True)
class Section:
    """One table of the config file (``[planner.fused]``), or an array of tables (``[[llm.prices]]``)."""

    title: str
    cls: type
    keys: tuple[Key, ...]


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstring of each field of dataclass ``cls`` (a string literal right after the field), by name;
    a field without one is absent."""
    tree = ast.parse(Path(inspect.getsourcefile(cls)).read_text(encoding="utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    docs: dict[str, str] = {}
    for stmt, after in zip(node.body, [*node.body[1:], None]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _is_dataclass_type(tp: object) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _element_dataclass(tp: object) -> type | None:
    """The dataclass ``T`` of a ``tuple[T, ...]`` field (a TOML array of tables), else None."""
    if typing.get_origin(tp) is tuple:
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if len(args) == 1 and _is_dataclass_type(args[0]):
            return args[0]
    return None


def _default(f: dataclasses.Field) -> str:
    """The default as the page shows it: a code span, shortened when long; a long list as its length."""
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    text = repr(value)
    if len(text) > DEFAULT_MAX_CHARS:
        if isinstance(value, tuple):
            return f"{len(value)} entries"
        text = text[:DEFAULT_MAX_CHARS - 1] + "…"
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _keys(cls: type) -> tuple[Key, ...]:
    docs = field_docs(cls)
    return tuple(Key(f.name, str(f.type), _default(f), docs.get(f.name, "")) for f in dataclasses.fields(cls)
                 if not _is_dataclass_type(typing.get_type_hints(cls)[f.name]))


def sections(cls: type = Config, prefix: str = "") -> list[Section]:
    """Every table under ``cls``, depth first in field order: a dataclass field is a table of its own
    (``[planner.fused]``), a tuple of dataclasses an array of tables (``[[planner.modes]]``)."""
    found: list[Section] = []
    hints = typing.get_type_hints(cls)
    if prefix:
        found.append(Section(f"[{prefix}]", cls, _keys(cls)))
    for f in dataclasses.fields(cls):
        name = f"{prefix}.{f.name}" if prefix else f.name
        tp = hints[f.name]
        if _is_dataclass_type(tp):
            found.extend(sections(tp, name))
        elif (element := _element_dataclass(tp)) is not None:
            found.append(Section(f"[[{name}]]", element, _keys(element)))
    return found


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    out = [HEADER]
    for section in sections():
        out.append(f"\n## `{section.title}`\n\n")
        intro = inspect.getdoc(section.cls) or ""
        if intro and not intro.startswith(f"{section.cls.__name__}("):  # not the dataclass' generated signature
            out.append(" ".join(intro.split("\n\n")[0].split()) + "\n\n")
        out.append("| key | type | default | description |\n|---|---|---|---|\n")
        for key in section.keys:
            out.append(f"| `{key.name}` | `{_cell(key.type)}` | {_cell(key.default)} | {_cell(key.doc)} |\n")
    return "".join(out)


def missing_docs() -> list[str]:
    """``Class.field`` of every field of every config dataclass that has no docstring."""
    classes = {Config} | {s.cls for s in sections()}
    return sorted(f"{c.__name__}.{f.name}" for c in classes for f in dataclasses.fields(c)
                  if f.name not in field_docs(c))


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxbench.config.reference", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {PAGE.name} (default: print it)")
    args = parser.parse_args(argv)
    page = render()
    if args.write:
        PAGE.write_text(page, encoding="utf-8")
        print(f"wrote {PAGE}")
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(run())
