"""The documentation cannot drift from the code: generated pages match, links resolve, the README stays a doorway."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README_LIMIT = 8 * 1024  # the README says what ctxbench is and points at the guide; the manual lives in docs/


def test_the_command_reference_is_what_the_commands_say():
    from ctxbench.cli import reference

    assert reference.PAGE.read_text(encoding="utf-8") == reference.render(), (
        "docs/cli-reference.md is out of date: run python -m ctxbench.cli.reference --write")


def test_the_command_reference_lists_every_command():
    from ctxbench.cli import COMMANDS

    page = (ROOT / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    missing = [name for name in COMMANDS if f"## `ctxbench {name}`" not in page]
    assert missing == []


def test_the_readme_is_a_doorway():
    assert len((ROOT / "README.md").read_bytes()) <= README_LIMIT


def test_every_relative_link_of_the_readme_and_the_guide_resolves():
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []
