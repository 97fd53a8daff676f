"""Running a piece of code in another checkout of ctxbench, for the scripts here that compare trees
(``--tree NAME=PATH``, repeated): each run a fresh interpreter with that checkout first on its path."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def tree_arg(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` of a ctxbench checkout, as (name, resolved path); ValueError when it is not one."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not Path(path, "ctxbench").is_dir():
        raise ValueError(f"--tree {spec!r}: NAME=PATH of a ctxbench checkout")
    return name, Path(path).resolve()


def run_in(tree: Path, code: str, *args: str) -> dict:
    """Run ``code`` (with ``args``) in a fresh interpreter importing ctxbench from ``tree``; its last line of output,
    read as JSON. Exits with the run's errors when it fails."""
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def load_average() -> str:
    """The machine's 1-, 5- and 15-minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
