"""The one path that attaches a repository to a workbench: index it, plug its retrieval into plans.

``attach_repository(workbench, repo)`` indexes the repository incrementally (progress through a
callback), opens a :class:`~ctxbench.retrieval.retriever.Retriever` on a connection of its own (indexing
and retrieval never make the session's reads wait), plugs a :class:`ModeRetrieval` into the workbench's
``retriever`` seam and returns the :class:`AttachedRepository`. Every front end uses it: ``chat``,
``plan``, ``retrieve`` and ``index`` on the command line, the workbench's warm-up, the benchmarks.

Semantic search, three ways:

- ``semantic=True`` (default): the embedding model loads while the files are parsed, the cards are
  embedded as part of indexing and the vector index is built; a model that cannot load raises
  ``EmbedderError``. The same model ranks earlier turns for the semantic history strategy.
- ``semantic=True, wait_for_model=False``: the model loads in the background; until it is ready the
  RetrievalSets say so and retrieval answers from keyword, names and the graph.
- ``semantic=False``: no model; :meth:`AttachedRepository.warm_semantic` adds one later (the workbench
  does this in a background worker, with progress).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ctxbench.codegraph.code_context import IndexCodeContext
from ctxbench.config import Config
from ctxbench.records.plans import Pin
from ctxbench.records.retrieval import RetrievalSet
from ctxbench.tokens import Tokenizer

if TYPE_CHECKING:
    from ctxbench.service.workbench import Workbench

SCAFFOLD_CACHE_SIZE = 16  # fitted scaffolds kept (one per budget share seen)
RETRIEVAL_CACHE_SIZE = 32  # retrieval sets kept: cycling the Context Mode on one query reuses them

IndexProgress = Callable[[str, int, int], None]  # (phase, done, total)
EmbedProgress = Callable[[int, int], None]  # (done, total)


class ModeRetrieval:
    """Code retrieval as plans ask for it (the workbench's ``CodeRetrieval`` seam) over one Retriever.

    Graph expansion only where the mode's profile asks for neighbours; the planner decides how many
    cards of the set each mode uses. Pins, activation scores and mentioned names boost their symbols
    and, through personalized PageRank, the symbols close to them in the code graph. The orientation
    scaffold is folded to the plan's own share of its budget. The last sets are remembered by
    everything they depend on, so cycling the Context Mode on one turn replans without searching again.
    """

    def __init__(self, retriever: Any, config: Config, tokenizer: Tokenizer,
                 cache_size: int = RETRIEVAL_CACHE_SIZE) -> None:
        self.retriever = retriever
        self.config = config
        self.tokenizer = tokenizer
        self._scaffolds: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._sets: OrderedDict[tuple, RetrievalSet] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def semantic_ready(self) -> bool:
        """The model is loaded and the cards' vectors are indexed: plans get semantic search."""
        return self.retriever.semantic_ready

    def retrieve(self, query: str, *, mode: str, budget: int | None = None, pins: Sequence[Pin] = (),
                 activation: Mapping[str, float] | None = None, mentioned: Sequence[str] = (),
                 k: int | None = None) -> RetrievalSet:
        """The set for ``query`` under ``mode``; the hits do not depend on the budget, only the folded scaffold
        does, so a new budget (the budget keys, the what-if slider) re-folds the scaffold without searching."""
        from ctxbench.retrieval.retriever import SOURCES

        key = (query, mode, tuple(pins), tuple(sorted((activation or {}).items())), tuple(mentioned), k,
               self.semantic_ready)
        with self._lock:
            found = self._sets.get(key)
            if found is not None:
                self._sets.move_to_end(key)
        if found is None:
            profile = self.config.planner.mode(mode)
            sources = tuple(s for s in SOURCES if s != "graph" or profile.graph_neighbours)
            found = self.retriever.retrieve(query, k, sources=sources, pins=pins, activation=activation,
                                            mentioned=mentioned)
            with self._lock:
                self._sets[key] = found
                while len(self._sets) > self._cache_size:
                    self._sets.popitem(last=False)
        scaffold = self.scaffold_for(mode, budget)
        if scaffold is None or scaffold == found.scaffold:
            return found
        view = self.retriever.index
        return RetrievalSet.create(query, found.hits, view.version if view is not None else "",
                                   semantic_available=found.semantic_available, notes=found.notes, scaffold=scaffold,
                                   capsules=found.capsules)

    @property
    def embedding_key(self) -> str:
        """The key of the model's query vectors (a cluster's centroid is only compared with queries of the same
        model and query precision)."""
        from ctxbench.retrieval.query_vector import query_key

        return query_key(self.retriever.embedder)

    def query_vector(self, query: str) -> Any:
        """The query's embedding as retrieval computes it (one encoding for retrieval and the query's cluster);
        None while semantic search is not available."""
        return self.retriever.query_vector(query)

    def scaffold_for(self, mode: str, budget: int | None) -> str | None:
        """The scaffold folded to the plan's share (``budget`` x the mode's ``scaffold_share``); None when the
        index cannot fold it (the view's own scaffold is used). Off, which shows no scaffold, lists the
        one the default mode would send (the largest share when that is Off too)."""
        view = self.retriever.index
        build = getattr(view, "scaffold_at", None)
        if build is None:
            return None
        from ctxbench.planner.modes import share_tokens

        planner = self.config.planner
        profile = planner.mode(mode)
        share = profile.scaffold_share
        if not profile.auto_retrieve:
            share = planner.mode(planner.default_mode).scaffold_share or max(m.scaffold_share for m in planner.modes)
        cap = share_tokens(self.config.default_budget_tokens() if budget is None else budget, share)
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


class _LazyTokenizer:
    """The workbench's tokenizer, loaded when something is first counted (a one-shot ``retrieve`` counts
    nothing, and loading the tokenizer takes half a second)."""

    def __init__(self, workbench: Workbench) -> None:
        self._workbench = workbench

    def __getattr__(self, name: str) -> Any:
        return getattr(self._workbench.tokenizer, name)


def fit_scaffold(build: Callable[[int], str], cap: int, tokenizer: Tokenizer) -> str:
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


@dataclass
class AttachedRepository:
    """An indexed repository plugged into a workbench."""

    root: Path
    index: Any  # codegraph.index.CodeIndex
    retriever: Any  # retrieval.retriever.Retriever
    retrieval: ModeRetrieval  # what the workbench's plans ask
    code: IndexCodeContext  # what request_code_context reads
    files: int = 0  # files the last indexing run saw

    @property
    def semantic_ready(self) -> bool:
        return self.retrieval.semantic_ready

    @property
    def symbols(self) -> int:
        return len(self.index.cards)

    def warm_semantic(self, workbench: Workbench, embedder: Any, progress: EmbedProgress | None = None) -> None:
        """Load ``embedder`` (waiting for it), embed the cards and build the vector index; plans use semantic
        search from then on, and the semantic history strategy ranks with the same model unless the
        workbench has one of its own. A model that cannot load raises ``EmbedderError``."""
        from ctxbench.records.errors import EmbedderError

        embedder.start_loading()
        if not embedder.wait():
            raise EmbedderError(str(embedder.error or "the embedding model did not load"))
        from ctxbench.service import phase_log

        phase_log.mark("model loaded")
        self.retriever.embedder = embedder
        self.retriever.prepare(progress)
        if workbench.embedder is None:
            workbench.embedder = embedder


def load_embedder(config: Config) -> Any:
    """The configured embedding model, loaded (a command-line call can wait for it). Raises EmbedderError."""
    from ctxbench.retrieval.embedder import Embedder

    embedder = Embedder(config.embedding)
    embedder.wait()
    return embedder


@dataclass(frozen=True)
class RepositoryCheck:
    """What indexing ``root`` would mean, asked before a command that answers from a repository indexes it."""

    root: Path
    indexed_before: bool  # this database holds an index of it (the run is incremental)
    source_files: int  # the files the index would read (counted only when it was not indexed before)
    refusal: str = ""  # why it will not be indexed ("": it will)


SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")  # the kernel's and devices' files: never a repository, endless to walk


def root_refusal(repo: Path | str) -> str:
    """Why ``repo`` is no folder to index, "" when it may be: the home folder, a folder above it, the root of the
    disk, or a folder inside /proc, /sys or /dev. The one check every entry that takes a repository makes
    (``open``, ``serve``, ``mcp``, ``retrieve``, ``plan``, ``chat``, ``index``, the benches) and the attach path
    makes again (``attach_repository``, ``index_repository``), links resolved first."""
    from ctxbench.codegraph.index import normalize_root

    root = Path(normalize_root(repo))
    home = Path(normalize_root(Path.home()))
    if root == home or root in home.parents or root == Path(root.anchor):
        where = ("your home folder" if root == home else "the root of the disk" if root == Path(root.anchor)
                 else "a folder above your home folder")
        return (f"{root} is {where}: ctxbench indexes one repository, not every file under it; give --repo PATH "
                "of a project (or run it inside one)")
    for system in map(Path, SYSTEM_FOLDERS):
        if root == system or system in root.parents:
            return f"{root} is inside {system}, the system's own files, not a repository; give --repo PATH of a project"
    return ""


def refuse_unfit_root(repo: Path | str) -> None:
    """Raise ``RefusedRepository`` when ``repo`` is no folder to index."""
    from ctxbench.records.errors import RefusedRepository

    refusal = root_refusal(repo)
    if refusal:
        raise RefusedRepository(refusal)


def check_repository(workbench: Workbench, repo: Path) -> RepositoryCheck:
    """Whether ``repo`` is a folder to index: never one :func:`root_refusal` refuses (the home folder, the whole
    disk, the system's folders), and, the first time, only one holding source files ctxbench reads; a repository
    indexed before always is."""
    from ctxbench.codegraph.index import indexed_roots, normalize_root
    from ctxbench.codegraph.walk import LANGUAGE_BY_EXT, walk

    root = Path(normalize_root(repo))
    refusal = root_refusal(root)
    if refusal:
        return RepositoryCheck(root, False, 0, refusal)
    with workbench.connection() as conn:
        if str(root) in indexed_roots(conn):
            return RepositoryCheck(root, True, 0)
    files = len(walk(root, workbench.config.index).files)
    if not files:
        kinds = ", ".join(sorted(set(LANGUAGE_BY_EXT.values())))
        return RepositoryCheck(root, False, 0, f"{root} holds no source files ctxbench reads ({kinds}), so there is "
                                               "nothing to index or retrieve; give --repo PATH of a repository")
    return RepositoryCheck(root, False, files)


def attach_repository(workbench: Workbench, repo: Path | None, progress: IndexProgress | None = None, *,
                      semantic: bool = True, embedder: Any = None, wait_for_model: bool = True,
                      one_shot: bool = False, semantic_off: str = "") -> AttachedRepository | None:
    """Index ``repo`` (incrementally), plug its retrieval into ``workbench``, return it (None without a repo).

    ``embedder``: the model to use (default: the configured one, loading in the background from here on).
    ``one_shot``: a command that answers once (``retrieve``): what only later turns need (the graph walk of
    personalized retrieval) is built when first asked for, not now. ``semantic_off``: with ``semantic=False``, why
    the user turned it off (``--no-semantic``): the RetrievalSets then say "semantic search off (…)".
    A folder that is no repository to index raises ``RefusedRepository``. Import errors are bugs and propagate.
    """
    if repo is None:
        return None
    from ctxbench.codegraph.index import build_index, load_index, normalize_root
    from ctxbench.service.index_views import retriever_for, view_of

    config = workbench.config
    root = normalize_root(repo)
    refuse_unfit_root(root)
    if semantic and embedder is None:
        from ctxbench.retrieval.embedder import Embedder

        embedder = Embedder(config.embedding)
    if not semantic:
        embedder = None
    conn = workbench.database.dedicated_connection()
    embed = None
    if embedder is not None:
        embedder.start_loading()  # overlaps the model load with parsing
        if wait_for_model:
            from ctxbench.retrieval.vectors import EmbedStats, embed_cards, index_is_current

            # indexing fills the vector cache; retriever.prepare() below builds the FAISS index once from it
            # (or reads it from its file when the cards are the ones it holds: nothing to embed, nothing to read)
            def embed(cards: Any, embed_progress: Any) -> Any:
                if index_is_current(conn, str(root), cards, embedder.key):
                    return EmbedStats(0, len({c.card_hash for c in cards}), 0.0)
                return embed_cards(cards, conn, embedder, embed_progress)

    result = build_index(root, conn, config.index, progress=progress, embed=embed)
    index = load_index(root, conn, config.index, config.capsules)
    retriever = retriever_for(conn, root, config, embedder, index=view_of(index, config, lambda: workbench.tokenizer))
    retriever.semantic_off = semantic_off if embedder is None else ""
    retriever.prepare(wait_for_model=embedder is not None and wait_for_model, walk=not one_shot)
    attached = AttachedRepository(root, index, retriever, ModeRetrieval(retriever, config, _LazyTokenizer(workbench)),
                                  IndexCodeContext(index, config.llm, config.index), files=getattr(result, "files", 0))
    if embedder is not None and workbench.embedder is None:
        workbench.embedder = embedder
    workbench.retriever = attached.retrieval
    return attached


def index_repository(workbench: Workbench, repo: Path, progress: IndexProgress | None = None, *, embed: bool = True) -> Any:
    """Index ``repo`` incrementally (``ctxbench index``) and return the ``IndexResult``. With ``embed`` the cards
    are embedded and the vector index built; the model loads only when a card needs embedding, so an
    unchanged repository never waits for it. A model that cannot load raises ``EmbedderError``."""
    from ctxbench.codegraph.index import build_index, normalize_root

    root = normalize_root(repo)
    refuse_unfit_root(root)
    conn = workbench.database.dedicated_connection()
    embed_fn = None
    if embed:
        from ctxbench.retrieval.embedder import Embedder
        from ctxbench.retrieval.vectors import load_or_build_index

        embedder = Embedder(workbench.config.embedding)  # loads on first encode

        def embed_fn(cards: Any, embed_progress: Any) -> Any:
            _, stats = load_or_build_index(conn, root, cards, embedder, workbench.config.embedding, embed_progress)
            return stats

    return build_index(root, conn, workbench.config.index, progress=progress, embed=embed_fn)
