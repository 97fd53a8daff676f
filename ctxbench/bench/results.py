"""Benchmark results on disk: one JSON file per benchmark in the results folder, with the machine it ran on.

``ctxbench bench locomo`` and ``ctxbench bench perf`` write ``locomo.json`` / ``perf.json`` there (the
workbench's ``/bench`` reads them back through ``service.bench_results``). Each file holds the report
under ``report`` and ``machine``: processor, cores, memory, Python and torch versions, and the load
average when the run ended — timing figures taken on a shared machine mean little without it.
"""
from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                            "cores": os.cpu_count() or 0}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["processor"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        info.setdefault("processor", platform.processor())
    try:
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    try:
        from importlib.metadata import version

        info["torch"] = version("torch")
    except Exception:  # noqa: BLE001 - a missing package only leaves the field out
        pass
    return info


def save_result(name: str, report: dict[str, Any], folder: Path) -> Path:
    """Write ``folder/NAME.json`` (the report and the machine) and return its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    body = {"benchmark": name, "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "report": report}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
