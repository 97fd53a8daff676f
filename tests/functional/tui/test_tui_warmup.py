"""Warm-up of the embedding model in the workbench: a failed load is reported in the embedder's slot."""
from ctxbench.config import Config
from ctxbench.retrieval.embedder import EmbedderError
from ctxbench.service.options import LaunchOptions
from ctxbench.service.session import WorkbenchSession

from retrieval_fixture import write_repo


class _BrokenEmbedder:
    ready = False
    error = None

    def start_loading(self):
        pass

    def wait(self, timeout=None):
        raise EmbedderError("bundled model.safetensors sha256 mismatch")


def test_failed_model_load_turns_semantic_off_in_the_embedder_slot(tmp_path):
    options = LaunchOptions(db_path=tmp_path / "w.db", repo=write_repo(tmp_path / "repo"),
                            embedder_factory=lambda config: _BrokenEmbedder())
    session = WorkbenchSession(options, Config())
    session.open()
    try:
        seen = []
        session.attach_repository(seen.append)
        assert session.retrieval_ready  # keyword and graph retrieval carry on
        assert session.attached.retriever.embedder is None
        assert session.semantic_ready is False
        assert seen[-1].slot == "embedder"
        assert seen[-1].state == "error"
        assert "sha256 mismatch" in seen[-1].text
    finally:
        session.close()
