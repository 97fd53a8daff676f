"""RowTable.update_row changes one row's cells and draws that row again, and only that row: what it shows is what a
table made with the same cells shows."""
from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.renderables.styled import Styled
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist

from ctxbench.tui.widgets.row_table import RowTable

COLUMNS = ("pin", "label", "reason")
ROWS = 12


def _cells(n: int, reason: str = "over_budget") -> tuple[Text, ...]:
    return Text(""), Text(f"item {n}"), Text(reason, style="dim")


class _Tables(App):
    def compose(self) -> ComposeResult:
        table = RowTable(id="updated", cursor_type="row")
        for column in COLUMNS:
            table.add_column(column, key=column, width=14)
        yield table


def _lines(table: RowTable) -> list[str]:
    return [line.text for line in table.render_lines(Region(0, 0, table.size.width, ROWS + 1))]


def _look(table: RowTable) -> list[list[tuple[str, object]]]:
    """Each line drawn, as its segments' text and style."""
    return [[(seg.text, seg.style) for seg in line]
            for line in table.render_lines(Region(0, 0, table.size.width, ROWS + 1))]


@asynccontextmanager
async def _shown() -> AsyncIterator[tuple[App, Any, RowTable]]:
    """A table of ``ROWS`` rows on the screen, laid out: the app, its pilot and the table."""
    app = _Tables()
    async with app.run_test(size=(60, 40)) as pilot:
        table = app.query_one("#updated", RowTable)
        table.replace_rows(_rows({}))
        await pilot.pause()
        yield app, pilot, table


def _drawing(app: App, monkeypatch) -> list[object]:
    """From now on, what the app's console draws (a cell is drawn as a Styled around its text)."""
    drawn: list[object] = []
    render_lines = app.console.render_lines
    monkeypatch.setattr(app.console, "render_lines", lambda *a, **k: drawn.append(a[0]) or render_lines(*a, **k))
    return drawn


def _drawn_cells(drawn: list[object]) -> list[object]:
    return [d for d in drawn if isinstance(d, Styled)]


async def _shows_as_made_afresh(pilot, table: RowTable, rows: list[tuple[str, tuple[Text, ...]]]) -> None:
    """What ``table`` shows now is what it shows made again with ``rows`` by DataTable's own clear and add_row
    (every cell drawn anew)."""
    await pilot.pause()
    shown = _look(table)
    DataTable.clear(table)
    for key, cells in rows:
        DataTable.add_row(table, *cells, key=key)
    await pilot.pause()
    assert shown == _look(table)


async def test_an_updated_row_shows_what_a_table_made_with_its_cells_shows():
    async with _shown() as (app, pilot, table):
        _lines(table)  # drawn once, as the screen does
        table.update_row("r3", {"pin": Text("sticky…"), "reason": Text("replanning", style="italic")})
        table.update_row("r7", {"reason": Text("dropping…")})
        await pilot.pause()
        assert "sticky…" in _lines(table)[4] and "dropping…" in _lines(table)[8]  # the header is line 0
        await _shows_as_made_afresh(pilot, table, _rows({
            3: (Text("sticky…"), Text("item 3"), Text("replanning", style="italic")),
            7: (Text(""), Text("item 7"), Text("dropping…"))}))


async def test_updating_a_row_draws_that_rows_cells_again_and_no_others(monkeypatch):
    async with _shown() as (app, pilot, table):
        _lines(table)
        drawn = _drawing(app, monkeypatch)
        table.update_row("r5", {"reason": Text("leased…")})
        _lines(table)
        cells = _drawn_cells(drawn)  # each cell is drawn as one (its text within it)
        assert len(cells) == len(COLUMNS)  # the row's own cells; update_cell drew every visible cell again


async def test_a_row_or_column_the_table_lacks_is_refused():
    async with _shown() as (app, pilot, table):
        with pytest.raises(CellDoesNotExist):
            table.update_row("r99", {"reason": Text("x")})
        with pytest.raises(CellDoesNotExist):
            table.update_row("r1", {"score": Text("x")})
        assert "over_budget" in _lines(table)[2]  # nothing changed


