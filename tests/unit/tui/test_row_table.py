"""RowTable.update_row changes one row's cells and draws that row again, and only that row: what it shows is what a
table made with the same cells shows."""
from __future__ import annotations

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.renderables.styled import Styled
from textual.widgets.data_table import CellDoesNotExist

from ctxbench.tui.widgets.row_table import RowTable

COLUMNS = ("pin", "label", "reason")
ROWS = 12


def _cells(n: int, reason: str = "over_budget") -> tuple[Text, ...]:
    return Text(""), Text(f"item {n}"), Text(reason, style="dim")


class _Tables(App):
    def compose(self) -> ComposeResult:
        for name in ("updated", "made"):
            table = RowTable(id=name, cursor_type="row")
            for column in COLUMNS:
                table.add_column(column, key=column, width=14)
            yield table


def _fill(table: RowTable, changed: dict[int, tuple[Text, ...]]) -> None:
    for n in range(ROWS):
        table.add_row(*changed.get(n, _cells(n)), key=f"r{n}")


def _lines(table: RowTable) -> list[str]:
    return [line.text for line in table.render_lines(Region(0, 0, table.size.width, ROWS + 1))]


async def test_an_updated_row_shows_what_a_table_made_with_its_cells_shows():
    app = _Tables()
    async with app.run_test(size=(60, 40)) as pilot:
        updated, made = app.query_one("#updated", RowTable), app.query_one("#made", RowTable)
        _fill(updated, {})
        _fill(made, {3: (Text("sticky…"), Text("item 3"), Text("replanning", style="italic")),
                     7: (Text(""), Text("item 7"), Text("dropping…"))})
        await pilot.pause()
        _lines(updated)  # drawn once, as the screen does
        updated.update_row("r3", {"pin": Text("sticky…"), "reason": Text("replanning", style="italic")})
        updated.update_row("r7", {"reason": Text("dropping…")})
        await pilot.pause()
        assert _lines(updated) == _lines(made)
        assert "sticky…" in _lines(updated)[4] and "dropping…" in _lines(updated)[8]  # the header is line 0


async def test_updating_a_row_draws_that_rows_cells_again_and_no_others(monkeypatch):
    app = _Tables()
    async with app.run_test(size=(60, 40)) as pilot:
        table = app.query_one("#updated", RowTable)
        _fill(table, {})
        await pilot.pause()
        _lines(table)
        drawn: list[object] = []
        render_lines = app.console.render_lines
        monkeypatch.setattr(app.console, "render_lines", lambda *a, **k: drawn.append(a[0]) or render_lines(*a, **k))
        table.update_row("r5", {"reason": Text("leased…")})
        _lines(table)
        cells = [d for d in drawn if isinstance(d, Styled)]  # each cell is drawn as one (its text within it)
        assert len(cells) == len(COLUMNS)  # the row's own cells; update_cell drew every visible cell again


async def test_a_row_or_column_the_table_lacks_is_refused():
    app = _Tables()
    async with app.run_test(size=(60, 40)) as pilot:
        table = app.query_one("#updated", RowTable)
        _fill(table, {})
        await pilot.pause()
        with pytest.raises(CellDoesNotExist):
            table.update_row("r99", {"reason": Text("x")})
        with pytest.raises(CellDoesNotExist):
            table.update_row("r1", {"score": Text("x")})
        assert "over_budget" in _lines(table)[2]  # nothing changed
