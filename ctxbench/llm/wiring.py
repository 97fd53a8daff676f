"""Connecting a Workbench to a repository's code index for the turn runner.

``attach_repository(workbench, repo)`` indexes the repository (incrementally), plugs code
retrieval into the Workbench's ``retriever`` seam (semantic search included unless
``semantic=False``), and returns the :class:`IndexCodeContext` that ``request_code_context``
expands symbols with and the reflection step draws its vocabulary of symbol ids and paths from.
``open_code_retriever`` is the indexing + retriever step every caller shares (CLI commands too).

A symbol's body is read from the file at the line span the index recorded, with secrets masked
the way cards are; files that hold secrets are never read, and nothing outside the repository is.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ctxbench.config import Config

SCAFFOLD_CACHE_SIZE = 16  # fitted scaffolds kept per retriever (one per budget share seen)


class ModeRetriever:
    """The Workbench's ``retrieve(query, *, mode, pins, activation, mentioned)`` seam over the code retriever.

    Graph expansion only where the mode's profile asks for neighbours; the planner decides how
    many cards of the set each mode uses. Pins, activation scores and mentioned names boost their
    symbols and, through personalized PageRank, the symbols close to them in the code graph. The
    orientation scaffold is folded to the plan's own share of its budget (``scaffold_for``).
    """

    def __init__(self, retriever: Any, config: Config, tokenizer: Any = None) -> None:
        self.retriever = retriever
        self.config = config
        self._tokenizer = tokenizer
        self._scaffolds: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from ctxbench.tokens import get_tokenizer

            self._tokenizer = get_tokenizer(self.config.tokenizer.name, self.config.tokenizer.cache_size)
        return self._tokenizer

    @property
    def semantic_ready(self) -> bool:
        embedder = getattr(self.retriever, "embedder", None)
        return bool(embedder is not None and getattr(embedder, "ready", False))

    def retrieve(self, query: str, *, mode: str, budget: int | None = None, pins: Sequence[Any] = (),
                 activation: Mapping[str, float] | None = None, mentioned: Sequence[str] = (), k: int | None = None):
        from ctxbench.retrieval.retriever import SOURCES

        profile = self.config.planner.mode(mode)
        sources = tuple(s for s in SOURCES if s != "graph" or profile.graph_neighbours)
        return self.retriever.retrieve(query, k, sources=sources, pins=pins, activation=activation, mentioned=mentioned,
                                       scaffold=self.scaffold_for(mode, budget))

    def scaffold_for(self, mode: str, budget: int | None) -> str | None:
        """The scaffold folded to the plan's share (``budget`` x the mode's ``scaffold_share``); None when the
        index cannot fold it (the view's own scaffold is used). Off, which shows no scaffold, lists the
        one the default mode would send (the largest share when that is Off too)."""
        view = getattr(self.retriever, "index", None)
        build = getattr(view, "scaffold_at", None)
        if build is None:
            return None
        from ctxbench.planner.modes import share_tokens

        planner = self.config.planner
        profile = planner.mode(mode)
        share = profile.scaffold_share
        if not profile.auto_retrieve:
            share = planner.mode(planner.default_mode).scaffold_share or max(m.scaffold_share for m in planner.modes)
        cap = share_tokens(planner.default_budget if budget is None else budget, share)
        key = (str(view.version), cap)
        with self._lock:
            text = self._scaffolds.get(key)
        if text is None:
            text = fit_scaffold(build, cap, self.tokenizer)
            with self._lock:
                self._scaffolds[key] = text
                while len(self._scaffolds) > SCAFFOLD_CACHE_SIZE:
                    self._scaffolds.popitem(last=False)
        return text


def fit_scaffold(build: Callable[[int], str], cap: int, tokenizer: Any) -> str:
    """The largest scaffold ``build(tokens)`` whose plan item (its rendered system message) takes at most ``cap``
    tokens, counted the way the planner counts it; "" when not even the navigation note fits."""
    from ctxbench.planner.render import scaffold_message
    from ctxbench.tokens import count_message

    overhead = count_message(tokenizer, scaffold_message(""))
    tokens = cap - overhead
    while tokens > 0:
        text = build(tokens)
        if not text.strip():
            return ""
        used = count_message(tokenizer, scaffold_message(text))
        if used <= cap:
            return text
        tokens -= used - cap  # token merges across the header: shrink by the excess and build again
    return ""


def context_key(context: Mapping[str, Any]) -> tuple:
    """A hashable key for the seam's keyword arguments (pins, activation, mentioned, budget), for caches."""

    def freeze(value: Any) -> Any:
        if isinstance(value, Mapping):
            return tuple(sorted((k, freeze(v)) for k, v in value.items()))
        if isinstance(value, (list, tuple, set, frozenset)):
            items = [freeze(v) for v in value]
            return tuple(sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items)
        return value

    return freeze(dict(context))


class IndexCodeContext:
    """Symbol bodies and the known names of one indexed repository."""

    def __init__(self, index: Any, config: Config) -> None:
        self.index = index
        self.root = Path(index.root).resolve()
        self.config = config

    # -- lookup -----------------------------------------------------------------------------

    def resolve(self, name: str) -> tuple[str | None, list[str]]:
        """The symbol id ``name`` means (exact id, a dotted tail, or a unique bare name) and the candidates."""
        name = name.strip().strip("`").removeprefix("card:").rstrip("()")
        symbols = self.index.symbols
        if name in symbols:
            return name, [name]
        tail = [sid for sid in symbols if sid.endswith("." + name)]
        if len(tail) == 1:
            return tail[0], tail
        return None, sorted(tail)

    def expand(self, symbol: str) -> str | None:
        limit = self.config.llm.query_db_max_chars
        text = symbol.strip().removeprefix("path:")
        if text in self.index.by_path:
            return self._file(text, limit)
        sid, candidates = self.resolve(symbol)
        if sid is None:
            if candidates:
                return "ambiguous symbol; one of: " + ", ".join(candidates[: self.config.llm.query_db_max_rows])
            return None
        sym = self.index.symbols[sid]
        body = self._lines(sym.path, sym.line, sym.end_line)
        if body is None:
            return None
        header = f"# {sid} ({sym.kind}) — {sym.path}:{sym.line}-{sym.end_line}"
        return _cap(header + "\n" + body, limit)

    def known_names(self) -> tuple[list[str], list[str]]:
        return list(self.index.symbols), list(self.index.by_path)

    # -- files ------------------------------------------------------------------------------

    def _read(self, rel: str) -> str | None:
        from ctxbench.codegraph.secrets import redact
        from ctxbench.codegraph.walk import is_secret_file

        path = (self.root / rel).resolve()
        if not path.is_relative_to(self.root) or is_secret_file(path.name, self.config.index.secret_file_globs):
            return None
        try:
            raw = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return redact(raw)[0]

    def _lines(self, rel: str, start: int, end: int) -> str | None:
        text = self._read(rel)
        if text is None:
            return None
        lines = text.splitlines()
        return "\n".join(lines[max(0, start - 1): max(start, end)])

    def _file(self, rel: str, limit: int) -> str | None:
        text = self._read(rel)
        if text is None:
            return None
        symbols = ", ".join(self.index.by_path.get(rel, ())[: self.config.llm.query_db_max_rows])
        return _cap(f"# {rel} (defines: {symbols or 'nothing indexed'})\n{text}", limit)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[cut at {limit} characters]"


def open_code_retriever(repo: Path, conn: Any, config: Config, *, semantic: bool = True, embedder: Any = None,
                        wait_for_model: bool = True, progress: Callable[[str, int, int], None] | None = None,
                        tokenizer: Any = None) -> tuple[Any, Any]:
    """Index ``repo`` incrementally into ``conn`` and return ``(Retriever, CodeIndex)``.

    With ``semantic`` the retriever gets ``embedder`` (the configured model when None, loading in the
    background from here on); with ``wait_for_model`` the cards are embedded as part of indexing, which
    waits for the model (a model that cannot load raises ``EmbedderError``), and the retriever is prepared
    (keyword, graph walk and vector indexes). Without waiting, retrieval answers from keyword, names and
    the graph, its sets noting that semantic search is loading, until the model is ready.
    """
    from ctxbench.codegraph.index import build_index, load_index, normalize_root
    from ctxbench.retrieval.retriever import Retriever, view_of

    root = normalize_root(repo)
    if semantic and embedder is None:
        from ctxbench.retrieval.embedder import Embedder

        embedder = Embedder(config.embedding)
    if not semantic:
        embedder = None
    embed = None
    if embedder is not None:
        embedder.start_loading()  # overlaps the model load with parsing
        if wait_for_model:
            from ctxbench.retrieval.vectors import embed_cards

            # indexing fills the vector cache; retriever.prepare() below builds the FAISS index once from it
            def embed(cards: Any, embed_progress: Any) -> Any:
                return embed_cards(cards, conn, embedder, embed_progress)

    build_index(root, conn, config, progress=progress, embed=embed)
    index = load_index(root, conn, config)
    retriever = Retriever(conn, root, config, embedder, index=view_of(index, config, tokenizer))
    if embedder is not None and wait_for_model:
        retriever.prepare(wait_for_model=True)
    return retriever, index


def attach_repository(workbench: Any, repo: Path | None, progress: Callable[[str, int, int], None] | None = None,
                      *, semantic: bool = True, embedder: Any = None, wait_for_model: bool = True
                      ) -> IndexCodeContext | None:
    """Index ``repo`` (incrementally), plug its retrieval into ``workbench``, return its code context.

    Headless callers (``chat``, ``plan``) get semantic search by default: the model is loaded and waited
    for (``EmbedderError`` when it cannot load), and the same model ranks earlier turns for the semantic
    history strategy unless the Workbench has an embedder of its own. ``semantic=False`` retrieves with
    keyword, names and the graph only (the RetrievalSet says semantic search was not available); a caller
    with its own embedder passes it, and ``wait_for_model=False`` does not wait for it. Import errors are
    bugs and propagate. None when there is no repository.
    """
    if repo is None:
        return None
    config = workbench.config
    retriever, index = open_code_retriever(repo, workbench.conn, config, semantic=semantic, embedder=embedder,
                                           wait_for_model=wait_for_model, progress=progress,
                                           tokenizer=workbench.tokenizer)
    if retriever.embedder is not None and workbench.embedder is None:
        workbench.embedder = retriever.embedder
    workbench.retriever = ModeRetriever(retriever, config, workbench.tokenizer)
    return IndexCodeContext(index, config)
