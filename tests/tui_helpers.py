"""Shared set-up for the workbench tests: a small recorded session, a fixed retriever, an app factory.

Everything here is deterministic: fixed session and branch ids (PlanIds hash them), no
live draft preview (no timers), no notifications, no cursor blink, the offline model only.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import AsyncIterator

from ctxbench.config import Config
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet
from ctxbench.tui.app import CtxbenchApp
from ctxbench.service.options import LaunchOptions

LONG_RESULT = "\n".join(f"    line {n}: balance += entry.amount  # running total" for n in range(120))


def session_lines() -> list[dict]:
    """Six turns: a system prompt, markdown replies, one tool call with a long result."""
    lines: list[dict] = [{"role": "system", "content": "You help with the ledgerlite repository."}]
    lines += [
        {"role": "user", "content": "How does Ledger.post check that an entry balances?"},
        {"role": "assistant", "content": "It sums the **debits** and **credits** and raises `UnbalancedEntry`."},
        {"role": "user", "content": "Show me the journal code."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "read_file", "arguments": json.dumps({"path": "ledgerlite/journal.py"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": LONG_RESULT},
        {"role": "assistant", "content": "## journal.py\n\n```python\ndef post(entry):\n    check(entry)\n```\n"},
        {"role": "user", "content": "Which currencies does fx support?"},
        {"role": "assistant", "content": "- EUR\n- USD\n- GBP"},
        {"role": "user", "content": "Add a test for rounding in money.py"},
        {"role": "assistant", "content": "Done: `test_rounding_half_even` covers it."},
        {"role": "user", "content": "Where are the reports rendered?"},
        {"role": "assistant", "content": "In `reports.render_balance`, which formats each account."},
    ]
    return lines


def write_session(path: Path) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in session_lines()), encoding="utf-8")
    return path


CARDS = (
    ("ledgerlite.ledger.Ledger.post", "ledgerlite/ledger.py", 40, 0.91,
     "def post(self, entry: Entry) -> None:\n    \"\"\"Post a balanced entry.\"\"\"\n    self._check(entry)"),
    ("ledgerlite.journal.Journal.append", "ledgerlite/journal.py", 12, 0.74,
     "def append(self, entry: Entry) -> int:\n    self.entries.append(entry)\n    return len(self.entries)"),
    ("ledgerlite.money.Money.round", "ledgerlite/money.py", 30, 0.52,
     "def round(self, places: int = 2) -> 'Money':\n    return Money(self.amount.quantize(...), self.currency)"),
    ("ledgerlite.reports.render_balance", "ledgerlite/reports.py", 8, 0.33,
     "def render_balance(ledger: Ledger) -> str:\n    return '\\n'.join(lines)"),
)

SCAFFOLD = "ledgerlite/\n  ledger.py  Ledger\n  journal.py  Journal\n  money.py  Money\n  reports.py"


class FixedRetriever:
    """The same four symbol cards and scaffold for every query: retrieval without an index or a model."""

    semantic_ready = False

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def retrieve(self, query: str, *, mode: str, **context) -> RetrievalSet:
        self.calls.append((query, mode))
        hits = tuple(
            RetrievalHit(symbol=sym, path=path, line=line, score=score, why=f"keyword score {score}",
                         provenance="keyword", card_text=f"# {sym} — {path}:{line}\n{body}", card_hash=f"h{n}")
            for n, (sym, path, line, score, body) in enumerate(CARDS)
        )
        return RetrievalSet(RetrievalSet.make_id(query, hits), query, hits, False, (), SCAFFOLD)


def cut_cards_config(max_cards: int = 2) -> Config:
    """``quiet_config`` with Light showing ``max_cards`` cards: the fixed retriever's other cards are left out
    of the plan although relevant, so they are the suggested pins."""
    base = quiet_config()
    modes = tuple(dataclasses.replace(m, max_cards=max_cards) if m.name == "light" else m for m in base.planner.modes)
    return dataclasses.replace(base, planner=dataclasses.replace(base.planner, modes=modes))


def quiet_config(**ui_changes) -> Config:
    base = Config()
    ui = dataclasses.replace(base.ui, live_preview=False, **ui_changes)
    return dataclasses.replace(base, ui=ui)


def make_app(tmp_path: Path, *, retriever=True, config: Config | None = None, **options) -> CtxbenchApp:
    db = tmp_path / "tui.db"
    session_file = write_session(tmp_path / "session.jsonl")
    opts = LaunchOptions(db_path=db, import_file=session_file if "session_id" not in options else None,
                         title="ledgerlite session", index_repo=False,
                         retriever=FixedRetriever() if retriever is True else retriever or None, **options)
    app = CtxbenchApp(opts, config or quiet_config())
    app._disable_notifications = True
    return app


@contextlib.asynccontextmanager
async def running(tmp_path: Path, *, size: tuple[int, int] | None = None, **options) -> AsyncIterator:
    """``make_app(tmp_path, **options)`` running (at ``size``, else Textual's default) and settled: its pilot."""
    app = make_app(tmp_path, **options)
    async with (app.run_test(size=size) if size is not None else app.run_test()) as pilot:
        await settle(pilot)
        yield pilot


def fixed_ids(monkeypatch) -> None:
    """Session and branch ids are random; PlanIds hash them; snapshots need them fixed. PlanIds also
    hash the whole planner config, which grows a field now and then: snapshots (which show PlanIds)
    hash a fixed stand-in for it, so they change only when the screen does."""
    import ctxbench.planner.plan as plan
    import ctxbench.store.sessions as sessions

    monkeypatch.setattr(sessions, "new_session_id", lambda: "s_snapshot")
    monkeypatch.setattr(sessions, "new_branch_id", lambda: "b_snapshot")
    monkeypatch.setattr(plan, "_config_digest", lambda config: "snapshot-planner-config")


async def settle(pilot, rounds: int = 200) -> None:
    """Wait until the engine workers are done and their messages are handled."""
    app = pilot.app
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await pilot.pause()
        main = app.main_screen
        busy = any(w.is_running for w in app.workers)
        if not busy and main.ready and not main.meter.pending and not main.turn_running:
            await pilot.pause()
            if not any(w.is_running for w in app.workers):
                return
    raise AssertionError("the workbench did not settle")


def quiet_inputs(app) -> None:
    from textual.widgets import Input

    for screen in app.screen_stack:
        for widget in screen.query(Input):
            widget.cursor_blink = False


async def type_and_enter(pilot, text: str, *, wait: bool = True) -> None:
    """Type ``text`` into the prompt and press Enter (then wait for the workbench to settle)."""
    prompt = pilot.app.main_screen.prompt
    prompt.focus()
    prompt.value = text
    await pilot.press("enter")
    if wait:
        await settle(pilot)
