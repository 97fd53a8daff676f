"""Build and load the code index of a repository: files, symbols, cards, edges, in the store.

``build_index`` is incremental: a file whose size and mtime (or, failing that, content hash)
did not change is not read again; a changed file is parsed again and only its symbols and
cards are rewritten; references are resolved again over all files (from the stored per-file
parse results), so edges from unchanged files follow targets that moved. An unchanged
repository writes nothing but the skipped-file list when that changed.

``load_index`` returns a ``CodeIndex`` (symbols, cards, graph) and caches it per database and
root until the index's generation changes, so retrieval can call it on every query.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import networkx as nx

from ctxbench.heap import gc_paused
from ctxbench.codegraph import graph as graphmod
from ctxbench.codegraph import parse_pool
from ctxbench.codegraph.phase_clock import PHASE_CARDS, PHASE_SECRETS, PhaseClock
from ctxbench.records.code import ParsedFile
from ctxbench.codegraph.python_ast import module_name_for, parse_python
from ctxbench.codegraph.resolve import Edge, resolve_edge_rows
from ctxbench.codegraph.stubs import merge_stub_pairs, stub_partner
from ctxbench.records.code import Symbol, SymbolCard
from ctxbench.codegraph.walk import SkippedFile, WalkResult, walk
from ctxbench.config import CapsuleConfig, IndexConfig
from ctxbench.records.capsules import Capsule
from ctxbench.redaction import load_rules
from ctxbench.store import capsules as capsule_tables
from ctxbench.store import index_tables as tables
from ctxbench.store.db import transaction
from ctxbench.store.locks import exclusive

PARSER_VERSION = 6  # bump when parsing, cards or secret masking change: every file is parsed again
LOADED_INDEX_CACHE_SIZE = 4
WRITE_CACHE_KIB = 32 * 1024  # SQLite page cache while a run writes (the pages of the rows it writes, at most)

Progress = Callable[[str, int, int], None]  # (phase, done, total)

PHASE_WALK = "walk"
PHASE_PARSE = "parse"  # symbols, references and cards
PHASE_RESOLVE = "resolve"  # references -> edges
PHASE_STORE = "store"
PHASE_CAPSULES = "capsules"  # (timing only) capsules covering a changed file marked stale
# the timing phases of a run that changed the index, in order (``IndexResult.phases``; PHASE_WAIT first when it
# waited, PHASE_EMBED last when it embedded): the parse phase's progress covers secrets, parse and cards
TIMED_PHASES = (PHASE_WALK, "diff", PHASE_SECRETS, PHASE_PARSE, PHASE_CARDS, PHASE_RESOLVE, PHASE_STORE,
                PHASE_CAPSULES)
PHASE_EMBED = "embed"
PHASE_WAIT = "wait"  # another run indexes this database: this one waits for it (reported once, 0 of 1)
INDEX_LOCK = "index"


class IndexNotFound(LookupError):
    """The repository has not been indexed in this database."""


@dataclass(frozen=True)
class EmbedStats:
    """What an embedder reports back to ``build_index``."""

    embedded: int = 0  # cards embedded in this run
    reused: int = 0  # cards whose vector came from the cache (same card hash and model)
    model: str = ""
    note: str = ""


# embed(cards, progress) -> EmbedStats; progress is (done, total). Receives every card of the index.
EmbedFn = Callable[[Sequence[SymbolCard], Callable[[int, int], None]], Any]


@dataclass(frozen=True)
class ParseError:
    path: str
    error: str
    partial: bool = False  # the definitions outside the error were kept


@dataclass(frozen=True)
class IndexResult:
    root: str
    files: int  # source files in the index (including the ones that failed to parse)
    symbols: int
    edges: int
    cards: int
    files_parsed: int  # parsed in this run
    files_reused: int  # unchanged since the last run
    files_removed: int
    cards_reused: int  # cards whose hash was already in the index
    cards_embedded: int
    vectors_reused: int
    embedded: bool  # an embedder ran
    embed_note: str
    skipped: tuple[SkippedFile, ...]
    parse_errors: tuple[ParseError, ...]
    phases: tuple[tuple[str, float], ...]  # (phase, seconds) in order, each second in one phase only
    generation: int
    changed: bool  # the index content changed in this run
    waited_for: str = ""  # who held the index lock when this run started ("" when it did not wait)
    vectors_removed: int = 0  # cached vectors of cards that no longer exist, deleted in this run
    capsules_stale: tuple[Capsule, ...] = ()  # capsules that became stale in this run (a covered file changed)

    @property
    def seconds(self) -> float:
        return sum(s for _, s in self.phases)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "files": self.files,
            "symbols": self.symbols,
            "edges": self.edges,
            "cards": self.cards,
            "cards_embedded": self.cards_embedded,
            "cards_reused": self.cards_reused,
            "vectors_reused": self.vectors_reused,
            "vectors_removed": self.vectors_removed,
            "embedded": self.embedded,
            "embed_note": self.embed_note,
            "files_parsed": self.files_parsed,
            "files_reused": self.files_reused,
            "files_removed": self.files_removed,
            "changed": self.changed,
            "generation": self.generation,
            "skipped": [{"path": s.path, "reason": s.reason, **({"detail": s.detail} if s.detail else {})}
                        for s in self.skipped],
            "parse_errors": [{"path": e.path, "error": e.error, "partial": e.partial} for e in self.parse_errors],
            "seconds": {name: round(sec, 4) for name, sec in self.phases},
            "seconds_total": round(self.seconds, 4),
            **({"waited_for": self.waited_for} if self.waited_for else {}),
            **({"capsules_stale": [{"id": c.id, "title": c.title, "stale_files": list(c.stale_files)}
                                   for c in self.capsules_stale]} if self.capsules_stale else {}),
        }


def _index_config(config: IndexConfig | None) -> IndexConfig:
    return IndexConfig() if config is None else config


def normalize_root(root: str | Path) -> str:
    return os.path.realpath(str(root))


def _fingerprint(config: IndexConfig, prefix: str) -> str:
    payload = json.dumps([PARSER_VERSION, prefix, config.snippet_lines, config.excerpt_lines, config.doc_max_chars,
                          config.signature_max_chars, config.card_line_max_chars, config.overload_signatures_max])
    return hashlib.sha1(payload.encode()).hexdigest()[:16]


def python_prefix(root: str, files: Sequence[Any]) -> str:
    """When the root itself is a package (has ``__init__.py``), module ids start with its name."""
    if any(f.path == "__init__.py" for f in files):
        return os.path.basename(root.rstrip(os.sep))
    return ""


@contextmanager
def _write_cache(conn: sqlite3.Connection) -> Iterator[None]:
    """A page cache of WRITE_CACHE_KIB for a run's writes (a cold index of thousands of cards outgrows SQLite's
    default 2 MiB, which then spills pages mid-transaction), the connection's own size back after it."""
    (before,) = conn.execute("PRAGMA cache_size").fetchone()
    if before >= 0 or -before >= WRITE_CACHE_KIB:  # a size in pages, or already as large: left as it is
        yield
        return
    conn.execute(f"PRAGMA cache_size = {-WRITE_CACHE_KIB}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA cache_size = {before}")


