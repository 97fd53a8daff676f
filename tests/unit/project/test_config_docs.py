"""The configuration reference is generated from the config dataclasses: every field documents itself, and the page
cannot drift from the code."""
from __future__ import annotations

import dataclasses
import importlib.util
import sys
import textwrap

from ctxbench.config import Config, reference


def test_the_configuration_reference_is_what_the_dataclasses_say():
    assert reference.PAGE.read_text(encoding="utf-8") == reference.render(), (
        "docs/config-reference.md is out of date: run python -m ctxbench.config.reference --write")


def test_every_field_of_every_config_dataclass_has_a_docstring():
    assert reference.missing_docs() == []


def test_the_reference_has_a_table_for_every_section_and_a_row_for_every_key():
    page = reference.PAGE.read_text(encoding="utf-8")
    missing = []
    for section in reference.sections():
        if f"## `{section.title}`" not in page:
            missing.append(section.title)
        missing += [f"{section.title} {key.name}" for key in section.keys if f"| `{key.name}` |" not in page]
    assert missing == []
    assert {s.title for s in reference.sections()} >= {f"[{f.name}]" for f in dataclasses.fields(Config)}


def test_a_field_docstring_is_read_from_the_source_and_a_field_without_one_is_missing(tmp_path):
    source = tmp_path / "cfg_docs_sample.py"
    source.write_text(textwrap.dedent('''
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Sample:
            """Not a field's docstring."""

            documented: int = 1
            """how many of a thing,
            over two lines"""
            bare: int = 2  # a comment is not a docstring
    '''), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("cfg_docs_sample", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules["cfg_docs_sample"] = module
    try:
        spec.loader.exec_module(module)
        assert reference.field_docs(module.Sample) == {"documented": "how many of a thing,\nover two lines"}
    finally:
        del sys.modules["cfg_docs_sample"]


def test_a_long_default_is_shortened_and_a_long_list_is_counted():
    planner = next(s for s in reference.sections() if s.title == "[planner]")
    keys = {k.name: k for k in planner.keys}
    assert keys["system_prompt"].default.endswith("…`") and len(keys["system_prompt"].default) < 80
    assert keys["modes"].default == "3 entries"
    assert keys["default_budget"].default == "`8000`"
