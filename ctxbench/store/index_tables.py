"""Store component ``index``: the code index of one or more repositories, keyed by repository root.

Per file: content hash, size and mtime (for incremental runs), the parse result without cards
(the inputs of reference resolution, as JSON), its symbols and cards. Per repository: the
resolved edges, the skipped files, a generation number bumped on every change, and the summary
of the last run.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Iterable, Sequence

from ctxbench.records.code import ParsedFile, RawRef, Symbol, SymbolCard
from ctxbench.store.db import migrate

_PARSE_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # what json.dumps made with these options

COMPONENT = "index"

MIGRATIONS: list[str] = [
    """
    CREATE TABLE code_repos (
        id INTEGER PRIMARY KEY,
        root TEXT NOT NULL UNIQUE,
        fingerprint TEXT NOT NULL DEFAULT '',
        generation INTEGER NOT NULL DEFAULT 0,
        indexed_at REAL NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE code_files (
        repo_id INTEGER NOT NULL REFERENCES code_repos(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        language TEXT NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        sha TEXT NOT NULL,
        error TEXT NOT NULL DEFAULT '',
        partial INTEGER NOT NULL DEFAULT 0,
        parse TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (repo_id, path)
    ) WITHOUT ROWID;
    CREATE TABLE code_symbols (
        repo_id INTEGER NOT NULL REFERENCES code_repos(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        id TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        module TEXT NOT NULL,
        line INTEGER NOT NULL,
        end_line INTEGER NOT NULL,
        language TEXT NOT NULL,
        signature TEXT NOT NULL,
        doc TEXT NOT NULL,
        decorators TEXT NOT NULL,
        parent TEXT NOT NULL,
        PRIMARY KEY (repo_id, path, id)
    ) WITHOUT ROWID;
    CREATE INDEX code_symbols_by_id ON code_symbols (repo_id, id);
    CREATE TABLE code_cards (
        repo_id INTEGER NOT NULL REFERENCES code_repos(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        symbol_id TEXT NOT NULL,
        card_hash TEXT NOT NULL,
        snippet TEXT NOT NULL,
        excerpt TEXT NOT NULL,
        redacted INTEGER NOT NULL,
        PRIMARY KEY (repo_id, path, symbol_id)
    ) WITHOUT ROWID;
    CREATE INDEX code_cards_by_hash ON code_cards (card_hash);
    CREATE TABLE code_edges (
        repo_id INTEGER NOT NULL REFERENCES code_repos(id) ON DELETE CASCADE,
        src TEXT NOT NULL,
        dst TEXT NOT NULL,
        kind TEXT NOT NULL,
        PRIMARY KEY (repo_id, src, dst, kind)
    ) WITHOUT ROWID;
    CREATE TABLE code_skipped (
        repo_id INTEGER NOT NULL REFERENCES code_repos(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        reason TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (repo_id, path)
    ) WITHOUT ROWID;
    """,
]


def ensure_schema(conn: sqlite3.Connection) -> None:
    migrate(conn, COMPONENT, MIGRATIONS)


@dataclass(frozen=True)
class RepoRow:
    id: int
    root: str
    fingerprint: str
    generation: int
    indexed_at: float
    summary: dict


@dataclass(frozen=True)
class FileState:
    path: str
    language: str
    size: int
    mtime_ns: int
    sha: str
    error: str
    partial: bool


def get_repo(conn: sqlite3.Connection, root: str) -> RepoRow | None:
    row = conn.execute(
        "SELECT id, root, fingerprint, generation, indexed_at, summary FROM code_repos WHERE root = ?", (root,)
    ).fetchone()
    if row is None:
        return None
    return RepoRow(row[0], row[1], row[2], row[3], row[4], json.loads(row[5] or "{}"))


def repo_generation(conn: sqlite3.Connection, root: str) -> tuple[int, int, str] | None:
    """(repo id, generation, fingerprint) — the cheap check behind the loaded-index cache."""
    row = conn.execute("SELECT id, generation, fingerprint FROM code_repos WHERE root = ?", (root,)).fetchone()
    return (row[0], row[1], row[2]) if row is not None else None


def create_repo(conn: sqlite3.Connection, root: str) -> RepoRow:
    conn.execute("INSERT OR IGNORE INTO code_repos (root) VALUES (?)", (root,))
    repo = get_repo(conn, root)
    assert repo is not None
    return repo


def list_repos(conn: sqlite3.Connection) -> list[RepoRow]:
    rows = conn.execute("SELECT id, root, fingerprint, generation, indexed_at, summary FROM code_repos ORDER BY root")
    return [RepoRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5] or "{}")) for r in rows]


def finish_run(conn: sqlite3.Connection, repo_id: int, fingerprint: str, indexed_at: float, summary: dict,
               bump: bool) -> int:
    conn.execute(
        "UPDATE code_repos SET fingerprint = ?, indexed_at = ?, summary = ?, generation = generation + ? WHERE id = ?",
        (fingerprint, indexed_at, json.dumps(summary, sort_keys=True), 1 if bump else 0, repo_id),
    )
    return int(conn.execute("SELECT generation FROM code_repos WHERE id = ?", (repo_id,)).fetchone()[0])


def file_states(conn: sqlite3.Connection, repo_id: int) -> dict[str, FileState]:
    rows = conn.execute(
        "SELECT path, language, size, mtime_ns, sha, error, partial FROM code_files WHERE repo_id = ?", (repo_id,)
    )
    return {r[0]: FileState(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6])) for r in rows}


def touch_files(conn: sqlite3.Connection, repo_id: int, rows: Iterable[tuple[str, int, int]]) -> None:
    """Record a new size/mtime for files whose content hash did not change."""
    conn.executemany(
        "UPDATE code_files SET size = ?, mtime_ns = ? WHERE repo_id = ? AND path = ?",
        [(size, mtime, repo_id, path) for path, size, mtime in rows],
    )


def delete_files(conn: sqlite3.Connection, repo_id: int, paths: Sequence[str]) -> None:
    rows = [(repo_id, p) for p in paths]
    for table in ("code_files", "code_symbols", "code_cards"):
        conn.executemany(f"DELETE FROM {table} WHERE repo_id = ? AND path = ?", rows)


def card_hashes_for(conn: sqlite3.Connection, repo_id: int, paths: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        found.update(r[0] for r in conn.execute(
            "SELECT card_hash FROM code_cards WHERE repo_id = ? AND path = ?", (repo_id, path)))
    return found


def write_files(conn: sqlite3.Connection, repo_id: int,
                items: Sequence[tuple[ParsedFile, int, int, str]]) -> None:
    """Insert parsed files: (parsed, size, mtime_ns, sha) each; their previous rows must be deleted first."""
    conn.executemany(
        "INSERT INTO code_files (repo_id, path, language, size, mtime_ns, sha, error, partial, parse) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(repo_id, p.path, p.language, size, mtime, sha, p.error, int(p.partial),
          dump_parse(p) if (not p.error or p.partial) else "") for p, size, mtime, sha in items],
    )
    conn.executemany(
        "INSERT OR REPLACE INTO code_symbols (repo_id, path, id, kind, name, module, line, end_line, language, "
        "signature, doc, decorators, parent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(repo_id, s.path, s.id, s.kind, s.name, s.module, s.line, s.end_line, s.language, s.signature, s.doc,
          json.dumps(s.decorators) if s.decorators else "[]", s.parent) for p, *_ in items for s in p.symbols],
    )
    conn.executemany(
        "INSERT OR REPLACE INTO code_cards (repo_id, path, symbol_id, card_hash, snippet, excerpt, redacted) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(repo_id, c.path, c.symbol_id, c.card_hash, c.snippet, c.excerpt, int(c.redacted))
         for p, *_ in items for c in p.cards],
    )


def load_parses(conn: sqlite3.Connection, repo_id: int, exclude: set[str] | frozenset[str] = frozenset()
                ) -> list[ParsedFile]:
    """The stored parse results (without cards) of a repository's files, except ``exclude``."""
    out = []
    rows = conn.execute(
        "SELECT path, language, error, partial, parse FROM code_files WHERE repo_id = ? ORDER BY path", (repo_id,)
    )
    for path, language, error, partial, blob in rows:
        if path in exclude:
            continue
        if blob:
            out.append(load_parse(path, language, blob, error, bool(partial)))
        else:
            out.append(ParsedFile(path, "", language, error=error, partial=bool(partial)))
    return out


def replace_edges(conn: sqlite3.Connection, repo_id: int, edges: Iterable[tuple[str, str, str]]) -> None:
    conn.execute("DELETE FROM code_edges WHERE repo_id = ?", (repo_id,))
    conn.executemany("INSERT OR IGNORE INTO code_edges (repo_id, src, dst, kind) VALUES (?, ?, ?, ?)",
                     [(repo_id, a, b, k) for a, b, k in edges])


def load_edges(conn: sqlite3.Connection, repo_id: int) -> list[tuple[str, str, str]]:
    return [(r[0], r[1], r[2]) for r in conn.execute(
        "SELECT src, dst, kind FROM code_edges WHERE repo_id = ?", (repo_id,))]


def skipped_rows(conn: sqlite3.Connection, repo_id: int) -> list[tuple[str, str, str]]:
    return [(r[0], r[1], r[2]) for r in conn.execute(
        "SELECT path, reason, detail FROM code_skipped WHERE repo_id = ? ORDER BY path", (repo_id,))]


def replace_skipped(conn: sqlite3.Connection, repo_id: int, rows: Sequence[tuple[str, str, str]]) -> None:
    conn.execute("DELETE FROM code_skipped WHERE repo_id = ?", (repo_id,))
    conn.executemany("INSERT OR REPLACE INTO code_skipped (repo_id, path, reason, detail) VALUES (?, ?, ?, ?)",
                     [(repo_id, *r) for r in rows])


def parse_errors(conn: sqlite3.Connection, repo_id: int) -> list[tuple[str, str, bool]]:
    return [(r[0], r[1], bool(r[2])) for r in conn.execute(
        "SELECT path, error, partial FROM code_files WHERE repo_id = ? AND error != '' ORDER BY path", (repo_id,))]


def load_symbols_and_cards(conn: sqlite3.Connection, repo_id: int) -> tuple[dict[str, Symbol], dict[str, SymbolCard]]:
    """Every symbol and its card; when two files define the same id, the first path wins."""
    symbols: dict[str, Symbol] = {}
    cards: dict[str, SymbolCard] = {}
    rows = conn.execute(
        "SELECT s.id, s.kind, s.name, s.module, s.path, s.line, s.end_line, s.language, s.signature, s.doc, "
        "s.decorators, s.parent, c.snippet, c.excerpt, c.redacted FROM code_symbols s "
        "LEFT JOIN code_cards c ON c.repo_id = s.repo_id AND c.path = s.path AND c.symbol_id = s.id "
        "WHERE s.repo_id = ? ORDER BY s.path, s.line, s.id",
        (repo_id,),
    )
    for (sid, kind, name, module, path, line, end_line, language, signature, doc, decorators, parent,
         snippet, excerpt, redacted) in rows:
        if sid in symbols:
            continue
        decos = tuple(json.loads(decorators)) if decorators and decorators != "[]" else ()
        symbols[sid] = Symbol(sid, kind, name, module, path, line, end_line, language, signature, doc, decos, parent)
        if snippet is not None:
            cards[sid] = SymbolCard(sid, kind, module, path, line, end_line, signature, doc, snippet, decos,
                                    excerpt, bool(redacted), language)
    return symbols, cards


# -- serialisation of a parsed file (the resolution inputs; cards are stored apart) --------------

def dump_parse(parsed: ParsedFile) -> str:
    """The resolution inputs of a parsed file (everything but the cards) as compact JSON."""
    # tuples are JSON arrays as lists are: the same text without a list built per row
    return _PARSE_JSON.encode([
        parsed.module,
        [_symbol_row(s) for s in parsed.symbols],
        [(r.source, r.kind, r.name) for r in parsed.refs],
        parsed.imports,
        parsed.bindings,
        parsed.star_imports,
        parsed.attr_types,
        parsed.is_package,
    ])


def load_parse(path: str, language: str, blob: str, error: str = "", partial: bool = False) -> ParsedFile:
    module, symbols, refs, imports, bindings, stars, attrs, is_package = json.loads(blob)
    return ParsedFile(
        path=path,
        module=module,
        language=language,
        symbols=tuple(_symbol_from_row(r, path, language) for r in symbols),
        refs=tuple(RawRef(*r) for r in refs),
        imports=tuple(imports),
        bindings=tuple((a, b) for a, b in bindings),
        star_imports=tuple(stars),
        attr_types=tuple((a, b, c) for a, b, c in attrs),
        is_package=is_package,
        error=error,
        partial=partial,
    )


def _symbol_row(s: Symbol) -> tuple:
    return (s.id, s.kind, s.name, s.module, s.line, s.end_line, s.signature, s.doc, s.decorators, s.parent)


def _symbol_from_row(row: list, path: str, language: str) -> Symbol:
    sid, kind, name, module, line, end_line, signature, doc, decorators, parent = row
    return Symbol(sid, kind, name, module, path, line, end_line, language, signature, doc, tuple(decorators), parent)