def parse_file(text: str, path: str, language: str, config: IndexConfig, prefix: str = "",
               clock: PhaseClock | None = None) -> ParsedFile:
    """Parse one file of any supported language. A blank file (but a package's ``__init__.py``) has nothing to
    retrieve: it is listed among the files, with no symbol and no card to embed. ``clock`` gets the seconds of
    the secret scan and of the cards."""
    if not text.strip() and os.path.basename(path) != "__init__.py":
        if language == "python":
            return ParsedFile(path, module_name_for(path, prefix)[0], language)
        from ctxbench.codegraph.treesitter import module_id_for

        return ParsedFile(path, module_id_for(path), language)
    if language == "python":
        module, is_package = module_name_for(path, prefix)
        return parse_python(text, path, module, is_package, config, clock)
    from ctxbench.codegraph.treesitter import parse_treesitter

    return parse_treesitter(text, path, language, config, clock)


def _with_stub_partners(root: str, walked: WalkResult, to_parse: list[tuple[Any, bytes, str]],
                        removed: Sequence[str]) -> list[tuple[Any, bytes, str]]:
    """``to_parse`` and the other half of every ``.py``/``.pyi`` pair it touches (or that lost its other half):
    the index stores them merged (``codegraph.stubs``), so a change to either parses both."""
    by_path = {f.path: f for f in walked.files}
    have = {f.path for f, *_ in to_parse}
    wanted = {stub_partner(p) for p in [*have, *removed]} - have - {""}
    out = list(to_parse)
    for path in sorted(wanted):
        f = by_path.get(path)
        if f is None:
            continue
        try:
            data = Path(root, f.path).read_bytes()
        except OSError:
            continue
        out.append((f, data, hashlib.blake2b(data, digest_size=16).hexdigest()))
    return out


