"""Areas of a repository that questions rarely ask about: tests, platform shims, generated and vendored code.

``area_of(path)`` names the area of a file (or ""), from its folder and file names alone:

- ``test``: a folder ``test``/``tests``/``_tests``/``__tests__``, or a file ``test_*``, ``*_test.*``,
  ``conftest.py``, ``*.test.*``, ``*.spec.*`` (not ``testing.py``: test helpers are a feature);
- ``platform``: a file or folder named for one operating system (``_win32_console.py``, ``_io_windows.py``,
  ``_winconsole.py``, ``windows_driver.py``, ``darwin``, ``cygwin``);
- ``generated``: ``*_generated*``, ``generated/``, ``*_pb2.py``;
- ``vendored``: a folder ``vendor``/``_vendor``/``vendored``/``third_party``/``extern``.

The retriever multiplies a hit's fused score by its area's weight (``RetrievalConfig.area_weights``)
unless the question names the area (``asks_for``): "why does the test fail on Windows" wants both.
"""
from __future__ import annotations

import re
from typing import Iterable, Mapping

TEST = "test"
PLATFORM = "platform"
GENERATED = "generated"
VENDORED = "vendored"

_TEST_DIRS = frozenset({"test", "tests", "_tests", "__tests__", "testsuite"})
_TEST_FILE = re.compile(r"^(test_.*|.*_tests?\.[a-z]+|conftest\.py|.*\.(test|spec)\.[a-z]+)$")
_PLATFORM = re.compile(r"(^|[_.-])(win32|win64|windows|winconsole|wincon|winapi|darwin|macos|cygwin)([_.-]|$)")
_GENERATED = re.compile(r"(^|[_.-])generated([_.-]|$)|_pb2(_grpc)?\.py$")
_VENDORED_DIRS = frozenset({"vendor", "_vendor", "vendored", "third_party", "thirdparty", "extern", "_vendored"})

# words of a question that ask for an area (compared with the query's lower-case words)
ASKING_WORDS: dict[str, frozenset[str]] = {
    TEST: frozenset({"test", "tests", "testing", "pytest", "unittest", "fixture", "fixtures", "spec", "specs"}),
    PLATFORM: frozenset({"windows", "win32", "win", "macos", "darwin", "mac", "cygwin", "osx", "platform",
                         "platforms", "console", "cmd", "powershell"}),
    GENERATED: frozenset({"generated", "generate", "codegen", "protobuf", "pb2"}),
    VENDORED: frozenset({"vendor", "vendored", "vendoring", "bundled", "third"}),
}


def area_of(path: str) -> str:
    """The area of the file at ``path`` (POSIX, relative to the repository), or "" for ordinary code."""
    parts = path.lower().split("/")
    folders, name = parts[:-1], parts[-1]
    if any(p in _VENDORED_DIRS for p in folders):
        return VENDORED
    if any(p in _TEST_DIRS for p in folders) or _TEST_FILE.match(name):
        return TEST
    if any(_GENERATED.search(p) for p in parts):
        return GENERATED
    if any(_PLATFORM.search(p) for p in parts):
        return PLATFORM
    return ""


def asks_for(words: Iterable[str]) -> frozenset[str]:
    """The areas a question's words name."""
    lowered = {w.lower() for w in words}
    return frozenset(area for area, asking in ASKING_WORDS.items() if lowered & asking)


def area_weight(area: str, asked: frozenset[str], weights: Mapping[str, float]) -> float:
    """The weight of a hit in ``area`` (``area_of``): 1 for ordinary code or an area the question asks for."""
    return weights.get(area, 1.0) if area and area not in asked else 1.0
