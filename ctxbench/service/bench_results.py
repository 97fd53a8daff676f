"""Read the results ``ctxbench bench locomo`` and ``ctxbench bench perf`` saved (``bench.results``) for ``/bench``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxbench.records.bench import BenchResults, PerfRow, RecallRow


def load_results(folder: Path) -> BenchResults:
    """The last results in ``folder`` (missing files leave their part empty; unreadable ones are named)."""
    folder = Path(folder)
    problems: list[str] = []
    recall: tuple[RecallRow, ...] = ()
    budgets: tuple[int, ...] = ()
    recall_source = perf_source = ""
    perf: tuple[PerfRow, ...] = ()
    locomo = _read(folder / "locomo.json", problems)
    if locomo is not None:
        report = locomo.get("report", {})
        budgets = tuple(report.get("budgets", ()))
        recall = _recall_rows(report.get("results", ()), budgets)
        questions = max((r.get("questions", 0) for r in report.get("results", ())), default=0)
        recall_source = (f"LoCoMo conversations {', '.join(report.get('conversations', ()))} · {questions} questions · "
                         f"{locomo.get('finished', '')}")
    measured = _read(folder / "perf.json", problems)
    if measured is not None:
        perf = tuple(PerfRow(r.get("name", ""), r.get("value", ""), r.get("target", ""), r.get("meets"))
                     for r in measured.get("report", {}).get("rows", ()))
        machine = measured.get("machine", {})
        load = machine.get("load_average")
        perf_source = (f"{machine.get('processor', '?')} · {machine.get('cores', '?')} cores · load average "
                       f"{' '.join(str(x) for x in load) if load else '?'} · {measured.get('finished', '')}")
    return BenchResults(str(folder), recall, budgets, recall_source, perf, perf_source, tuple(problems))


def _read(path: Path, problems: list[str]) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name}: {exc}")
        return None
    return data if isinstance(data, dict) else None


def _recall_rows(results: Any, budgets: tuple[int, ...]) -> tuple[RecallRow, ...]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        key = (r.get("strategy", ""), r.get("roles", ""))
        row = rows.setdefault(key, {"kind": r.get("kind", ""), "is": r.get("is", ""), "recall": {}, "p95": None})
        row["recall"][r.get("budget")] = float(r.get("recall", 0.0))
        if r.get("plan_p95_ms") is not None:
            row["p95"] = max(row["p95"] or 0.0, float(r["plan_p95_ms"]))
    return tuple(RecallRow(name, row["kind"], roles, tuple((b, row["recall"].get(b, 0.0)) for b in budgets),
                           row["p95"], row["is"]) for (name, roles), row in rows.items())