def _noop(phase: str, done: int, total: int) -> None:
    return None


def _write_changes(conn: sqlite3.Connection, repo: Any, root_s: str, icfg: IndexConfig, prefix: str,
                   fingerprint: str, full: bool, states: Mapping[str, Any], removed: list[str],
                   to_parse: list[tuple[Any, bytes, str]], touched: list[tuple[str, int, int]],
                   skipped_rows: list[tuple[str, str, str]], n_files: int, report: Progress,
                   phases: list[tuple[str, float]]) -> tuple[dict, int, int, int, tuple[Capsule, ...]]:
    """Parse ``to_parse``, resolve the edges again and store it all (one transaction); appends the phases' seconds
    to ``phases`` and returns (summary, generation, files parsed, cards reused, capsules made stale)."""
    t0 = time.perf_counter()
    total = len(to_parse)
    report(PHASE_PARSE, 0, total)

    def parse_one(item: tuple[Any, bytes, str], clock: PhaseClock) -> ParsedFile:
        f, data, _ = item
        return parse_file(data.decode("utf-8", errors="replace"), f.path, f.language, icfg, prefix, clock)

    files, secrets_s, cards_s, _ = parse_pool.parse_files(
        to_parse, parse_one, parse_pool.processes_for(to_parse, icfg), lambda done: report(PHASE_PARSE, done, total),
        before_fork=load_rules)
    parsed = [(p, f.size, f.mtime_ns, sha) for p, (f, _, sha) in zip(files, to_parse)]
    typed = merge_stub_pairs({p.path: p for p, *_ in parsed})
    parsed = [(typed[p.path], *rest) for p, *rest in parsed]
    # with several processes, the secret scan's and the cards' shares of the parse's wall seconds
    phases.append((PHASE_SECRETS, secrets_s))
    phases.append((PHASE_PARSE, time.perf_counter() - t0 - secrets_s - cards_s))
    phases.append((PHASE_CARDS, cards_s))

    t0 = time.perf_counter()
    changed_paths = [p.path for p, *_ in parsed]
    with transaction(conn):
        old_hashes = set() if full else tables.card_hashes_for(conn, repo.id, changed_paths)
        tables.delete_files(conn, repo.id, removed + changed_paths if not full else list(states))
        tables.write_files(conn, repo.id, parsed)
        if touched and not full:
            tables.touch_files(conn, repo.id, touched)
        t_store = time.perf_counter() - t0

        t1 = time.perf_counter()
        report(PHASE_RESOLVE, 0, 1)
        # a full run has just written every file it keeps: nothing else to read back
        others = [] if full else tables.load_parses(conn, repo.id, exclude=set(changed_paths))
        all_parsed = sorted(others + [p for p, *_ in parsed], key=lambda p: p.path)
        edges = resolve_edge_rows(all_parsed)
        report(PHASE_RESOLVE, 1, 1)
        phases.append((PHASE_RESOLVE, time.perf_counter() - t1))

        t2 = time.perf_counter()
        tables.replace_edges(conn, repo.id, edges)
        tables.replace_skipped(conn, repo.id, skipped_rows)
        n_symbols = conn.execute("SELECT COUNT(DISTINCT id) FROM code_symbols WHERE repo_id = ?",
                                 (repo.id,)).fetchone()[0]
        n_cards = conn.execute("SELECT COUNT(*) FROM code_cards WHERE repo_id = ?", (repo.id,)).fetchone()[0]
        new_cards = sum(1 for p, *_ in parsed for c in p.cards if c.card_hash not in old_hashes)
        summary = {"files": n_files, "symbols": n_symbols, "edges": len(edges), "cards": n_cards}
        generation = tables.finish_run(conn, repo.id, fingerprint, time.time(), summary, bump=True)
        t_store += time.perf_counter() - t2
        t3 = time.perf_counter()
        # capsules covering a file that changed (or went) are stale from now on, in the same transaction (a
        # repository that never had a capsule has nothing to compare: its files are not read back for it)
        capsules_stale = capsule_tables.mark_stale(
            conn, root_s, {path: st.sha for path, st in tables.file_states(conn, repo.id).items()}
        ) if capsule_tables.stamp(conn, root_s) else ()
        t_capsules = time.perf_counter() - t3
        t4 = time.perf_counter()
    t_store += time.perf_counter() - t4  # the commit
    phases.append((PHASE_STORE, t_store))
    phases.append((PHASE_CAPSULES, t_capsules))
    parsed_count = len(parsed)
    cards_reused = n_cards - new_cards
    return summary, generation, parsed_count, cards_reused, capsules_stale


