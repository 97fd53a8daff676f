"""What a front end asks for when it opens the workbench on a session (the command line's flags)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ctxbench.config import EmbeddingConfig


@dataclass(frozen=True)
class LaunchOptions:
    """What the command line asked for."""

    db_path: Path | None = None
    repo: Path | None = None
    session_id: str | None = None
    mode: str | None = None
    budget: int | None = None
    strategy: str | None = None
    theme: str | None = None
    new_session: bool = False
    title: str = ""
    import_file: Path | None = None  # the demo imports its recorded session into its own database
    import_format: str = "openai"
    index_repo: bool = True  # index the repository and plug retrieval in (off: plans carry no cards)
    retriever: Any = None  # a ready CodeRetrieval to plug in instead of indexing (tests, benchmarks)
    warm_embedder: bool = True  # load the embedding model in the background for semantic retrieval
    # the embedding model to warm (None: the configured one); tests give a stand-in
    embedder_factory: Callable[[EmbeddingConfig], Any] | None = None
    # the model (flags override the config file and CTXBENCH_LLM_* variables, as in `ctxbench chat`)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key_env: str | None = None
    llm_context_limit: int | None = None
    llm_timeout_s: float | None = None
    watch: bool = False  # follow a proxied conversation live (``open --watch``): plans come from the proxy
    llm_from_env: bool = True  # False: ignore CTXBENCH_LLM_* (the demo stays offline unless a flag says otherwise)
    # vectors kept by an earlier run (``service.demo_vectors``), copied into the store's vector cache when the session
    # opens (in its worker: the first paint does not wait for it); None or a missing file: nothing is copied
    kept_vectors: Path | None = None
    # a database to start from (``service.demo_seed``: the demo's session imported and its repository indexed by an
    # earlier run), copied to ``db_path`` when the session opens and no database is there yet; the import is then
    # skipped (the seed holds it). None or a missing file: the session opens as without it
    seed_db: Path | None = None

    def llm_flags(self) -> dict[str, Any]:
        """The model flags as ``service.model.resolve_model`` keywords."""
        return {"base_url": self.llm_base_url, "model": self.llm_model, "api_key_env": self.llm_api_key_env,
                "context_limit": self.llm_context_limit, "timeout_s": self.llm_timeout_s}
