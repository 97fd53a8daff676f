"""Walk a repository: which files the code index reads, and why the others were skipped.

Respects ``.gitignore`` (nested ones too, with git's precedence: the deepest file that has an
opinion wins) and ``.ctxbenchignore`` (same syntax, same nesting), skips the configured
vendored / virtual-env folders, secret files (never opened; a symlink is a secret file when either its
own name or its target's name is), unsupported extensions, files over
the size limit, binary files (a NUL byte early in the file) and symlinks that resolve outside the
root. Symlinked folders inside the root are followed once (cycles are cut).
"""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

import pathspec

from ctxbench.config import IndexConfig

# extension -> language; TSX is parsed with its own grammar but reported as typescript
LANGUAGE_BY_EXT: dict[str, str] = {
    ".py": "python", ".pyi": "python",  # a .pyi stub is the typed API of its module (codegraph.stubs)
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
}

# skip reasons (the vocabulary of SkippedFile.reason)
SKIP_GITIGNORE = "gitignored"
SKIP_CTXBENCHIGNORE = "ctxbenchignored"
SKIP_DIR = "skipped_dir"
SKIP_SECRET = "secret_file"
SKIP_SYMLINK_OUTSIDE = "symlink_outside_root"
SKIP_SYMLINK_LOOP = "symlink_loop"
SKIP_UNSUPPORTED = "unsupported_language"
SKIP_TOO_LARGE = "too_large"
SKIP_BINARY = "binary"
SKIP_UNREADABLE = "unreadable"
SKIP_REASONS = (
    SKIP_GITIGNORE, SKIP_CTXBENCHIGNORE, SKIP_DIR, SKIP_SECRET, SKIP_SYMLINK_OUTSIDE, SKIP_SYMLINK_LOOP,
    SKIP_UNSUPPORTED, SKIP_TOO_LARGE, SKIP_BINARY, SKIP_UNREADABLE,
)

GITIGNORE = ".gitignore"
CTXBENCHIGNORE = ".ctxbenchignore"


@dataclass(frozen=True)
class SourceFile:
    """A file the index reads."""

    path: str  # relative to the root, POSIX separators
    language: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class SkippedFile:
    """A file or folder the walk left out, and why (one of SKIP_REASONS)."""

    path: str  # relative to the root, POSIX separators; folders end with "/"
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class WalkResult:
    root: str  # the resolved absolute root
    files: tuple[SourceFile, ...]
    skipped: tuple[SkippedFile, ...]


def is_secret_file(name: str, globs: tuple[str, ...]) -> bool:
    """True when a file name matches one of the secret-file globs (case-insensitive)."""
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, g.lower()) for g in globs)


class _IgnoreLayer:
    """The ignore specs of one folder: patterns apply to paths relative to that folder."""

    __slots__ = ("prefix", "git", "ctx")

    def __init__(self, prefix: str, git: pathspec.GitIgnoreSpec | None, ctx: pathspec.GitIgnoreSpec | None):
        self.prefix = prefix
        self.git = git
        self.ctx = ctx


