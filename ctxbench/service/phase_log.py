"""Where a workbench's start spends its time: named moments written, as they happen, to the file named by
``$CTXBENCH_PHASE_LOG`` (one ``phase<TAB>unix time`` line each; nothing is written without the variable).

``ctxbench bench ui --starts`` starts ``ctxbench demo`` with it set and reports each phase's time since the
process started: first paint, the session open, the first plan, the code index, the embedding model, the vector
index, the history's vectors and ``semantic ready``. Cheap enough to leave in: a call without the variable
reads one environment entry.
"""
from __future__ import annotations

import os
import time

ENV = "CTXBENCH_PHASE_LOG"


def mark(phase: str) -> None:
    """Note that ``phase`` was reached now (when ``$CTXBENCH_PHASE_LOG`` names a file)."""
    path = os.environ.get(ENV)
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{phase}\t{time.time():.4f}\n")
    except OSError:  # a timing aid: never a reason for the workbench to fail
        pass


def read(path: str | os.PathLike[str], since: float) -> dict[str, float]:
    """The phases in ``path``, each as seconds after ``since`` (a unix time); the first time a phase was noted."""
    found: dict[str, float] = {}
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        return found
    for line in lines:
        name, _, when = line.partition("\t")
        try:
            found.setdefault(name, float(when) - since)
        except ValueError:
            continue
    return found
