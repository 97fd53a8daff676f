"""The bundled demo: its repository and recorded sessions, and the offline model it always talks to."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

SESSION_FILES = ("long_session.jsonl", "short_session.jsonl")


@dataclass(frozen=True)
class DemoFiles:
    repo: Path
    session_file: Path | None


def fixtures_dir() -> Path | None:
    """``fixtures/`` beside the package (a checkout or an editable install), or $CTXBENCH_FIXTURES."""
    env = os.environ.get("CTXBENCH_FIXTURES")
    candidates = [Path(env)] if env else []
    package_dir = Path(__file__).resolve().parent.parent
    candidates += [package_dir.parent / "fixtures", package_dir / "fixtures"]
    return next((c for c in candidates if (c / "demo_repo").is_dir()), None)


def demo_files(session_name: str | None = None) -> DemoFiles:
    """The demo repository and session; ctxbench's own source when the fixtures are not installed."""
    root = fixtures_dir()
    package_dir = Path(__file__).resolve().parent.parent
    if root is None:
        return DemoFiles(package_dir, None)
    names = (session_name,) if session_name else SESSION_FILES
    session = next((root / "sessions" / n for n in names if (root / "sessions" / n).is_file()), None)
    return DemoFiles(root / "demo_repo", session)


def offline(config):
    """The demo always talks to the offline model, whatever the config file says."""
    return dataclasses.replace(config, llm=dataclasses.replace(config.llm, provider="offline", model="offline",
                                                               base_url=""))
