"""Engine packages never pull in the TUI libraries (textual, rich)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

ENGINE_PACKAGES = ("ctxbench.planner", "ctxbench.store", "ctxbench.session", "ctxbench.codegraph",
                   "ctxbench.retrieval", "ctxbench.llm")


@pytest.mark.parametrize("package", [p for p in ENGINE_PACKAGES if importlib.util.find_spec(p) is not None])
def test_engine_package_does_not_import_textual_or_rich(package):
    code = (
        "import sys\n"
        f"import {package}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{package} imported {out.stdout.strip()}"


def test_planner_modules_import_without_tui():
    code = (
        "import sys\n"
        "import ctxbench.planner, ctxbench.planner.pins, ctxbench.planner.activation\n"
        "import ctxbench.planner.strategies.hybrid, ctxbench.planner.strategies.levels\n"
        "import ctxbench.planner.strategies.semantic, ctxbench.planner.strategies.window\n"
        "import ctxbench.bench.plan_latency\n"
        "print(any(m.split('.')[0] in ('textual', 'rich') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
