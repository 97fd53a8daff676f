"""A DataTable whose rows change one at a time without the whole table being drawn again.

Textual's ``DataTable.update_cell`` counts an update of the whole table, and every render cache of the table is keyed
by that count: one changed cell drew every visible cell again (the overlay: ~200 cells, ~20 ms, the most of what an
action's mark on its row cost). :meth:`RowTable.update_row` sets some cells of one row and forgets only what was drawn
from that row, then redraws that row alone. It reaches into the table's caches (``textual==8.2.8`` is pinned; the
tests in ``tests/unit/tui/test_row_table.py`` draw a table updated so beside one made with the same cells, line for
line, and count the cells drawn again).
"""
from __future__ import annotations

from typing import Mapping

from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowKey


class RowTable(DataTable):
    """A DataTable with :meth:`update_row`."""

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