def _rows(changed: dict[int, tuple[Text, ...]], order=range(ROWS)) -> list[tuple[str, tuple[Text, ...]]]:
    return [(f"r{n}", changed.get(n, _cells(n))) for n in order]


async def test_replaced_rows_show_what_a_table_made_with_them_shows():
    """Rows kept, changed in text, changed in style only, moved, added and gone (a drawn cell holds its row's index,
    for the mouse: a moved row is drawn again)."""
    async with _shown() as (app, pilot, table):
        _lines(table)
        changed = {2: (Text(""), Text("item 2"), Text("over_budget", style="bold")),  # another style, equal Texts
                   5: (Text("sticky"), Text("item 5"), Text("pinned"))}
        order = [0, 1, 2, 5, 4, 3, 6, 7, 8, 9, 10, 12]  # 3 and 5 swapped, 11 gone, 12 new
        table.replace_rows(_rows(changed, order))
        assert table.get_row_at(3)[2].plain == "pinned" and table.get_row_at(2)[2].style == "bold"
        await _shows_as_made_afresh(pilot, table, _rows(changed, order))


async def test_replacing_rows_draws_only_the_rows_whose_cells_changed(monkeypatch):
    async with _shown() as (app, pilot, table):
        _lines(table)
        drawn = _drawing(app, monkeypatch)
        table.replace_rows(_rows({}))
        _lines(table)
        assert _drawn_cells(drawn) == []
        table.replace_rows(_rows({}, [0, 1, 3, 2, *range(4, ROWS)]))  # moved rows: their cells placed anew, not drawn
        _lines(table)
        assert _drawn_cells(drawn) == []
        table.replace_rows(_rows({4: (Text(""), Text("item 4"), Text("dropping…"))}))
        _lines(table)
        assert len(_drawn_cells(drawn)) == len(COLUMNS)


async def test_replaced_rows_size_the_table_at_once_not_at_the_next_key(monkeypatch):
    """DataTable sizes itself for new rows when it is next idle, which is when the next key reaches it: the screen was
    laid out again in that key's frame. Replaced rows size the table before the call returns, measuring only the rows
    that changed."""
    async with _shown() as (app, pilot, table):
        header = 1
        measured: list[object] = []
        measure = table._update_dimensions
        monkeypatch.setattr(table, "_update_dimensions", lambda rows: measured.append(set(rows)) or measure(rows))
        table.replace_rows(_rows({4: (Text(""), Text("item 4"), Text("dropping…"))}, range(ROWS - 3)))
        assert table.virtual_size.height == ROWS - 3 + header
        assert [{key.value for key in rows} for rows in measured] == [{"r4"}]
        await pilot.pause()
        assert len(measured) == 1  # nothing left for the table's idle moment
        await _shows_as_made_afresh(pilot, table, _rows({4: (Text(""), Text("item 4"), Text("dropping…"))},
                                                        range(ROWS - 3)))


async def test_styles_applied_again_unchanged_keep_the_drawn_cells_and_a_new_theme_draws_them_anew(monkeypatch):
    """Showing a screen applies the table's styles again (the same ones): nothing is drawn again; a new theme changes
    them, and the table then shows what a table made afresh in that theme shows."""
    app = _Tables()
    async with app.run_test(size=(60, 40)) as pilot:
        table = app.query_one("#updated", RowTable)
        table.replace_rows(_rows({}))
        await pilot.pause()  # laid out: its first size counted as an update of the whole table, drawn again
        table.refresh()
        await pilot.pause()
        drawn = _drawing(app, monkeypatch)
        app.update_styles(table)
        await pilot.pause()
        _lines(table)
        assert _drawn_cells(drawn) == []
        dark = _look(table)
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        await pilot.pause()
        assert _look(table) != dark
        await _shows_as_made_afresh(pilot, table, _rows({}))