def build_index(root: str | Path, conn: sqlite3.Connection, config: IndexConfig | None = None, *,
                progress: Progress | None = None, embed: EmbedFn | None = None) -> IndexResult:
    """Index ``root`` into the store behind ``conn`` (incrementally) and return what happened.

    One run at a time per database: a run that finds another one going (another ``ctxbench index``, a
    workbench attaching the repository) reports ``PHASE_WAIT``, waits for it, then diffs against what
    it stored, so the same files are never written twice (and an unchanged repository is a no-op).
    """
    report = progress or _noop
    holder: list[str] = []

    def waiting(who: str) -> None:
        holder.append(who)
        report(PHASE_WAIT, 0, 1)

    started = time.perf_counter()
    with exclusive(conn, INDEX_LOCK, waiting) as waited:
        waited_s = time.perf_counter() - started
        if waited:
            report(PHASE_WAIT, 1, 1)
        with _write_cache(conn):
            result = _build_index(root, conn, config, report, embed)
    if waited:
        result = dataclasses.replace(result, waited_for=holder[0] if holder else "another run",
                                     phases=((PHASE_WAIT, waited_s),) + result.phases)
    return result


def _build_index(root: str | Path, conn: sqlite3.Connection, config: IndexConfig | None,
                 report: Progress, embed: EmbedFn | None) -> IndexResult:
    icfg = _index_config(config)
    root_s = normalize_root(root)
    phases: list[tuple[str, float]] = []
    tables.ensure_schema(conn)
    capsule_tables.ensure_schema(conn)

    t0 = time.perf_counter()
    report(PHASE_WALK, 0, 1)
    walked: WalkResult = walk(root_s, icfg)
    report(PHASE_WALK, 1, 1)
    phases.append((PHASE_WALK, time.perf_counter() - t0))

    t0 = time.perf_counter()
    with transaction(conn):
        repo = tables.create_repo(conn, root_s)
    prefix = python_prefix(root_s, walked.files)
    fingerprint = _fingerprint(icfg, prefix)
    full = repo.fingerprint != fingerprint
    states = tables.file_states(conn, repo.id)
    walked_paths = {f.path for f in walked.files}
    removed = sorted(p for p in states if p not in walked_paths)
    to_parse: list[tuple[Any, bytes, str]] = []
    touched: list[tuple[str, int, int]] = []
    for f in walked.files:
        st = states.get(f.path)
        if not full and st is not None and st.language == f.language and st.size == f.size \
                and st.mtime_ns == f.mtime_ns:
            continue
        try:
            data = Path(root_s, f.path).read_bytes()
        except OSError:
            continue
        sha = hashlib.blake2b(data, digest_size=16).hexdigest()
        if not full and st is not None and st.sha == sha and st.language == f.language:
            touched.append((f.path, f.size, f.mtime_ns))
            continue
        to_parse.append((f, data, sha))
    to_parse = _with_stub_partners(root_s, walked, to_parse, removed)
    parsing = {f.path for f, *_ in to_parse}
    touched = [t for t in touched if t[0] not in parsing]
    skipped_rows = [(s.path, s.reason, s.detail) for s in walked.skipped]
    changed = bool(to_parse or removed or full)
    phases.append(("diff", time.perf_counter() - t0))

    if not changed:
        t0 = time.perf_counter()
        with transaction(conn):
            if touched:
                tables.touch_files(conn, repo.id, touched)
            if tables.skipped_rows(conn, repo.id) != skipped_rows:
                tables.replace_skipped(conn, repo.id, skipped_rows)
        phases.append((PHASE_STORE, time.perf_counter() - t0))
        summary = repo.summary
        generation = repo.generation
        parsed_count = 0
        cards_reused = int(summary.get("cards", 0))
        capsules_stale = ()
    else:
        # the GC paused for the whole run, not the parse alone: a run allocates hundreds of thousands of objects
        # that live until it ends (its records, rows, edges) and none of them cyclic garbage; the collector's
        # passes over them after the parse (in the resolution and the store) cost a tenth of a cold index. The
        # run's records are freed (by reference counts) on ``_write_changes``' return, before the GC is back.
        with gc_paused():  # parsing allocates many small objects; GC passes over them cost a third of the time
            summary, generation, parsed_count, cards_reused, capsules_stale = _write_changes(
                conn, repo, root_s, icfg, prefix, fingerprint, full, states, removed, to_parse, touched,
                skipped_rows, len(walked.files), report, phases)

    embedded = 0
    vectors_reused = 0
    vectors_removed = 0
    embed_note = "not embedded (--no-embed or no embedder available)"
    if embed is not None:
        t0 = time.perf_counter()
        index = load_index(root_s, conn, icfg)
        cards = list(index.cards.values())
        report(PHASE_EMBED, 0, len(cards))
        last = [0, len(cards)]

        def embed_progress(done: int, total: int) -> None:
            last[:] = [done, total]
            report(PHASE_EMBED, done, total)

        stats = embed(cards, embed_progress)
        if last[0] < last[1]:  # cached vectors never call back: close the phase anyway
            report(PHASE_EMBED, len(cards), len(cards))
        embedded = int(getattr(stats, "embedded", 0) or 0)
        vectors_reused = int(getattr(stats, "reused", 0) or 0)
        vectors_removed = int(getattr(stats, "removed", 0) or 0)
        model = getattr(stats, "model", "")
        embed_note = str(getattr(stats, "note", "") or (f"embedded with {model}" if model else "embedded"))
        phases.append((PHASE_EMBED, time.perf_counter() - t0))

    errors = tuple(ParseError(p, e, partial) for p, e, partial in tables.parse_errors(conn, repo.id))
    return IndexResult(
        root=root_s,
        files=len(walked.files),
        symbols=int(summary.get("symbols", 0)),
        edges=int(summary.get("edges", 0)),
        cards=int(summary.get("cards", 0)),
        files_parsed=parsed_count,
        files_reused=len(walked.files) - parsed_count,
        files_removed=len(removed),
        cards_reused=cards_reused,
        cards_embedded=embedded,
        vectors_reused=vectors_reused,
        embedded=embed is not None,
        embed_note=embed_note,
        skipped=walked.skipped,
        parse_errors=errors,
        phases=tuple(phases),
        generation=generation,
        changed=changed,
        vectors_removed=vectors_removed,
        capsules_stale=capsules_stale,
    )


