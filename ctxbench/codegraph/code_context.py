"""Symbol bodies and the known names of one indexed repository, read from its files.

``request_code_context`` expands a symbol (or a file) with :meth:`IndexCodeContext.expand`; the
reflection step draws its vocabulary of symbol ids and paths from :meth:`IndexCodeContext.known_names`.
A symbol's body is read from the file at the line span the index recorded, with secrets masked the
way cards are; files that hold secrets are never read, and nothing outside the repository is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxbench.config import IndexConfig, LLMConfig


class IndexCodeContext:
    """Symbol bodies and the known names of one indexed repository."""

    def __init__(self, index: Any, llm: LLMConfig, index_config: IndexConfig) -> None:
        """``llm``: the query_db limits a tool answer keeps to; ``index_config``: the secret files never read."""
        self.index = index
        self.root = Path(index.root).resolve()
        self.llm = llm
        self.index_config = index_config

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
        limit = self.llm.query_db_max_chars
        text = symbol.strip().removeprefix("path:")
        if text in self.index.by_path:
            return self._file(text, limit)
        sid, candidates = self.resolve(symbol)
        if sid is None:
            if candidates:
                return "ambiguous symbol; one of: " + ", ".join(candidates[: self.llm.query_db_max_rows])
            return None
        sym = self.index.symbols[sid]
        body = self._lines(sym.path, sym.line, sym.end_line)
        if body is None:
            return None
        header = f"# {sid} ({sym.kind}) — {sym.path}:{sym.line}-{sym.end_line}"
        return _cap(header + "\n" + body, limit)

    def source_lines(self, symbol: str, limit: int) -> tuple[str, int, list[str]] | None:
        """The symbol's lines as the file has them (secrets masked): ``(path, first line number, lines)``, at most
        ``limit`` lines from its first; None when the symbol or its file is unknown."""
        sid, _ = self.resolve(symbol)
        if sid is None:
            return None
        sym = self.index.symbols[sid]
        body = self._lines(sym.path, sym.line, min(sym.end_line, sym.line + limit - 1))
        return (sym.path, sym.line, body.splitlines()) if body is not None else None

    def known_names(self) -> tuple[list[str], list[str]]:
        return list(self.index.symbols), list(self.index.by_path)

    # -- files ------------------------------------------------------------------------------

    def _read(self, rel: str) -> str | None:
        return read_masked(self.root, rel, self.index_config.secret_file_globs)

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
        symbols = ", ".join(self.index.by_path.get(rel, ())[: self.llm.query_db_max_rows])
        return _cap(f"# {rel} (defines: {symbols or 'nothing indexed'})\n{text}", limit)


def read_masked(root: Path, rel: str, secret_globs: tuple[str, ...]) -> str | None:
    """The text of the file ``rel`` under ``root`` with secrets masked as cards mask them; None for a file
    outside the repository, a secret file, or one that cannot be read."""
    from ctxbench.redaction import redact_file_cached
    from ctxbench.codegraph.walk import is_secret_file

    path = (root / rel).resolve()
    if not path.is_relative_to(root) or is_secret_file(path.name, secret_globs):
        return None
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return redact_file_cached(raw)[0]


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[cut at {limit} characters]"
