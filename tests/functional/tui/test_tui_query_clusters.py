"""The overlay shows the query cluster of the plan: its id, how many queries it holds, and that this turn started it
(the real app, driven by its pilot, turns answered by the offline model)."""
from __future__ import annotations

from textual.widgets import Static

from ctxbench.retrieval.embedder import HashingEmbedder
from ctxbench.tui.screens.overlay import ContextOverlay

from tui_helpers import FixedRetriever, make_app, settle, type_and_enter


class ClusteringRetriever(FixedRetriever):
    """The fixed cards, with query vectors (a hashing embedder) so the plans' queries are clustered."""

    embedding_key = "hashing-256"

    def __init__(self) -> None:
        super().__init__()
        self._embedder = HashingEmbedder()

    def query_vector(self, query: str):
        return self._embedder.encode([query])[0]


async def overlay_title(pilot) -> str:
    await pilot.press("ctrl+o")
    await settle(pilot)
    overlay = pilot.app.screen
    assert isinstance(overlay, ContextOverlay)
    title = str(overlay.query_one("#overlay-title", Static).render()).replace("\u00a0", " ")  # the label wraps whole
    await pilot.press("escape")
    await settle(pilot)
    return title


async def test_the_overlay_shows_the_cluster_and_when_a_new_one_starts(tmp_path):
    retriever = ClusteringRetriever()
    app = make_app(tmp_path, retriever=retriever)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await type_and_enter(pilot, "how does ledger post check the entry balance")
        assert "cluster q1: new, started by this turn" in await overlay_title(pilot)
        await type_and_enter(pilot, "ledger post entry balance check again")
        assert "cluster q1: 2 queries" in await overlay_title(pilot)
        await type_and_enter(pilot, "render the currency report")
        title = await overlay_title(pilot)
        assert "cluster q2: new, started by this turn" in title
        session = app.main_screen.session
        rows = session.wb.query_clusters.list(session.session_id)
        assert [(r.cluster_id, r.count) for r in rows] == [(1, 1), (1, 2), (2, 1)]
        assert retriever.calls  # the plans asked this retriever