@dataclass(frozen=True, eq=False)
class CodeIndex:
    """A loaded code index. Shared between callers through the cache: treat it (and its graph) as read-only."""

    root: str
    version: str  # changes whenever the index content changes; use it in RetrievalSet ids
    generation: int
    symbols: Mapping[str, Symbol]
    cards: Mapping[str, SymbolCard]
    graph: nx.DiGraph
    config: IndexConfig = field(default_factory=IndexConfig)
    capsules: tuple[Capsule, ...] = ()  # the repository's capsules when it was loaded, stale ones too
    capsule_config: CapsuleConfig = field(default_factory=CapsuleConfig)

    @cached_property
    def centrality(self) -> dict[str, float]:
        """Plain PageRank of every symbol (computed once)."""
        return graphmod.pagerank(self.graph, None, self.config)

    @cached_property
    def anchor_lines(self) -> tuple[str, ...]:
        """The scaffold's anchors (entry points, public API; ``codegraph.anchors``), computed once."""
        from ctxbench.codegraph.anchors import anchor_lines, find_anchors

        from ctxbench.codegraph.capsules import anchor_notes

        found = find_anchors(Path(self.root), self.symbols, self.graph, self.centrality, self.config.scaffold_anchors)
        notes = anchor_notes(self.capsules, self.capsule_config.headline_chars)
        named = {a.symbol for a in found} | {self.symbols[a.symbol].module for a in found if a.symbol in self.symbols}
        modules = sorted((c.subject for c in self.capsules if c.kind == "module" and not c.stale
                          and c.subject not in named and c.subject in notes),
                         key=lambda m: (-self.centrality.get(m, 0.0), m))
        return tuple(anchor_lines(found, self.symbols, notes, modules[: self.capsule_config.scaffold_modules]))

    @cached_property
    def by_path(self) -> dict[str, tuple[str, ...]]:
        """File path -> the ids of the symbols defined in it, in line order."""
        out: dict[str, list[str]] = {}
        for sid, sym in self.symbols.items():
            out.setdefault(sym.path, []).append(sid)
        return {p: tuple(ids) for p, ids in out.items()}

    def scaffold(self, budget_tokens: int, tokenizer: Any) -> str:
        """The orientation scaffold for this index in ``budget_tokens`` (cached per budget and tokenizer)."""
        key = (budget_tokens, getattr(tokenizer, "name", type(tokenizer).__name__))
        cache: dict = self.__dict__.setdefault("_scaffolds", {})
        text = cache.get(key)
        if text is None:
            from ctxbench.codegraph.scaffold import build_scaffold

            text = build_scaffold(self.graph, self.symbols, budget_tokens, tokenizer, config=self.config,
                                  scores=self.centrality, anchors=self.anchor_lines)
            cache[key] = text
        return text