def _read_spec(path: str) -> pathspec.GitIgnoreSpec | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def _ignored(layers: list[_IgnoreLayer], rel: str, is_dir: bool) -> str:
    """The skip reason when ``rel`` is ignored, else ''. The deepest layer with an opinion wins."""
    probe_suffix = "/" if is_dir else ""
    for attr, reason in (("ctx", SKIP_CTXBENCHIGNORE), ("git", SKIP_GITIGNORE)):
        for layer in reversed(layers):
            spec = getattr(layer, attr)
            if spec is None:
                continue
            sub = rel[len(layer.prefix):] if layer.prefix else rel
            result = spec.check_file(sub + probe_suffix)
            if result.include is None and is_dir:
                result = spec.check_file(sub)
            if result.include is not None:
                if result.include:
                    return reason
                break  # negated by the deepest opinion: not ignored by this kind of file
    return ""


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def walk(root: str | Path, config: IndexConfig | None = None) -> WalkResult:
    """Walk ``root`` and return the files to index and the skipped ones with reasons (both sorted by path)."""
    config = config or IndexConfig()
    real_root = os.path.realpath(str(root))
    if not os.path.isdir(real_root):
        raise NotADirectoryError(f"not a directory: {root}")
    skip_dirs = frozenset(config.skip_dirs)
    secret_globs = config.secret_file_globs
    files: list[SourceFile] = []
    skipped: list[SkippedFile] = []
    visited_dirs: set[str] = {real_root}

    def visit(abs_dir: str, rel_dir: str, layers: list[_IgnoreLayer]) -> None:
        git = _read_spec(os.path.join(abs_dir, GITIGNORE))
        ctx = _read_spec(os.path.join(abs_dir, CTXBENCHIGNORE))
        if git is not None or ctx is not None:
            layers = layers + [_IgnoreLayer(rel_dir + "/" if rel_dir else "", git, ctx)]
        try:
            entries = sorted(os.scandir(abs_dir), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(SkippedFile((rel_dir or ".") + "/", SKIP_UNREADABLE, str(exc)))
            return
        for entry in entries:
            name = entry.name
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir()  # follows links
            except OSError as exc:
                skipped.append(SkippedFile(rel, SKIP_UNREADABLE, str(exc)))
                continue
            target = entry.path
            if is_link:
                target = os.path.realpath(entry.path)
                if not _within(target, real_root):
                    skipped.append(SkippedFile(rel + ("/" if is_dir else ""), SKIP_SYMLINK_OUTSIDE, "link leaves the root"))
                    continue
            if is_dir:
                if name in skip_dirs:
                    skipped.append(SkippedFile(rel + "/", SKIP_DIR))
                    continue
                reason = _ignored(layers, rel, True) if layers else ""
                if reason:
                    skipped.append(SkippedFile(rel + "/", reason))
                    continue
                real = os.path.realpath(target) if not is_link else target
                if real in visited_dirs:
                    skipped.append(SkippedFile(rel + "/", SKIP_SYMLINK_LOOP, "folder already walked"))
                    continue
                visited_dirs.add(real)
                visit(target, rel, layers)
                continue
            if name in (GITIGNORE, CTXBENCHIGNORE):
                continue
            reason = _ignored(layers, rel, False) if layers else ""
            if reason:
                skipped.append(SkippedFile(rel, reason))
                continue
            if is_secret_file(name, secret_globs):
                skipped.append(SkippedFile(rel, SKIP_SECRET))
                continue
            if is_link and is_secret_file(os.path.basename(target), secret_globs):
                skipped.append(SkippedFile(rel, SKIP_SECRET, f"link to {os.path.relpath(target, real_root)}"))
                continue
            language = LANGUAGE_BY_EXT.get(os.path.splitext(name)[1].lower(), "")
            if not language:
                skipped.append(SkippedFile(rel, SKIP_UNSUPPORTED))
                continue
            try:
                st = entry.stat()
            except OSError as exc:
                skipped.append(SkippedFile(rel, SKIP_UNREADABLE, str(exc)))
                continue
            if st.st_size > config.max_file_bytes:
                skipped.append(SkippedFile(rel, SKIP_TOO_LARGE, f"{st.st_size} bytes > {config.max_file_bytes}"))
                continue
            try:
                with open(target, "rb") as fh:
                    head = fh.read(config.binary_sniff_bytes)
            except OSError as exc:
                skipped.append(SkippedFile(rel, SKIP_UNREADABLE, str(exc)))
                continue
            if b"\x00" in head:
                skipped.append(SkippedFile(rel, SKIP_BINARY))
                continue
            files.append(SourceFile(rel, language, st.st_size, st.st_mtime_ns))

    visit(real_root, "", [])
    files.sort(key=lambda f: f.path)
    skipped.sort(key=lambda s: s.path)
    return WalkResult(real_root, tuple(files), tuple(skipped))
