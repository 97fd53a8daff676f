"""A DataTable that draws again only the rows whose cells changed.

Textual's ``DataTable`` counts every update of the table (a changed cell, an added row), and each of its render caches
is keyed by that count: one changed cell, or the same rows added again, drew every visible cell again (the overlay:
~170 cells, ~20 ms, the most of what an action's mark on its row cost); and it forgets every drawn cell whenever its
styles are applied again, as each showing of its screen does (a third of the overlay's opening).
:meth:`RowTable.update_row` sets some cells of one row and forgets only what was drawn from that row;
:meth:`RowTable.replace_rows` puts new rows in and keeps what was drawn of each row whose key and cells are the same;
drawn cells are forgotten for a style only when a style they were drawn with changed; replaced rows size the table at
once, not at its next idle moment (the next key's frame). All reach into the table's
caches (``textual==8.2.8`` is pinned; ``tests/unit/tui/test_row_table.py`` draws tables
changed so beside ones made with the same cells, line for line, and counts the cells drawn again).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowKey


class RowTable(DataTable):
    """A DataTable with :meth:`update_row` and :meth:`replace_rows`, by which alone its rows change (``update_cell``,
    ``add_row`` or ``remove_row`` between two ``replace_rows`` would leave it drawing a row as it was)."""

    _filled_at: int | None = None  # the table's update count once the last replace_rows had put its rows in
    _look: tuple[Any, ...] | None = None  # the styles the drawn cells were drawn with

    def notify_style_update(self) -> None:
        """DataTable forgets every drawn cell whenever its styles are applied again, which showing its screen, or
        another one over it, does with the same styles: drawn cells are forgotten only when a style they are drawn
        with changed (the table's own, or a component's: cursor, hover, header...)."""
        super(DataTable, self).notify_style_update()  # the widget's own style caches
        look = (self.rich_style, *(self.get_component_rich_style(name, default=Style.null())
                                   for name in sorted(self.COMPONENT_CLASSES)))
        if look != self._look:
            self._look = look
            super().notify_style_update()
        else:
            self.refresh()

    def update_row(self, row_key: str, cells: Mapping[str, object]) -> None:
        """Set the cells of row ``row_key`` named by column key in ``cells``, and draw that row again (only that row:
        the other rows' cells stay drawn). The columns keep their widths. Raises ``CellDoesNotExist``."""
        key = RowKey(row_key)
        columns = {ColumnKey(name): value for name, value in cells.items()}
        missing = [c for c in columns if c not in self._column_locations]
        if key not in self._row_locations or missing:
            raise CellDoesNotExist(f"no cell of row {row_key!r} in column(s) {missing or list(cells)}")
        self._data[key].update(columns)
        index = self._row_locations.get(key)
        for cache in (self._cell_render_cache, self._row_render_cache):  # keyed by (row key, ...)
            for cached in [k for k in cache.keys() if k[0] == key]:
                cache.discard(cached)
        self._row_renderable_cache.discard((self._update_count, index))
        self._line_cache.clear()  # by line of the screen: made again from the rows' drawn cells, none drawn again
        self.refresh_row(index)

    def replace_rows(self, rows: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """The table's rows become ``rows`` (key, cells in column order), as ``clear()`` then ``add_row`` each would
        make them; a row whose key and cells were there already is not drawn again (its drawn cells are kept, their
        place set anew when it moved)."""
        # what was drawn since the last fill (a resize counts an update too: cells do not depend on the table's size)
        since = range(self._filled_at, self._update_count + 1) if self._filled_at is not None else range(0)
        old = {key.value: (self._row_locations.get(key), tuple(cells.values())) for key, cells in self._data.items()}
        drawn = [(key, self._cell_render_cache.get(key)) for key in self._cell_render_cache.keys()]
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        # row key -> its place now, for each row whose cells are the same (a drawn cell holds its row's index in the
        # style of its segments, for the mouse: a moved row's is set to its new place)
        same = {RowKey(key): index for index, (key, cells) in enumerate(rows)
                if key in old and _same_cells(old[key][1], tuple(cells))}
        moved = {key: index for key, index in same.items() if old[key.value][0] != index}
        same[self._header_row_key] = -1  # the columns stay: their labels are drawn as they were
        now = self._filled_at = self._update_count
        self._measure(row for row in self.rows if row not in same)
        for key, lines in drawn:  # (row key, column key, style, cursor, hover, show hover, update count, pseudo)
            if key[0] in same and key[6] in since and lines is not None:
                if key[0] in moved:
                    lines = _placed(lines, moved[key[0]], self._column_locations.get(key[1]))
                self._cell_render_cache.set((*key[:6], now, *key[7:]), lines)

    def _measure(self, changed: Iterable[RowKey]) -> None:
        """Size the table for its rows now, measuring the ``changed`` rows' cells (every row's when a column takes its
        width from its cells, or rows have labels): DataTable leaves it to its next idle moment, which came with the
        next key pressed on the table, laying the screen out again (~25 ms) in that key's frame."""
        auto = any(column.auto_width for column in self.columns.values()) or any(
            row.label is not None for row in self.rows.values())
        self._require_update_dimensions = False
        self._new_rows.clear()
        self._update_dimensions(list(self.rows) if auto else list(changed))


def _placed(lines: list[list[Segment]], row: int, column: int) -> list[list[Segment]]:
    """A drawn cell's lines, their segments' styles saying they are at ``row``, ``column`` (as a cell drawn there)."""
    place = Style.from_meta({"row": row, "column": column})
    return [[Segment(text, style + place if style is not None else style, control) for text, style, control in line]
            for line in lines]


def _same_cells(old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
    """Cells that draw the same: equal values of the same type, a Text with its style and layout too (a Text equals one
    of another base style)."""
    if len(old) != len(new):
        return False
    return all(type(a) is type(b) and a == b and (not isinstance(a, Text) or _text_look(a) == _text_look(b))
               for a, b in zip(old, new))


def _text_look(text: Text) -> tuple[Any, ...]:
    return text.style, text.justify, text.overflow, text.no_wrap, text.end, text.tab_size