_LOADED: OrderedDict[tuple[str, str], CodeIndex] = OrderedDict()
_LOADED_LOCK = threading.Lock()


def _db_identity(conn: sqlite3.Connection) -> str:
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return row[2] or f"memory:{id(conn)}"
    return f"memory:{id(conn)}"


def load_index(root: str | Path, conn: sqlite3.Connection, config: IndexConfig | None = None,
               capsules: CapsuleConfig | None = None) -> CodeIndex:
    """The code index of ``root`` from the store (cached until the index changes), read with the index section and
    the capsules' (their anchors join the scaffold). Raises IndexNotFound."""
    icfg = _index_config(config)
    root_s = normalize_root(root)
    try:
        state = tables.repo_generation(conn, root_s)
    except sqlite3.OperationalError:  # no index tables yet
        state = None
    if state is None:
        raise IndexNotFound(f"{root_s} is not indexed yet: run `ctxbench index {root_s}`")
    repo_id, generation, fingerprint = state
    # the capsules' stamp is part of the version (they change the scaffold's anchors and the RetrievalSets);
    # absent while the repository never had a capsule, so those versions stay what they were
    stamp = capsule_tables.stamp(conn, root_s)
    base = f"{repo_id}.{generation}.{fingerprint}"
    version = base + (f".c{stamp}" if stamp else "")
    ccfg = capsules if capsules is not None else CapsuleConfig()
    key = (_db_identity(conn), root_s)
    with _LOADED_LOCK:
        cached = _LOADED.get(key)
        if cached is not None and cached.version == version and cached.config == icfg \
                and cached.capsule_config == ccfg:
            _LOADED.move_to_end(key)
            return cached
    capsules = capsule_tables.capsules_of(conn, root_s) if stamp else ()
    if cached is not None and cached.config == icfg and (cached.version == base
                                                         or cached.version.startswith(base + ".c")):
        # only the capsules changed: the same symbols and graph (and their PageRank), new capsules
        index = CodeIndex(root_s, version, generation, cached.symbols, cached.cards, cached.graph, icfg, capsules,
                          ccfg)
        if "centrality" in cached.__dict__:
            index.__dict__["centrality"] = cached.centrality
    else:
        with gc_paused():  # tens of thousands of records and graph nodes, none of them garbage: no GC passes
            symbols, cards = tables.load_symbols_and_cards(conn, repo_id)
            edges = [Edge(a, b, k) for a, b, k in tables.load_edges(conn, repo_id)]
            graph = graphmod.build_graph(symbols.values(), edges)
        index = CodeIndex(root_s, version, generation, symbols, cards, graph, icfg, capsules, ccfg)
    with _LOADED_LOCK:
        _LOADED[key] = index
        _LOADED.move_to_end(key)
        while len(_LOADED) > LOADED_INDEX_CACHE_SIZE:
            _LOADED.popitem(last=False)
    return index


def indexed_roots(conn: sqlite3.Connection) -> list[str]:
    """Roots indexed in this database."""
    try:
        return [r.root for r in tables.list_repos(conn)]
    except sqlite3.OperationalError:
        return []
