"""One digest of ctxbench's own source: what a kept derivative of its code (a long session's history snapshot, the
demo's seed database) is filed under, so a ctxbench whose code changed in any module, by an upgrade or a local edit,
never reads one an older code made (a list of the modules that matter goes stale as code moves between modules)."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # the ctxbench package folder


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """sha256 over every ``.py`` file of the package: its path inside the package and its bytes (once per process)."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()
