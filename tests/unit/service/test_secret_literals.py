"""The literals and token runs a pattern's every match holds, read from its parse tree (redaction.literals)."""
from __future__ import annotations

import re

import pytest

from ctxbench.redaction.literals import necessary_literals


def _sets(pattern: str, flags: int = 0) -> list[set[str]]:
    return [set(s) for s in necessary_literals(re.compile(pattern, flags)).sets]


def test_a_literal_run_and_an_alternation_of_literals_are_necessary():
    assert _sets(r"(glpat|gldt)-[A-Za-z]{20}") == [{"glpat", "gldt"}]
    assert {"AccountKey="} in _sets(r"AccountKey=[a-z]{8}")


@pytest.mark.parametrize("pattern", [r"(?:abc|)def", r"x?(?:abc)?", r"(?:abc)*z"])
def test_what_may_be_left_out_is_not_necessary(pattern):
    assert {"abc"} not in _sets(pattern)


def test_a_case_insensitive_pattern_has_lowered_literals():
    assert _sets(r"Secret[_-]?Key", re.IGNORECASE) == [{"secret"}, {"key"}]


def test_a_group_that_turns_case_insensitivity_on_is_not_read_as_literals():
    assert _sets(r"(?i:token)=\w+") == []


def test_the_token_run_is_the_longest_repeat_of_token_characters():
    assert necessary_literals(re.compile(r"AC[a-z0-9]{32}")).token_run == 32
    assert necessary_literals(re.compile(r"[MNO][a-zA-Z\d_-]{23,25}\.")).token_run == 23
    assert necessary_literals(re.compile(r"sq0csp-[0-9A-Za-z\\\-_]{43}")).token_run == 0  # a backslash is no token
