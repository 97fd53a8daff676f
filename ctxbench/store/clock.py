"""Timestamps as the store writes them: ISO 8601, UTC, microseconds (sortable as text)."""
from __future__ import annotations

from datetime import datetime, timezone


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")
