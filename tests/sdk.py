"""The provider SDKs, imported when a test first uses them rather than when the suite is collected.

``openai``, ``anthropic`` and ``mcp`` take seconds to import, and every test process collects every file:
``from sdk import openai`` gives a stand-in whose first attribute access imports the real package.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """A module imported on first attribute access."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


openai = LazyModule("openai")
anthropic = LazyModule("anthropic")
mcp = LazyModule("mcp")
